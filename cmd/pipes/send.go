package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/spf13/cobra"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/internal/sqsname"
	"github.com/pipesproject/pipes/redrive"
	"github.com/pipesproject/pipes/source"
)

type sendFlags struct {
	files           []string
	pipe            string
	input           string
	records         bool
	create          bool
	maxReceiveCount int
	yes             bool
	groupID         string
	awsf            awsFlags // --region, --profile, --endpoint-url (awsflags.go)
}

func newSendCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var f sendFlags
	cmd := &cobra.Command{
		Use:   "send -f FILE [--pipe NAME] --input EVENTS.jsonl [--records] [--create [--max-receive-count 5] [--yes]]",
		Short: "Send events to a pipe's source queue (SQS or RabbitMQ), to try a pipe against a real queue",
		Long: `Reads events, one per line, from --input (a file, or - for standard input)
and sends them to the source queue of the pipe (--pipe when the files hold
several). Each line is a message body, sent exactly as written (blank lines
are skipped). With --records each line is a whole Pipes record instead: an
SQS record gives its body, its messageAttributes, and for a FIFO queue its
attributes.MessageGroupId and MessageDeduplicationId; a RabbitMQ record
("eventSource": "aws:rmq") gives its data (base64) and its basicProperties
(contentType, contentEncoding, headers, deliveryMode, priority,
correlationId, replyTo, expiration, messageId, type, userId, appId).

An sqs source gets SendMessageBatch calls of up to 10 messages; to a FIFO
queue a plain line goes to message group --group-id with a deduplication id
unique to this run and line. A rabbitmq source gets each message published
to the queue through the default exchange, mandatory, with publisher
confirms; a message is counted sent once the broker confirmed it.

--create creates the queue when it is missing, with a dead-letter queue
(NAME-dlq, or NAME-dlq.fifo) and a redrive policy of --max-receive-count
receives: for SQS a RedrivePolicy, for RabbitMQ a durable quorum queue with
x-delivery-limit and a dead-letter routing key to the durable NAME-dlq queue.
A queue that exists is left as it is. It is meant for local servers and
tests: against an AWS endpoint (no endpoint set, or a host under
amazonaws.com) it is refused unless --yes.

A progress line is shown on standard error when it is a terminal; a summary
line ends the run. Exit 1 when any message could not be sent (each such
line is named), 2 on bad usage or input that is not events.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return sendEvents(cmd.Context(), f, stdin, stdout, stderr)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&f.files, "file", "f", nil, "pipeline file or folder")
	fl.StringVar(&f.pipe, "pipe", "", "the pipe whose source queue gets the events when the files hold several")
	fl.StringVar(&f.input, "input", "", "events file, JSON Lines or one body per line (- for standard input)")
	fl.BoolVar(&f.records, "records", false, "each input line is a whole Pipes SQS or RabbitMQ record")
	fl.BoolVar(&f.create, "create", false, "create the queue, its dead-letter queue and a redrive policy when the queue is missing")
	fl.IntVar(&f.maxReceiveCount, "max-receive-count", 5, "the redrive policy's maxReceiveCount (RabbitMQ: x-delivery-limit) of a queue --create makes")
	fl.BoolVar(&f.yes, "yes", false, "let --create create queues on AWS itself")
	fl.StringVar(&f.groupID, "group-id", "pipes-send", "the MessageGroupId of plain lines sent to a FIFO queue")
	f.awsf.register(fl, "the sqs source queue")
	return cmd
}

// outgoing is one event to send, read from one input line.
type outgoing struct {
	line int
	body []byte
	// SQS: message attributes, group and deduplication ids ("" none).
	attrs map[string]types.MessageAttributeValue
	group string
	dedup string
	// RabbitMQ: the record's properties, nil for a plain line.
	props *rabbitProps
	// rabbit reports whether the line was a Pipes RabbitMQ record.
	rabbit bool
}

// rabbitProps is the part of a Pipes RabbitMQ record's basicProperties
// that `pipes send` publishes.
type rabbitProps struct {
	ContentType     string         `json:"contentType"`
	ContentEncoding string         `json:"contentEncoding"`
	Headers         map[string]any `json:"headers"`
	DeliveryMode    uint8          `json:"deliveryMode"`
	Priority        uint8          `json:"priority"`
	CorrelationID   string         `json:"correlationId"`
	ReplyTo         string         `json:"replyTo"`
	Expiration      string         `json:"expiration"`
	MessageID       string         `json:"messageId"`
	Type            string         `json:"type"`
	UserID          string         `json:"userId"`
	AppID           string         `json:"appId"`
}

// parseSendLine reads one input line of `pipes send`: the body itself, or
// with records a Pipes SQS or RabbitMQ record.
func parseSendLine(text string, records bool) (outgoing, error) {
	if !records {
		return outgoing{body: []byte(text)}, nil
	}
	var head struct {
		EventSource string `json:"eventSource"`
	}
	if err := json.Unmarshal([]byte(text), &head); err != nil {
		return outgoing{}, fmt.Errorf("not a Pipes SQS or RabbitMQ record: %w", err)
	}
	if head.EventSource == core.EventSourceRabbitMQ {
		var r struct {
			Data  *string      `json:"data"`
			Props *rabbitProps `json:"basicProperties"`
		}
		if err := json.Unmarshal([]byte(text), &r); err != nil {
			return outgoing{}, fmt.Errorf("not a Pipes RabbitMQ record: %w", err)
		}
		if r.Data == nil {
			return outgoing{}, errors.New("not a Pipes RabbitMQ record: data is missing")
		}
		body, err := base64.StdEncoding.DecodeString(*r.Data)
		if err != nil {
			return outgoing{}, fmt.Errorf("a Pipes RabbitMQ record's data must be base64: %w", err)
		}
		if r.Props == nil {
			r.Props = &rabbitProps{}
		}
		return outgoing{body: body, props: r.Props, rabbit: true}, nil
	}
	var r struct {
		Body              *string                            `json:"body"`
		Attributes        map[string]string                  `json:"attributes"`
		MessageAttributes map[string]source.MessageAttribute `json:"messageAttributes"`
	}
	if err := json.Unmarshal([]byte(text), &r); err != nil {
		return outgoing{}, fmt.Errorf("not a Pipes SQS record: %w", err)
	}
	if r.Body == nil {
		return outgoing{}, errors.New("not a Pipes SQS record: body is missing")
	}
	o := outgoing{body: []byte(*r.Body), group: r.Attributes["MessageGroupId"], dedup: r.Attributes["MessageDeduplicationId"]}
	for name, a := range r.MessageAttributes {
		if a.DataType == "" {
			return outgoing{}, fmt.Errorf("messageAttributes.%s: dataType is missing", name)
		}
		if o.attrs == nil {
			o.attrs = map[string]types.MessageAttributeValue{}
		}
		o.attrs[name] = types.MessageAttributeValue{
			DataType: aws.String(a.DataType), StringValue: a.StringValue, BinaryValue: a.BinaryValue,
		}
	}
	return o, nil
}

// readEvents reads every event line of r; bad lines are all named in one
// error.
func readEvents(r io.Reader, name string, records bool) ([]outgoing, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 2<<20)
	var out []outgoing
	var errs []error
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if strings.TrimSpace(text) == "" {
			continue
		}
		o, err := parseSendLine(text, records)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %w", name, line, err))
			continue
		}
		o.line = line
		out = append(out, o)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading events from %s: %w", name, err)
	}
	return out, errors.Join(errs...)
}

func sendEvents(ctx context.Context, f sendFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	if f.input == "" {
		return usageErr(errors.New("--input is required (a JSON Lines file, or - for standard input)"))
	}
	if f.maxReceiveCount < 1 || f.maxReceiveCount > 1000 {
		return usageErr(fmt.Errorf("--max-receive-count must be 1..1000, got %d", f.maxReceiveCount))
	}
	if err := f.awsf.check(); err != nil {
		return usageErr(err)
	}
	specs, err := loadSpecs(pipes.NewRegistry(), f.files)
	if err != nil {
		return err
	}
	spec, err := pickPipe(f.awsf.apply(specs), f.pipe)
	if err != nil {
		return usageErr(err)
	}
	in, name := stdin, "standard input"
	if f.input != "-" {
		file, err := os.Open(f.input)
		if err != nil {
			return usageErr(fmt.Errorf("reading events: %w", err))
		}
		defer file.Close()
		in, name = file, f.input
	}
	events, err := readEvents(in, name, f.records)
	if err != nil {
		return usageErr(err)
	}
	p := newProgress(stderr, len(events))
	switch spec.Source.Type {
	case "sqs":
		return sendSQS(ctx, spec, f, events, p, stderr)
	case "rabbitmq":
		return sendRabbit(ctx, spec, f, events, p, stderr)
	case "memory":
		return usageErr(fmt.Errorf("pipe %s reads a memory queue, which lives only inside its `pipes run` process: give it events with the source's preload file instead", spec.Name))
	}
	return usageErr(fmt.Errorf("pipe %s has a %s source: pipes send works with sqs and rabbitmq sources", spec.Name, spec.Source.Type))
}

// progress shows "sent N/M" on a terminal, and a summary line anywhere.
type progress struct {
	w     io.Writer
	tty   bool
	total int
	last  time.Time
}

func newProgress(w io.Writer, total int) *progress {
	return &progress{w: w, tty: isTerminal(w), total: total}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// update shows the progress line, at most ten times a second.
func (p *progress) update(sent, failed int) {
	if !p.tty || (time.Since(p.last) < 100*time.Millisecond && sent+failed < p.total) {
		return
	}
	p.last = time.Now()
	fmt.Fprintf(p.w, "\rsent %d/%d, %d failed", sent, p.total, failed)
}

// done ends the progress line and prints the summary.
func (p *progress) done(sent, failed int, queue string) {
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintf(p.w, "sent %d of %d message(s) to %s, %d failed\n", sent, p.total, queue, failed)
}

// isAWSHost reports whether host is one of AWS's own (amazonaws.com, in
// any partition's domain).
func isAWSHost(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, d := range []string{"amazonaws.com", "amazonaws.com.cn", "api.aws"} {
		if host == d || strings.HasSuffix(host, "."+d) {
			return true
		}
	}
	return false
}

// sqsEndpointIsAWS reports whether the SQS calls of the source go to AWS
// itself: no endpoint in the file or the SDK's environment, or an AWS host.
func sqsEndpointIsAWS(src config.Source) bool {
	endpoint := src.Endpoint
	for _, env := range []string{"AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL"} {
		if endpoint == "" {
			endpoint = os.Getenv(env)
		}
	}
	if endpoint == "" {
		return true
	}
	u, err := url.Parse(endpoint)
	return err != nil || isAWSHost(u.Hostname())
}

// sendAPI is the part of the SQS client `pipes send` calls.
type sendAPI interface {
	redrive.API
	CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, optFns ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
}

// sqsQueueName is the name of the source's queue, from its name, ARN or
// URL.
func sqsQueueName(src config.Source) string {
	switch {
	case src.QueueName != "":
		return src.QueueName
	case src.QueueARN != "":
		if a, err := sqsname.ParseQueueARN(src.QueueARN); err == nil {
			return a.Name
		}
	}
	parts := strings.Split(strings.TrimRight(src.QueueURL, "/"), "/")
	return parts[len(parts)-1]
}

func sendSQS(ctx context.Context, spec config.Pipe, f sendFlags, events []outgoing, p *progress, stderr io.Writer) error {
	src := spec.Source
	for _, e := range events {
		if e.rabbit {
			return usageErr(fmt.Errorf("%s:%d: a Pipes RabbitMQ record, but pipe %s reads an sqs queue: give Pipes SQS records", f.input, e.line, spec.Name))
		}
	}
	if f.create && !f.yes && sqsEndpointIsAWS(src) {
		return usageErr(fmt.Errorf("pipe %s: --create would create queues on AWS itself (the source has no endpoint, or an AWS one): it is meant for local servers; add --yes to do it anyway", spec.Name))
	}
	guess := redrive.RegionOfURL(src.QueueURL)
	if a, err := redrive.ParseQueueARN(src.QueueARN); err == nil {
		guess = a.Region
	}
	client, err := redrive.NewClient(ctx, redrive.ClientConfig{Region: src.Region, Endpoint: src.Endpoint, Profile: f.awsf.profile, RegionGuess: guess})
	if err != nil {
		return usageErr(fmt.Errorf("pipe %s: %w", spec.Name, err))
	}
	queueURL, err := ensureSQSQueue(ctx, client, src, f, stderr)
	if err != nil {
		return runtimeErr(fmt.Errorf("pipe %s: %w", spec.Name, err))
	}
	fifo := strings.HasSuffix(queueURL, ".fifo") || src.IsFIFO()
	runID := make([]byte, 6)
	_, _ = rand.Read(runID)
	run := hex.EncodeToString(runID)
	sent, failed := 0, 0
	var failures []string
	for start := 0; start < len(events); {
		batch, size := []outgoing{}, 0
		for start < len(events) && len(batch) < 10 {
			n := len(events[start].body)
			if len(batch) > 0 && size+n > 256*1024 {
				break
			}
			batch = append(batch, events[start])
			size += n
			start++
		}
		ok, bad := sendSQSBatch(ctx, client, queueURL, batch, fifo, f.groupID, run)
		sent += ok
		failed += len(bad)
		failures = append(failures, bad...)
		p.update(sent, failed)
		if ctx.Err() != nil {
			break
		}
	}
	p.done(sent, failed, queueURL)
	for _, l := range failures {
		fmt.Fprintln(stderr, l)
	}
	if failed > 0 || sent < len(events) {
		return runtimeErr(fmt.Errorf("%d of %d message(s) were not sent", len(events)-sent, len(events)))
	}
	return nil
}

// sendSQSBatch sends one batch, trying entries that failed for the
// server's sake (not the sender's) up to three times. It returns how many
// were sent and a line for each that was not.
func sendSQSBatch(ctx context.Context, api sendAPI, queueURL string, batch []outgoing, fifo bool, group, run string) (int, []string) {
	byID := map[string]outgoing{}
	entries := make([]types.SendMessageBatchRequestEntry, len(batch))
	for i, e := range batch {
		id := strconv.Itoa(e.line)
		byID[id] = e
		entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: aws.String(string(e.body)), MessageAttributes: e.attrs}
		if fifo {
			g, d := e.group, e.dedup
			if g == "" {
				g = group
			}
			if d == "" {
				d = run + "-" + id
			}
			entries[i].MessageGroupId, entries[i].MessageDeduplicationId = aws.String(g), aws.String(d)
		}
	}
	sent := 0
	var failures []string
	for attempt := 1; len(entries) > 0; attempt++ {
		out, err := api.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
		if err != nil {
			for _, e := range entries {
				failures = append(failures, fmt.Sprintf("line %s: not sent: %v", aws.ToString(e.Id), err))
			}
			return sent, failures
		}
		sent += len(out.Successful)
		var retry []types.SendMessageBatchRequestEntry
		for _, fl := range out.Failed {
			id := aws.ToString(fl.Id)
			if !fl.SenderFault && attempt < 3 {
				for _, e := range entries {
					if aws.ToString(e.Id) == id {
						retry = append(retry, e)
					}
				}
				continue
			}
			failures = append(failures, fmt.Sprintf("line %d: not sent: %s: %s", byID[id].line, aws.ToString(fl.Code), aws.ToString(fl.Message)))
		}
		entries = retry
		if len(retry) > 0 {
			select {
			case <-ctx.Done():
				return sent, failures
			case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
			}
		}
	}
	return sent, failures
}

// ensureSQSQueue returns the URL of the source's queue, creating it (with
// its dead-letter queue and redrive policy) when it is missing and
// --create is given.
func ensureSQSQueue(ctx context.Context, api sendAPI, src config.Source, f sendFlags, stderr io.Writer) (string, error) {
	name := sqsQueueName(src)
	exists := func() (string, error) {
		if src.QueueURL != "" {
			_, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
				QueueUrl: aws.String(src.QueueURL), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
			})
			if err != nil {
				return "", fmt.Errorf("reading the attributes of SQS queue %s: %w", src.QueueURL, err)
			}
			return src.QueueURL, nil
		}
		return redrive.ResolveURL(ctx, api, "", src.QueueARN, src.QueueName)
	}
	u, err := exists()
	var missing *types.QueueDoesNotExist
	if err == nil || !errors.As(err, &missing) {
		return u, err
	}
	if !f.create {
		return "", fmt.Errorf("SQS queue %s does not exist: create it, or add --create to create it with a dead-letter queue", name)
	}
	fifo := strings.HasSuffix(name, ".fifo")
	suffix := ""
	if fifo {
		suffix = ".fifo"
	}
	dlqName := strings.TrimSuffix(name, suffix) + "-dlq" + suffix
	dlqURL, err := createSQSQueue(ctx, api, dlqName, fifo, nil)
	if err != nil {
		return "", err
	}
	attrs, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(dlqURL), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", fmt.Errorf("reading the ARN of dead-letter queue %s: %w", dlqURL, err)
	}
	dlqARN := attrs.Attributes[string(types.QueueAttributeNameQueueArn)]
	policy, err := json.Marshal(map[string]any{"deadLetterTargetArn": dlqARN, "maxReceiveCount": f.maxReceiveCount})
	if err != nil {
		return "", fmt.Errorf("encoding the redrive policy: %w", err)
	}
	created, err := createSQSQueue(ctx, api, name, fifo, map[string]string{string(types.QueueAttributeNameRedrivePolicy): string(policy)})
	if err != nil {
		return "", err
	}
	fmt.Fprintf(stderr, "created SQS queue %s with dead-letter queue %s (maxReceiveCount %d)\n", created, dlqURL, f.maxReceiveCount)
	if src.QueueURL != "" {
		return src.QueueURL, nil
	}
	return created, nil
}

// createSQSQueue creates a queue, or gives the URL of the one of that name.
func createSQSQueue(ctx context.Context, api sendAPI, name string, fifo bool, attrs map[string]string) (string, error) {
	if attrs == nil {
		attrs = map[string]string{}
	}
	if fifo {
		attrs[string(types.QueueAttributeNameFifoQueue)] = "true"
	}
	out, err := api.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		return "", fmt.Errorf("creating SQS queue %s: %w", name, err)
	}
	return aws.ToString(out.QueueUrl), nil
}
