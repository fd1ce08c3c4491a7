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
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/pipesproject/pipes/internal/keyerr"
	"github.com/pipesproject/pipes/internal/kit/awsbatch"
	"github.com/pipesproject/pipes/internal/kit/awsclient"
	"github.com/pipesproject/pipes/internal/kit/param"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
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
	api      snsAPI
	topicARN string
	group    param.MessageGroup
	batch    *awsbatch.Batch[types.PublishBatchRequestEntry]
}

var (
	_ pipe.Target = (*Target)(nil)
)

// New checks cfg, compiles its templates and builds the SNS client. It does
// no network I/O (loading the default AWS config reads environment and
// files only): a topic that does not exist is reported by Deliver.
func New(ctx context.Context, cfg Config) (*Target, error) {
	t, err := newTarget(cfg)
	if err != nil {
		return nil, err
	}
	awsCfg, ov, err := awsclient.Configure(ctx, awsclient.Client{
		What: "the SNS target " + cfg.TopicARN, AWSConfig: cfg.AWSConfig,
		Region: cfg.Region, RegionGuess: awsclient.RegionFromARN(cfg.TopicARN), Endpoint: cfg.Endpoint, OnCall: cfg.OnCall, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	t.api = sns.NewFromConfig(awsCfg, func(o *sns.Options) { ov.Apply(&o.Region, &o.BaseEndpoint, &o.APIOptions) })
	return t, nil
}

// newTarget checks cfg and makes a target without a client.
func newTarget(cfg Config) (*Target, error) {
	var problems []error
	switch {
	case cfg.TopicARN == "":
		problems = append(problems, keyerr.New("topic_arn", errors.New("topic arn is required")))
	case !topicARN.MatchString(cfg.TopicARN):
		problems = append(problems, keyerr.New("topic_arn", fmt.Errorf("topic arn %q is not an SNS topic ARN like arn:aws:sns:us-east-1:123456789012:orders", cfg.TopicARN)))
	}
	fifo := strings.HasSuffix(cfg.TopicARN, ".fifo")
	group, err := param.Parse("message group id", cfg.MessageGroupID)
	if err != nil {
		problems = append(problems, keyerr.New("message_group_id", err))
	}
	dedup, err := param.Parse("message deduplication id", cfg.MessageDeduplicationID)
	if err != nil {
		problems = append(problems, keyerr.New("message_deduplication_id", err))
	}
	if err := (param.MessageGroup{Group: group}).Check(); err != nil {
		problems = append(problems, keyerr.New("message_group_id", err))
	}
	if err := (param.MessageGroup{Dedup: dedup}).Check(); err != nil {
		problems = append(problems, keyerr.New("message_deduplication_id", err))
	}
	if fifo && cfg.MessageGroupID == "" {
		problems = append(problems, keyerr.New("message_group_id", errors.New("a message group id is required for a FIFO topic")))
	}
	if !fifo && cfg.MessageDeduplicationID != "" {
		problems = append(problems, keyerr.New("message_deduplication_id", errors.New("a message deduplication id is only for FIFO topics (ARN ending in .fifo)")))
	}
	problems = append(problems, awsbatch.Check(cfg.Timeout, cfg.MaxParallel)...)
	if len(problems) > 0 {
		return nil, fmt.Errorf("configuring the SNS target %s: %w", cfg.TopicARN, errors.Join(problems...))
	}
	t := &Target{
		topicARN: cfg.TopicARN,
		group: param.MessageGroup{
			Group: group, Dedup: dedup, Vars: cfg.Vars,
			FromRecord: cfg.ParamsFromRecord, FIFO: fifo, Kind: "topic",
		},
	}
	t.batch = awsbatch.New(awsbatch.Spec[types.PublishBatchRequestEntry]{
		Service: "SNS", Resource: cfg.TopicARN, ResourceKey: "topic",
		Describe: func(n int) string { return fmt.Sprintf("publishing %d messages to %s", n, cfg.TopicARN) },
		Limits:   awsbatch.Limits{Entries: MaxBatch, Bytes: MaxBatchBytes},
		Build:    t.entry, Call: t.publish,
		Classifier: classifier, EntrySpecific: entrySpecificCodes,
		Timeout: cfg.Timeout, MaxParallel: cfg.MaxParallel, Ordered: fifo, Logger: cfg.Logger,
	})
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
type entry = awsbatch.Entry[types.PublishBatchRequestEntry]

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
	return t.batch.Deliver(ctx, events)
}

// messageAttribute converts an event's attribute to SNS's.
func messageAttribute(a source.MessageAttribute) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String(a.DataType), StringValue: a.StringValue, BinaryValue: a.BinaryValue}
}

// entry builds the message of one event.
func (t *Target) entry(i int, ev *pipe.Event) (entry, error) {
	m, err := awsbatch.NewMessage(ev, t.group, MaxAttributes, messageAttribute)
	return entry{Req: types.PublishBatchRequestEntry{
		Id: aws.String(awsbatch.ID(i)), Message: m.Body, MessageAttributes: m.Attributes,
		MessageGroupId: m.Group, MessageDeduplicationId: m.Dedup,
	}, Size: m.Size}, err
}

// publish makes one PublishBatch call and reads which entries SNS took.
func (t *Target) publish(ctx context.Context, msgs []types.PublishBatchRequestEntry) (awsbatch.Reply, error) {
	res, err := t.api.PublishBatch(ctx, &sns.PublishBatchInput{TopicArn: aws.String(t.topicARN), PublishBatchRequestEntries: msgs})
	if err != nil {
		return awsbatch.Reply{}, err
	}
	ids := awsbatch.IDs(msgs, func(m types.PublishBatchRequestEntry) *string { return m.Id })
	return awsbatch.ByID(ids,
		res.Successful, func(s types.PublishBatchResultEntry) string { return aws.ToString(s.Id) },
		res.Failed, func(f types.BatchResultErrorEntry) string { return aws.ToString(f.Id) },
		func(f types.BatchResultErrorEntry) error { return entryError(f, t.topicARN) }), nil
}
