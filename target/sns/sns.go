// Package sns is the `sns` target of pipes: it publishes each event of a
// batch as one message to an Amazon SNS topic with PublishBatch, ten
// entries and at most 256 KiB per call, and turns the entries SNS refuses
// into item failures of the messages they came from.
//
// The message is the event's payload (the record JSON, or what the input
// template or enrichment made of it). The event's Attributes (set by the
// dead-letter stage) become message attributes: at most ten, the first ten
// by name order; list values are left out.
//
// On a FIFO topic (its ARN ends in ".fifo") MessageGroupID is required and
// is rendered per event; MessageDeduplicationID is optional (without it the
// topic needs content-based deduplication). On a standard topic a group id
// that renders non-empty is sent too (SNS forwards it to SQS fair queues).
// Calls to a FIFO topic are made one after another in batch order, and the
// first failed call stops the batch: the events after it are failed unsent.
//
// Failures are classified once, here: an entry SNS refuses with
// SenderFault, and a call refused as a client error (authorization error,
// no such topic, invalid parameter, any other 4xx except 408 and 429), are
// pipe.Permanent; throttling is pipe.Throttled; everything else (5xx,
// timeouts, connection errors) is retryable.
package sns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/pipesproject/pipes/internal/kit/awsclient"
	"github.com/pipesproject/pipes/internal/kit/batching"
	"github.com/pipesproject/pipes/internal/kit/param"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/template"
)

// Limits of PublishBatch that the target applies.
const (
	// MaxBatch is the most entries one PublishBatch call carries.
	MaxBatch = 10
	// MaxBatchBytes is the most bytes of messages and attributes one call
	// carries (SNS's message and batch limit, 256 KiB). An event larger
	// than that is sent alone, and SNS decides.
	MaxBatchBytes = 256 << 10
	// MaxAttributes is the most message attributes the target sends per
	// message (what SNS delivers to SQS subscribers).
	MaxAttributes = 10

	defaultTimeout     = 30 * time.Second
	defaultMaxParallel = 8
)

// Config says which topic a Target publishes to and how.
type Config struct {
	// TopicARN is the topic's ARN. Required.
	TopicARN string
	// MessageGroupID is the message group of each message: a constant, an
	// input template with placeholders (`<$.body.customer>`), or a Pipes
	// dynamic path (`$.body.customer`), rendered per event. Required for a
	// FIFO topic; on a standard topic it is sent when it renders non-empty.
	MessageGroupID string
	// MessageDeduplicationID is the deduplication id of each message on a
	// FIFO topic, given like MessageGroupID. Only for FIFO topics; an empty
	// rendering sends none (the topic must deduplicate by content).
	MessageDeduplicationID string
	// Vars are the reserved variables of the templates above.
	Vars template.Vars
	// ParamsFromRecord renders MessageGroupID and MessageDeduplicationID
	// against the source record instead of the payload. Set it when an input
	// template has replaced the payload by the time the target gets it:
	// Pipes evaluates these parameters before the input transformation.
	ParamsFromRecord bool
	// Region overrides the region of the AWS config; by default the
	// AWS config's, else the topic ARN's.
	Region string
	// Endpoint overrides the SNS endpoint (an SNS-compatible server).
	// AWS_ENDPOINT_URL_SNS works too, through the SDK.
	Endpoint string
	// Timeout bounds each call, SDK retries included; default 30s.
	Timeout time.Duration
	// MaxParallel bounds the calls in flight per Deliver on a standard
	// topic; default 8. FIFO topics get one at a time.
	MaxParallel int
	// OnCall, when set, is called once for every HTTP attempt sent to SNS
	// (SDK retries included) with the operation's name, here
	// "PublishBatch". It must be safe for concurrent use and quick.
	OnCall func(operation string)
	// Logger receives the target's logs; nil discards them.
	Logger *slog.Logger
	// AWSConfig, when set, is the AWS configuration to build the client
	// from; by default config.LoadDefaultConfig (env, profile, IMDS, IRSA).
	// Region and Endpoint above are applied on top of it.
	AWSConfig *aws.Config
}

// snsAPI is the part of the SNS client the target calls.
type snsAPI interface {
	PublishBatch(ctx context.Context, in *sns.PublishBatchInput, optFns ...func(*sns.Options)) (*sns.PublishBatchOutput, error)
}

// Target publishes events to one SNS topic. It is safe for concurrent use: a
// pipe calls Deliver from many batches at once, sharing one client.
type Target struct {
	api         snsAPI
	topicARN    string
	fifo        bool
	group       param.MessageGroup
	timeout     time.Duration
	maxParallel int
	log         *slog.Logger
	calls       batching.Calls[entry]
}

var (
	_ pipe.Target = (*Target)(nil)
	_ pipe.Closer = (*Target)(nil)
)

// New checks cfg, compiles its templates and builds the SNS client. It does
// no network I/O (loading the default AWS config reads environment and
// files only): a topic that does not exist is reported by Deliver.
func New(ctx context.Context, cfg Config) (*Target, error) {
	t, err := newTarget(cfg)
	if err != nil {
		return nil, err
	}
	awsCfg, err := awsclient.Load(ctx, cfg.AWSConfig)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration for the SNS target %s: %w", cfg.TopicARN, err)
	}
	region, ok := awsclient.Region(awsCfg, cfg.Region, awsclient.RegionFromARN(cfg.TopicARN))
	if !ok {
		return nil, fmt.Errorf("configuring the SNS target %s: no AWS region: set the target's region, AWS_REGION or a profile's region", cfg.TopicARN)
	}
	ov := awsclient.Overrides{Region: region, Endpoint: cfg.Endpoint, OnCall: cfg.OnCall, Logger: cfg.Logger}
	t.api = sns.NewFromConfig(awsCfg, func(o *sns.Options) { ov.Apply(&o.Region, &o.BaseEndpoint, &o.APIOptions) })
	return t, nil
}

// newTarget checks cfg and makes a target without a client.
func newTarget(cfg Config) (*Target, error) {
	var problems []error
	switch {
	case cfg.TopicARN == "":
		problems = append(problems, errors.New("topic arn is required"))
	case !topicARN.MatchString(cfg.TopicARN):
		problems = append(problems, fmt.Errorf("topic arn %q is not an SNS topic ARN like arn:aws:sns:us-east-1:123456789012:orders", cfg.TopicARN))
	}
	fifo := strings.HasSuffix(cfg.TopicARN, ".fifo")
	group, err := param.Parse("message group id", cfg.MessageGroupID)
	if err != nil {
		problems = append(problems, err)
	}
	dedup, err := param.Parse("message deduplication id", cfg.MessageDeduplicationID)
	if err != nil {
		problems = append(problems, err)
	}
	if fifo && cfg.MessageGroupID == "" {
		problems = append(problems, errors.New("a message group id is required for a FIFO topic"))
	}
	if !fifo && cfg.MessageDeduplicationID != "" {
		problems = append(problems, errors.New("a message deduplication id is only for FIFO topics (ARN ending in .fifo)"))
	}
	if cfg.Timeout < 0 {
		problems = append(problems, fmt.Errorf("timeout %s is negative", cfg.Timeout))
	}
	if cfg.MaxParallel < 0 {
		problems = append(problems, fmt.Errorf("max parallel %d is negative", cfg.MaxParallel))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("configuring the SNS target %s: %w", cfg.TopicARN, errors.Join(problems...))
	}
	t := &Target{
		topicARN: cfg.TopicARN,
		fifo:     fifo,
		group: param.MessageGroup{
			Group: group, Dedup: dedup, Vars: cfg.Vars,
			FromRecord: cfg.ParamsFromRecord, FIFO: fifo, Kind: "topic",
		},
		timeout:     cfg.Timeout,
		maxParallel: cfg.MaxParallel,
		log:         cfg.Logger,
	}
	if t.timeout == 0 {
		t.timeout = defaultTimeout
	}
	if t.maxParallel == 0 {
		t.maxParallel = defaultMaxParallel
	}
	if t.fifo {
		t.maxParallel = 1
	}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	t.calls = batching.Calls[entry]{
		Build: t.entry, Split: batching.SplitBy(MaxBatch, MaxBatchBytes, func(e entry) int { return e.size }),
		MaxParallel: t.maxParallel, Ordered: t.fifo, Send: t.send, Skip: t.skip,
	}
	return t, nil
}

// topicARN matches SNS topic ARNs (any partition).
var topicARN = regexp.MustCompile(`^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$`)

// Close releases the idle connections of the client's HTTP client. It does
// not wait for deliveries in flight; call it once the pipe has stopped.
func (t *Target) Close(context.Context) error {
	if c, ok := t.api.(*sns.Client); ok {
		awsclient.CloseIdleConnections(c.Options().HTTPClient)
	}
	return nil
}

// entry is one message to send and the event it came from.
type entry struct {
	ev   int // index in the batch
	msg  types.PublishBatchRequestEntry
	size int
}

// Deliver publishes one message per event and blocks until SNS has answered
// every call, a call's timeout has passed or ctx is done. An empty batch
// sends nothing.
//
// Events whose message SNS refused (or that could not be built: an empty
// message group id on a FIFO topic) come back as item failures, keyed by
// their message id; the others were sent. When every call failed as a
// whole, Deliver returns that error instead (Throttled when any call was
// throttled, so that the pipe slows down).
func (t *Target) Deliver(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
	res, err := t.calls.Deliver(ctx, events)
	if err != nil {
		return pipe.Result{}, fmt.Errorf("publishing %d messages to %s: %w", len(events), t.topicARN, err)
	}
	return res, nil
}

// skip fails entries not sent because an earlier call of their FIFO
// batch failed.
func (t *Target) skip(rest []entry, errs []error) {
	for _, e := range rest {
		errs[e.ev] = fmt.Errorf("not sent to %s: an earlier message of this FIFO batch failed", t.topicARN)
	}
}

// messageAttribute converts an event's attribute to SNS's.
func messageAttribute(a pipe.MessageAttribute) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String(a.DataType), StringValue: a.StringValue, BinaryValue: a.BinaryValue}
}

// entry builds the message of one event.
func (t *Target) entry(i int, ev *pipe.Event) (entry, error) {
	e := entry{ev: i, msg: types.PublishBatchRequestEntry{
		Id:      aws.String(strconv.Itoa(i)),
		Message: aws.String(string(ev.RecordJSON)),
	}}
	e.size = len(ev.RecordJSON)
	var attrSize int
	e.msg.MessageAttributes, attrSize = awsclient.MessageAttributes(ev.Attributes, MaxAttributes, messageAttribute)
	e.size += attrSize
	group, dedup, err := t.group.Render(ev)
	if err != nil {
		return entry{}, err
	}
	if group != "" {
		e.msg.MessageGroupId = aws.String(group)
	}
	if dedup != "" {
		e.msg.MessageDeduplicationId = aws.String(dedup)
	}
	return e, nil
}

// send makes one PublishBatch call for chunk and records each entry's
// error in errs. A call refused for what may be one entry's fault (an
// invalid parameter or message, a batch too long) is retried one entry per
// call when it had several, so that one bad entry fails alone.
func (t *Target) send(ctx context.Context, chunk []entry, errs []error) batching.Outcome {
	msgs := make([]types.PublishBatchRequestEntry, len(chunk))
	for i, e := range chunk {
		msgs[i] = e.msg
	}
	callCtx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	res, err := t.api.PublishBatch(callCtx, &sns.PublishBatchInput{TopicArn: aws.String(t.topicARN), PublishBatchRequestEntries: msgs})
	if err != nil {
		err = classifier.Classify(err)
		if len(chunk) > 1 && awsclient.EntrySpecific(err, entrySpecificCodes) && ctx.Err() == nil {
			return t.calls.OneByOne(ctx, chunk, errs)
		}
		for _, e := range chunk {
			errs[e.ev] = fmt.Errorf("publishing %d messages to %s: %w", len(chunk), t.topicARN, err)
		}
		return batching.Outcome{CallErr: err}
	}
	return batching.ByID(chunk, entry.id,
		res.Successful, func(s types.PublishBatchResultEntry) string { return aws.ToString(s.Id) },
		res.Failed, func(f types.BatchResultErrorEntry) string { return aws.ToString(f.Id) },
		func(e entry, f types.BatchResultErrorEntry) { errs[e.ev] = entryError(f, t.topicARN) },
		func(id string) {
			t.log.Warn("SNS answered a failure for an entry that was not published", "topic", t.topicARN, "entry", id)
		},
		// An entry in neither list is not known to be published: fail it, retryable.
		func(e entry) {
			errs[e.ev] = fmt.Errorf("publishing a message to %s: SNS's answer does not mention entry %s", t.topicARN, e.id())
		})
}

// id is the entry's id in its call.
func (e entry) id() string { return aws.ToString(e.msg.Id) }
