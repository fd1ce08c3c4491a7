package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/spf13/cobra"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/filter"
	"github.com/pipesproject/pipes/redrive"
)

// dlqFlags are the flags both dlq commands take.
type dlqFlags struct {
	files    []string
	pipe     string
	queueURL string
	queue    string
	region   string
	profile  string
	endpoint string
}

func (f *dlqFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringArrayVarP(&f.files, "file", "f", nil, "pipeline file or folder")
	fl.StringVar(&f.pipe, "pipe", "", "the pipe whose dead-letter queue to use when the files hold several")
	fl.StringVar(&f.queueURL, "queue-url", "", "the dead-letter queue's URL (sqs sources; default: from the source queue's RedrivePolicy)")
	fl.StringVar(&f.queue, "queue", "", "the dead-letter queue's name (rabbitmq sources; default: the one queue bound to the source queue's dead-letter exchange)")
	fl.StringVar(&f.region, "region", "", "the AWS region of the sqs calls (default: the source's region, else the AWS config chain's)")
	fl.StringVar(&f.profile, "profile", "", "the AWS shared config profile whose credentials and region to use (default: the AWS config chain's, AWS_PROFILE included)")
	fl.StringVar(&f.endpoint, "endpoint-url", "", "the SQS endpoint URL, an SQS-compatible server (default: the source's endpoint, else AWS_ENDPOINT_URL_SQS or AWS)")
	fl.StringVar(&f.endpoint, "endpoint", "", "the same as --endpoint-url (the first name of the flag)")
}

// awsFlagsSet names the AWS flags given, for refusing them where they mean
// nothing.
func (f *dlqFlags) awsFlagsSet() []string {
	var set []string
	for _, fl := range []struct{ name, value string }{{"--region", f.region}, {"--profile", f.profile}, {"--endpoint-url", f.endpoint}} {
		if fl.value != "" {
			set = append(set, fl.name)
		}
	}
	return set
}

const dlqFinding = `Finding the dead-letter queue. For an sqs source it is the one named by the
RedrivePolicy of the pipe's source queue (queue_url, queue_arn or queue_name,
with the source's region and endpoint); when that queue has none, the pipe's
dead_letter target if it is an sqs target with a queue_url; --queue-url
overrides both. For a rabbitmq source it is the one queue bound to the source
queue's dead-letter exchange (its x-dead-letter-exchange argument or
dead-letter-exchange policy, and the exchange's bindings, both read from the
management API of management_url); a queue that dead-letters to the default
exchange has the queue of its dead-letter routing key. When no queue or
several are bound, or the management API is off, it says what it found and
asks for --queue NAME, which overrides the search.

For an sqs source, --region, --profile and --endpoint-url (or --endpoint,
its first name) override the source's region and endpoint and pick an AWS
shared config profile (its credentials and region); credentials are never
printed.`

func newDLQCmd(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Inspect and redrive the dead-letter queue of a pipe (SQS or RabbitMQ); list and cancel SQS message move tasks",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newDLQInspectCmd(stdout, stderr), newDLQRedriveCmd(stdout, stderr), newDLQTasksCmd(stdout, stderr))
	return cmd
}

func newDLQInspectCmd(stdout, stderr io.Writer) *cobra.Command {
	var f dlqFlags
	var maxMsgs int
	var format string
	cmd := &cobra.Command{
		Use:   "inspect -f FILE [--pipe NAME] [--max 10] [--format text|json] [--queue-url URL | --queue NAME] [--region R] [--profile P] [--endpoint URL]",
		Short: "Show a pipe's dead-letter queue: its counts, and up to --max messages as text or (--format json) Pipes SQS or RabbitMQ records",
		Long: `It prints the dead-letter queue's counts on standard error and up to --max
of its messages on standard output.

By default (--format text) each message is a block of lines for a person: its
id, its body (the text, quoted, non-printable characters escaped, cut after
200 bytes; binary bodies as "(binary)" and their first bytes in hex), for
RabbitMQ each x-death entry (queue, reason, count, first time; the last time
when the broker records it) and x-pipes-attempts, for SQS the receive count
and the age, then the failure context pipes' dead-letter stage adds
(ErrorCode, ErrorMessage, pipes-*) and the other headers or message
attributes. The layout may change; scripts should use --format json.

--format json prints one Pipes record per line, as before this flag existed:
for an sqs source Pipes SQS records (messageId, body, attributes,
messageAttributes with the ErrorCode, ErrorMessage and pipes-* context the
dead-letter stage adds, ...), for a rabbitmq source Pipes RabbitMQ records.

SQS has no peek: inspecting receives the messages, which raises their
ApproximateReceiveCount, keeps them hidden while it reads on (so each is shown
once) and makes them all visible again (visibility 0) before it exits; if it
dies first, they reappear within 30 s.

For a rabbitmq source it prints the ready count (a passive declare) and the
unacked count (from the management API, when it can be used), then up to --max
messages from the head of the queue (with --format json as Pipes RabbitMQ
records: basicProperties with every header, x-death included; data the body in
base64). They are not
consumed: it reads them with basic.get without ack on a channel of its own and
requeues them all before it exits (closing the channel, or the connection if
it dies, does the same), so the queue keeps its count and its order; the
broker flags them redelivered.

` + dlqFinding,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "text" && format != "json" {
				return usageErr(fmt.Errorf("--format: %q is not one of text, json", format))
			}
			return inspectDLQ(cmd.Context(), f, maxMsgs, format == "json", stdout, stderr)
		},
	}
	f.register(cmd)
	cmd.Flags().IntVar(&maxMsgs, "max", 10, "the most messages to show")
	cmd.Flags().StringVar(&format, "format", "text", "text (for people) or json (one Pipes record per line, for scripts)")
	return cmd
}

type redriveFlags struct {
	dlqFlags
	to     string
	rate   float64
	max    int
	filter string
	dryRun bool
	native bool
	noWait bool
}

func newDLQRedriveCmd(stdout, stderr io.Writer) *cobra.Command {
	var f redriveFlags
	cmd := &cobra.Command{
		Use:   "redrive -f FILE [--pipe NAME] [--to URL|QUEUE] [--rate 50] [--max N] [--filter PATTERN_JSON] [--dry-run] [--native [--no-wait]] [--queue-url URL | --queue NAME] [--region R] [--profile P] [--endpoint URL]",
		Short: "Move messages from a pipe's dead-letter queue back to its source queue (or --to)",
		Long: `For an sqs source it receives the dead-letter queue's messages ten at a time
and sends them to the pipe's source queue (or --to) with SendMessageBatch,
keeping the body and the message attributes, less the failure context
(ErrorCode, ErrorMessage and every pipes-* attribute), plus pipes-redriven-at
(the time of the move). To a FIFO queue each keeps its MessageGroupId, and
its message id becomes the MessageDeduplicationId. A message is deleted from
the dead-letter queue only once its send succeeded.

--rate caps the messages sent per second (0: no cap). --filter takes an
EventBridge event pattern (JSON) matched against each message's Pipes SQS
record; the others are left in the dead-letter queue. --dry-run moves nothing
and prints what would move. Messages left behind are hidden while the command
runs and made visible again when it ends (on a FIFO queue a message left
behind holds back the rest of its group). It stops when a receive waiting 1 s
comes back empty, or after --max messages.

Each message handled gives one JSON line on standard output:
{"messageId":...,"outcome":"moved|skipped|failed|would_move",...}; a summary
line goes to standard error, and while it runs a progress bar when standard
error is a terminal. Exit 1 when any send or delete failed.

--native lets SQS move the messages instead: it starts a message move task
(StartMessageMoveTask) from the dead-letter queue to the pipe's source queue
(or --to), --rate its MaxNumberOfMessagesPerSecond (1 to 500; 0: SQS's
choice). SQS moves every message as it is (no --filter, --max or --dry-run;
the failure context attributes stay), and only from a queue that some
queue's RedrivePolicy names. It prints the task ({"taskHandle":...}) and
waits for the task to end, showing its progress, then prints its last state
and exits 1 unless it COMPLETED; --no-wait exits once it started. Stopping
the wait (Ctrl-C) leaves the task running: see pipes dlq tasks.

For a rabbitmq source it reads the messages with basic.get without ack (as
many as the queue held when it started, so what dead-letters back meanwhile is
not moved twice) and publishes a copy of each to the pipe's source queue (or
the queue named by --to) through the default exchange, mandatory, with
publisher confirms. The copy keeps the body and the properties; of the headers
it drops the death history and the attempt count (x-death, x-first-death-*,
x-last-death-*, x-delivery-count, x-pipes-attempts) and the failure context
(ErrorCode, ErrorMessage, pipes-*), and it gains pipes-redriven-at. A message
is acked from the dead-letter queue only once its copy is confirmed; a nack or
a return (no such queue) fails it and it stays. --filter patterns are matched
against the Pipes RabbitMQ record (data decoded when it is JSON:
'{"data":{"kind":["order"]}}'). What is left behind stays unacked while the
command runs, so each message is seen once, and is requeued in its place at
the end. The same lines and exit codes as for SQS.

` + dlqFinding,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return redriveDLQ(cmd.Context(), f, stdout, stderr)
		},
	}
	f.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.to, "to", "", "the queue to move the messages to: its URL (sqs) or its name (rabbitmq) (default: the pipe's source queue)")
	fl.Float64Var(&f.rate, "rate", 50, "the most messages moved per second (0: no cap)")
	fl.IntVar(&f.max, "max", 0, "stop after this many messages moved or failed (0: until the queue is empty)")
	fl.StringVar(&f.filter, "filter", "", `move only the messages matching this EventBridge event pattern, e.g. '{"body":{"kind":["order"]}}'`)
	fl.BoolVar(&f.dryRun, "dry-run", false, "print what would move and move nothing")
	fl.BoolVar(&f.native, "native", false, "sqs sources: let SQS move the messages with a message move task (StartMessageMoveTask, --rate its MaxNumberOfMessagesPerSecond, 1 to 500, 0: SQS's choice)")
	fl.BoolVar(&f.noWait, "no-wait", false, "with --native: print the task's handle and exit, without waiting for the task to end")
	return cmd
}

// dlqQueues are the queues a dlq command works on.
type dlqQueues struct {
	api    redrive.API
	move   redrive.MoveAPI
	source string // the source queue's URL; "" when not needed
	dlq    string
}

// loadDLQPipe loads the pipe a dlq command works on.
func loadDLQPipe(f dlqFlags) (config.Pipe, error) {
	specs, err := loadSpecs(pipes.NewRegistry(), f.files)
	if err != nil {
		return config.Pipe{}, err
	}
	spec, err := pickPipe(specs, f.pipe)
	if err != nil {
		return config.Pipe{}, usageErr(err)
	}
	switch src := spec.Source; {
	case src.Type == "rabbitmq" && f.queueURL != "":
		return config.Pipe{}, usageErr(fmt.Errorf("pipe %s has a rabbitmq source: --queue-url is for sqs queues; name the dead-letter queue with --queue", spec.Name))
	case src.Type != "rabbitmq" && f.queue != "":
		return config.Pipe{}, usageErr(fmt.Errorf("pipe %s has a %s source: --queue is for rabbitmq queues; give an sqs dead-letter queue with --queue-url", spec.Name, src.Type))
	case src.Type == "rabbitmq" && len(f.awsFlagsSet()) > 0:
		return config.Pipe{}, usageErr(fmt.Errorf("pipe %s has a rabbitmq source: %s are for sqs sources (the broker is the source's url)", spec.Name, strings.Join(f.awsFlagsSet(), ", ")))
	}
	return spec, nil
}

// sqsClient builds the SQS client of the pipe's sqs source, with the
// --region, --profile and --endpoint flags on top.
func sqsClient(ctx context.Context, spec config.Pipe, f dlqFlags) (*sqs.Client, error) {
	src := spec.Source
	switch src.Type {
	case "sqs":
	case "memory":
		return nil, usageErr(fmt.Errorf("pipe %s reads a memory queue, which lives only inside its `pipes run` process: there is no dead-letter queue to inspect or redrive from another process (pipes dlq works with sqs and rabbitmq sources)", spec.Name))
	default:
		return nil, usageErr(fmt.Errorf("pipe %s has a %s source: pipes dlq works with sqs and rabbitmq sources only", spec.Name, src.Type))
	}
	guess := redrive.RegionOfURL(src.QueueURL)
	if a, err := redrive.ParseQueueARN(src.QueueARN); err == nil {
		guess = a.Region
	}
	client, err := redrive.NewClient(ctx, redrive.ClientConfig{
		Region:      cmp.Or(f.region, src.Region),
		Endpoint:    cmp.Or(f.endpoint, src.Endpoint),
		Profile:     f.profile,
		RegionGuess: guess,
	})
	if err != nil {
		return nil, usageErr(fmt.Errorf("pipe %s: %w", spec.Name, err))
	}
	return client, nil
}

// openDLQ builds the SQS client of the pipe's sqs source and finds its
// dead-letter queue (and, when needSource, its source queue's URL).
func openDLQ(ctx context.Context, spec config.Pipe, f dlqFlags, needSource bool) (dlqQueues, error) {
	src := spec.Source
	client, err := sqsClient(ctx, spec, f)
	if err != nil {
		return dlqQueues{}, err
	}
	q := dlqQueues{api: client, move: client, dlq: f.queueURL}
	if q.dlq != "" && !needSource {
		return q, nil
	}
	if q.source, err = redrive.ResolveURL(ctx, client, src.QueueURL, src.QueueARN, src.QueueName); err != nil {
		return dlqQueues{}, runtimeErr(fmt.Errorf("pipe %s: %w", spec.Name, err))
	}
	if q.dlq != "" {
		return q, nil
	}
	q.dlq, err = redrive.DeadLetterURL(ctx, client, q.source)
	if errors.Is(err, redrive.ErrNoRedrivePolicy) {
		if url := deadLetterTargetURL(spec); url != "" {
			q.dlq = url
			return q, nil
		}
		return dlqQueues{}, usageErr(fmt.Errorf("pipe %s: %w, and the pipe has no sqs dead_letter target: give the dead-letter queue with --queue-url", spec.Name, err))
	}
	if err != nil {
		return dlqQueues{}, runtimeErr(fmt.Errorf("pipe %s: %w", spec.Name, err))
	}
	return q, nil
}

// deadLetterTargetURL is the queue URL of the pipe's dead_letter target
// when it is an sqs target, else "".
func deadLetterTargetURL(spec config.Pipe) string {
	if spec.DeadLetter == nil || spec.DeadLetter.Target.Type != "sqs" {
		return ""
	}
	return spec.DeadLetter.Target.QueueURL
}

func inspectDLQ(ctx context.Context, f dlqFlags, maxMsgs int, asJSON bool, stdout, stderr io.Writer) error {
	if maxMsgs < 1 {
		return usageErr(fmt.Errorf("--max must be at least 1, got %d", maxMsgs))
	}
	spec, err := loadDLQPipe(f)
	if err != nil {
		return err
	}
	if spec.Source.Type == "rabbitmq" {
		return inspectRabbitDLQ(ctx, spec, f, maxMsgs, asJSON, stdout, stderr)
	}
	q, err := openDLQ(ctx, spec, f, false)
	if err != nil {
		return err
	}
	counts, err := redrive.QueueCounts(ctx, q.api, q.dlq)
	if err != nil {
		return runtimeErr(err)
	}
	fmt.Fprintf(stderr, "dead-letter queue %s: %d visible, %d in flight, %d delayed (approximate)\n", q.dlq, counts.Visible, counts.InFlight, counts.Delayed)
	msgs, err := redrive.Inspect(ctx, q.api, q.dlq, redrive.InspectOptions{Max: maxMsgs, ARN: counts.ARN})
	out := json.NewEncoder(stdout)
	now := time.Now()
	for _, m := range msgs {
		var werr error
		if asJSON {
			werr = out.Encode(m)
		} else {
			werr = redrive.ViewOfSQS(m).WriteText(stdout, now)
		}
		if werr != nil {
			return runtimeErr(errors.Join(err, fmt.Errorf("writing records: %w", werr)))
		}
	}
	if err != nil {
		return runtimeErr(err)
	}
	return nil
}

func redriveDLQ(ctx context.Context, f redriveFlags, stdout, stderr io.Writer) error {
	var errs []error
	if f.rate < 0 {
		errs = append(errs, fmt.Errorf("--rate must not be negative, got %v", f.rate))
	}
	if f.max < 0 {
		errs = append(errs, fmt.Errorf("--max must not be negative, got %d", f.max))
	}
	var pattern *filter.Pattern
	if f.filter != "" {
		p, err := filter.CompilePattern(f.filter)
		if err != nil {
			errs = append(errs, fmt.Errorf("--filter: %w", err))
		}
		pattern = p
	}
	errs = append(errs, nativeFlagErrs(f)...)
	if err := errors.Join(errs...); err != nil {
		return usageErr(err)
	}
	spec, err := loadDLQPipe(f.dlqFlags)
	if err != nil {
		return err
	}
	if spec.Source.Type == "rabbitmq" {
		if f.native {
			return usageErr(fmt.Errorf("pipe %s has a rabbitmq source: --native uses SQS's message move tasks, which RabbitMQ has not; drop --native (pipes dlq redrive moves RabbitMQ messages itself)", spec.Name))
		}
		return redriveRabbitDLQ(ctx, spec, f, pattern, stdout, stderr)
	}
	q, err := openDLQ(ctx, spec, f.dlqFlags, f.to == "")
	if err != nil {
		return err
	}
	to := f.to
	if to == "" {
		to = q.source
	}
	if to == q.dlq {
		return usageErr(fmt.Errorf("the destination %s is the dead-letter queue itself: give another one with --to", to))
	}
	if f.native {
		return nativeRedrive(ctx, q.move, q.dlq, to, f, stdout, stderr)
	}
	out := json.NewEncoder(stdout)
	var writeErr error
	bar := newDLQProgress(stderr)
	total := 0 // the bar's total: the approximate count at the start
	if bar.tty {
		if counts, cerr := redrive.QueueCounts(ctx, q.api, q.dlq); cerr == nil {
			total = redriveTotal(counts.Visible, f.max)
		}
	}
	var sum redrive.Summary
	sum, err = redrive.Run(ctx, q.api, redrive.Options{
		From: q.dlq, To: to, Rate: f.rate, Max: f.max, Filter: pattern, DryRun: f.dryRun,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Report: func(e redrive.Entry) {
			if werr := out.Encode(e); werr != nil && writeErr == nil {
				writeErr = fmt.Errorf("writing the report: %w", werr)
			}
			sum.Count(e.Outcome)
			bar.show(sum.Handled(), total, summaryDetail(sum, f.dryRun), false)
		},
	})
	bar.clear()
	if f.dryRun {
		fmt.Fprintf(stderr, "dry run from %s to %s: %d would move, %d skipped by filter, %d failed; nothing moved\n", q.dlq, to, sum.WouldMove, sum.Skipped, sum.Failed)
	} else {
		fmt.Fprintf(stderr, "redrive from %s to %s: %d moved, %d skipped by filter, %d failed\n", q.dlq, to, sum.Moved, sum.Skipped, sum.Failed)
	}
	if err := errors.Join(err, writeErr); err != nil {
		return runtimeErr(err)
	}
	if sum.Failed > 0 {
		return runtimeErr(fmt.Errorf("%d message(s) could not be moved; they are still in %s (see the failed lines)", sum.Failed, q.dlq))
	}
	return nil
}

// redriveTotal is what a progress bar counts up to: the messages visible
// at the start, or --max when it is lower.
func redriveTotal(visible, maxMsgs int) int {
	if maxMsgs > 0 && maxMsgs < visible {
		return maxMsgs
	}
	return visible
}

// summaryDetail is the counts a progress bar shows after the bar.
func summaryDetail(sum redrive.Summary, dryRun bool) string {
	if dryRun {
		return fmt.Sprintf("%d would move, %d skipped, %d failed", sum.WouldMove, sum.Skipped, sum.Failed)
	}
	return fmt.Sprintf("%d moved, %d skipped, %d failed", sum.Moved, sum.Skipped, sum.Failed)
}
