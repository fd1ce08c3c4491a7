// Package sqstarget is the `sqs` target of pipes: it sends each event of a
// batch as one message to an Amazon SQS queue with SendMessageBatch, ten
// entries and at most 256 KiB per call, and turns the entries SQS refuses
// into item failures of the messages they came from.
//
// The message body is the event's payload (the record JSON, or what the
// input template or enrichment made of it). The event's Attributes (set by
// the dead-letter stage) become message attributes: at most ten, the first
// ten by name order; list values, which SQS does not support, are left out.
//
// On a FIFO queue (its URL ends in ".fifo") MessageGroupID is required and
// is rendered per event; MessageDeduplicationID is optional (without it the
// queue needs content-based deduplication). Calls to a FIFO queue are made
// one after another in batch order, and the first failed call stops the
// batch: the events after it are failed unsent, so that nothing is sent
// ahead of a message that will be retried.
//
// With Offload, payloads at or above its threshold go to S3 first and
// the message carries the SQS Extended Client's pointer (see Offload).
//
// Failures are classified once, here: an entry SQS refuses with
// SenderFault, and a call refused as a client error (access denied, no such
// queue, invalid parameter, any other 4xx except 408 and 429), are
// pipe.Permanent; throttling is pipe.Throttled; everything else (5xx,
// timeouts, connection errors) is retryable.
package sqstarget

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/pipesproject/pipes/internal/keyerr"
	"github.com/pipesproject/pipes/internal/kit/awsbatch"
	"github.com/pipesproject/pipes/internal/kit/awsclient"
	tparam "github.com/pipesproject/pipes/internal/kit/param"
	"github.com/pipesproject/pipes/internal/sqsname"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/template"
)

// Limits of SendMessageBatch that the target applies.
const (
	// MaxBatch is the most entries one SendMessageBatch call carries.
	MaxBatch = 10
	// MaxBatchBytes is the most bytes of bodies and attributes one call
	// carries (SQS's historical message and batch limit, 256 KiB). An event
	// larger than that is sent alone, and SQS decides.
	MaxBatchBytes = 256 << 10
	// MaxAttributes is the most message attributes SQS takes per message.
	MaxAttributes = 10
)

// limits are SendMessageBatch's.
var limits = awsbatch.Limits{Entries: MaxBatch, Bytes: MaxBatchBytes}

// Config says which queue a Target sends to and how.
type Config struct {
	// QueueURL is the queue's URL. Required.
	QueueURL string
	// MessageGroupID is the message group of each message: a constant, an
	// input template with placeholders (`<$.body.customer>`), or a Pipes
	// dynamic path (`$.body.customer`), rendered per event. Required for a
	// FIFO queue; on a standard queue it is sent when it renders non-empty.
	MessageGroupID string
	// MessageDeduplicationID is the deduplication id of each message on a
	// FIFO queue, given like MessageGroupID. Only for FIFO queues; an empty
	// rendering sends none (the queue must deduplicate by content).
	MessageDeduplicationID string
	// Vars are the reserved variables of the templates above.
	Vars template.Vars
	// ParamsFromRecord renders MessageGroupID and MessageDeduplicationID
	// against the source record instead of the payload. Set it when an input
	// template has replaced the payload by the time the target gets it:
	// Pipes evaluates these parameters before the input transformation.
	ParamsFromRecord bool
	// Region overrides the region of the AWS config; by default the region
	// of an amazonaws.com queue URL, else the AWS config's.
	Region string
	// Endpoint overrides the SQS endpoint (an SQS-compatible server).
	// AWS_ENDPOINT_URL_SQS works too, through the SDK.
	Endpoint string
	// Timeout bounds each call, SDK retries included; default 30s.
	Timeout time.Duration
	// MaxParallel bounds the calls in flight per Deliver on a standard
	// queue; default 8. FIFO queues get one at a time.
	MaxParallel int
	// OnCall, when set, is called once for every HTTP attempt sent to SQS
	// (SDK retries included) with the operation's name, here
	// "SendMessageBatch". It must be safe for concurrent use and quick.
	OnCall func(operation string)
	// Logger receives the target's logs; nil discards them.
	Logger *slog.Logger
	// AWSConfig, when set, is the AWS configuration to build the client
	// from; by default config.LoadDefaultConfig (env, profile, IMDS, IRSA).
	// Region and Endpoint above are applied on top of it.
	AWSConfig *aws.Config
	// Offload, when set, stores large payloads in S3 and sends the SQS
	// Extended Client's pointer instead (see Offload).
	Offload *Offload
}

// sqsAPI is the part of the SQS client the target calls.
type sqsAPI interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// Target sends events to one SQS queue. It is safe for concurrent use: a
// pipe calls Deliver from many batches at once, sharing one client.
type Target struct {
	api         sqsAPI
	queueURL    string
	group       tparam.MessageGroup
	timeout     time.Duration // of each call, S3 uploads included
	maxParallel int           // calls and uploads in flight per Deliver
	batch       *awsbatch.Batch[types.SendMessageBatchRequestEntry]
	off         *Offload // nil: payloads are sent as they are
}

var (
	_ pipe.Target = (*Target)(nil)
)

// New checks cfg, compiles its templates and builds the SQS client. It does
// no network I/O (loading the default AWS config reads environment and
// files only): a queue that does not exist is reported by Deliver.
func New(ctx context.Context, cfg Config) (*Target, error) {
	t, err := newTarget(cfg)
	if err != nil {
		return nil, err
	}
	awsCfg, ov, err := awsclient.Configure(ctx, awsclient.Client{
		What: "the SQS target " + cfg.QueueURL, AWSConfig: cfg.AWSConfig,
		Region: cfg.Region, RegionGuess: sqsname.RegionOfURL(cfg.QueueURL), Endpoint: cfg.Endpoint, OnCall: cfg.OnCall, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	t.api = sqs.NewFromConfig(awsCfg, func(o *sqs.Options) { ov.Apply(&o.Region, &o.BaseEndpoint, &o.APIOptions) })
	return t, nil
}

// newTarget checks cfg and makes a target without a client.
func newTarget(cfg Config) (*Target, error) {
	var problems []error
	u, err := url.Parse(cfg.QueueURL)
	switch {
	case cfg.QueueURL == "":
		problems = append(problems, keyerr.New("queue_url", errors.New("queue url is required")))
	case err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		problems = append(problems, keyerr.New("queue_url", fmt.Errorf("queue url %q is not an http(s) URL", cfg.QueueURL)))
	}
	fifo := strings.HasSuffix(cfg.QueueURL, ".fifo")
	group, err := parseParam("message group id", cfg.MessageGroupID)
	if err != nil {
		problems = append(problems, keyerr.New("message_group_id", err))
	}
	dedup, err := parseParam("message deduplication id", cfg.MessageDeduplicationID)
	if err != nil {
		problems = append(problems, keyerr.New("message_deduplication_id", err))
	}
	if err := (tparam.MessageGroup{Group: group.Param}).Check(); err != nil {
		problems = append(problems, keyerr.New("message_group_id", err))
	}
	if err := (tparam.MessageGroup{Dedup: dedup.Param}).Check(); err != nil {
		problems = append(problems, keyerr.New("message_deduplication_id", err))
	}
	if fifo && cfg.MessageGroupID == "" {
		problems = append(problems, keyerr.New("message_group_id", errors.New("a message group id is required for a FIFO queue")))
	}
	if !fifo && cfg.MessageDeduplicationID != "" {
		problems = append(problems, keyerr.New("message_deduplication_id", errors.New("a message deduplication id is only for FIFO queues (URL ending in .fifo)")))
	}
	problems = append(problems, awsbatch.Check(cfg.Timeout, cfg.MaxParallel)...)
	if cfg.Offload != nil {
		if err := cfg.Offload.check(); err != nil {
			problems = append(problems, keyerr.New("offload", err))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("configuring the SQS target %s: %w", cfg.QueueURL, errors.Join(problems...))
	}
	t := &Target{
		queueURL: cfg.QueueURL,
		group: tparam.MessageGroup{
			Group: group.Param, Dedup: dedup.Param, Vars: cfg.Vars,
			FromRecord: cfg.ParamsFromRecord, FIFO: fifo, Kind: "queue",
		},
		off: cfg.Offload,
	}
	t.batch = awsbatch.New(awsbatch.Spec[types.SendMessageBatchRequestEntry]{
		Service: "SQS", Resource: cfg.QueueURL, ResourceKey: "queue",
		Describe: func(n int) string { return fmt.Sprintf("sending %d messages to %s", n, cfg.QueueURL) },
		Limits:   limits, Build: t.entry, Call: t.send,
		Classifier: classifier, EntrySpecific: entrySpecificCodes,
		Timeout: cfg.Timeout, MaxParallel: cfg.MaxParallel, Ordered: fifo, Logger: cfg.Logger,
	})
	t.timeout, t.maxParallel = t.batch.Timeout(), t.batch.MaxParallel()
	return t, nil
}

// Close releases the idle connections of the client's HTTP client. It does
// not wait for deliveries in flight; call it once the pipe has stopped.
func (t *Target) Close(context.Context) error {
	if c, ok := t.api.(*sqs.Client); ok {
		awsclient.CloseIdleConnections(c.Options().HTTPClient)
	}
	if t.off != nil {
		t.off.Store.Close()
	}
	return nil
}

// entry is one message to send and the event it came from.
type entry = awsbatch.Entry[types.SendMessageBatchRequestEntry]

// Deliver sends one message per event and blocks until SQS has answered
// every call, a call's timeout has passed or ctx is done. An empty batch
// sends nothing.
//
// Events whose message SQS refused (or that could not be built: an empty
// message group id on a FIFO queue) come back as item failures, keyed by
// their message id; the others were sent. When every call failed as a
// whole, Deliver returns that error instead (Throttled when any call was
// throttled, so that the pipe slows down).
func (t *Target) Deliver(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
	if t.off == nil {
		return t.batch.Deliver(ctx, events)
	}
	ptrs, errs := t.offload(ctx, events)
	return t.batch.DeliverBuilt(ctx, events, func(i int, ev *pipe.Event) (entry, error) {
		if errs[i] != nil {
			return entry{}, errs[i]
		}
		e, err := t.entry(i, ev)
		if err != nil || ptrs[i] == nil {
			return e, err
		}
		return pointerEntry(e, ev, ptrs[i]), nil
	})
}

// messageAttribute converts an event's attribute to SQS's.
func messageAttribute(a source.MessageAttribute) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String(a.DataType), StringValue: a.StringValue, BinaryValue: a.BinaryValue}
}

// entry builds the message of one event.
func (t *Target) entry(i int, ev *pipe.Event) (entry, error) {
	m, err := awsbatch.NewMessage(ev, t.group, MaxAttributes, messageAttribute)
	return entry{Req: types.SendMessageBatchRequestEntry{
		Id: aws.String(awsbatch.ID(i)), MessageBody: m.Body, MessageAttributes: m.Attributes,
		MessageGroupId: m.Group, MessageDeduplicationId: m.Dedup,
	}, Size: m.Size}, err
}

// send makes one SendMessageBatch call and reads which entries SQS took.
func (t *Target) send(ctx context.Context, msgs []types.SendMessageBatchRequestEntry) (awsbatch.Reply, error) {
	res, err := t.api.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(t.queueURL), Entries: msgs})
	if err != nil {
		return awsbatch.Reply{}, err
	}
	ids := awsbatch.IDs(msgs, func(m types.SendMessageBatchRequestEntry) *string { return m.Id })
	return awsbatch.ByID(ids,
		res.Successful, func(s types.SendMessageBatchResultEntry) string { return aws.ToString(s.Id) },
		res.Failed, func(f types.BatchResultErrorEntry) string { return aws.ToString(f.Id) },
		func(f types.BatchResultErrorEntry) error { return entryError(f, t.queueURL) }), nil
}
