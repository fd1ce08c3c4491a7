// Package kinesis is the `kinesis` target of pipes: it puts each event of a
// batch as one record on an Amazon Kinesis data stream with PutRecords, up
// to 500 records and 5 MiB per call, and turns the records Kinesis refuses
// into item failures of the messages they came from.
//
// A record's data is the event's payload (the record JSON, or what the
// input template or enrichment made of it); its partition key is a
// constant, an input template with placeholders (`<$.body.customer>`) or a
// Pipes dynamic path (`$.body.customer`), rendered per event, as Pipes'
// KinesisStreamParameters.PartitionKey.
//
// Failures are classified once, here: a record refused with
// ProvisionedThroughputExceededException is pipe.Throttled, with
// InternalFailure (or any other code) retryable; a record over 1 MiB, or
// whose partition key renders empty or over 256 characters, fails alone,
// permanently, unsent. Calls refused as throttled are pipe.Throttled; as
// client errors (access denied, no such stream, invalid argument, KMS
// refusals, any other 4xx except 408 and 429) pipe.Permanent; everything
// else (5xx, timeouts, connection errors) is retryable.
package kinesis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/pipesproject/pipes/internal/keyerr"
	"github.com/pipesproject/pipes/internal/kit/awsbatch"
	"github.com/pipesproject/pipes/internal/kit/awsclient"
	"github.com/pipesproject/pipes/internal/kit/param"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/template"
)

// Limits of PutRecords that the target applies.
const (
	// MaxBatch is the most records one PutRecords call carries.
	MaxBatch = 500
	// MaxBatchBytes is the most bytes of data and partition keys one call
	// carries (5 MiB).
	MaxBatchBytes = 5 << 20
	// MaxRecordBytes is the most bytes of one record's data and partition
	// key (1 MiB); a larger record fails without being sent.
	MaxRecordBytes = 1 << 20
	// MaxPartitionKey is the most Unicode characters of a partition key.
	MaxPartitionKey = 256
)

// Config says which stream a Target puts records on and how.
type Config struct {
	// Stream is the stream's name or ARN (arn:aws:kinesis:…:stream/NAME).
	// Required.
	Stream string
	// PartitionKey is each record's partition key: a constant, an input
	// template with placeholders or a Pipes dynamic path, rendered per
	// event. Required.
	PartitionKey string
	// Vars are the reserved variables of the template above.
	Vars template.Vars
	// ParamsFromRecord renders PartitionKey against the source record
	// instead of the payload. Set it when an input template has replaced
	// the payload by the time the target gets it: Pipes evaluates target
	// parameters before the input transformation.
	ParamsFromRecord bool
	// Region overrides the region of the AWS config; by default the AWS
	// config's, else a stream ARN's.
	Region string
	// Endpoint overrides the Kinesis endpoint (a Kinesis-compatible
	// server). AWS_ENDPOINT_URL_KINESIS works too, through the SDK.
	Endpoint string
	// Timeout bounds each call, SDK retries included; default 30s.
	Timeout time.Duration
	// MaxParallel bounds the calls in flight per Deliver; default 8.
	MaxParallel int
	// OnCall, when set, is called once for every HTTP attempt sent to
	// Kinesis (SDK retries included) with the operation's name, here
	// "PutRecords". It must be safe for concurrent use and quick.
	OnCall func(operation string)
	// Logger receives the target's logs; nil discards them.
	Logger *slog.Logger
	// AWSConfig, when set, is the AWS configuration to build the client
	// from; by default config.LoadDefaultConfig (env, profile, IMDS, IRSA).
	// Region and Endpoint above are applied on top of it.
	AWSConfig *aws.Config
}

// kinesisAPI is the part of the Kinesis client the target calls.
type kinesisAPI interface {
	PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error)
}

// Target puts events on one Kinesis data stream. It is safe for concurrent
// use: a pipe calls Deliver from many batches at once, sharing one client.
type Target struct {
	api        kinesisAPI
	stream     string
	name, arn  *string // one of them is set: how calls name the stream
	key        param.Param
	vars       template.Vars
	fromRecord bool
	batch      *awsbatch.Batch[types.PutRecordsRequestEntry]
}

var (
	_ pipe.Target = (*Target)(nil)
)

// New checks cfg, compiles its partition key and builds the Kinesis
// client. It does no network I/O (loading the default AWS config reads
// environment and files only): a stream that does not exist is reported
// by Deliver.
func New(ctx context.Context, cfg Config) (*Target, error) {
	t, err := newTarget(cfg)
	if err != nil {
		return nil, err
	}
	awsCfg, ov, err := awsclient.Configure(ctx, awsclient.Client{
		What: "the Kinesis target " + cfg.Stream, AWSConfig: cfg.AWSConfig,
		Region: cfg.Region, RegionGuess: awsclient.RegionFromARN(cfg.Stream), Endpoint: cfg.Endpoint, OnCall: cfg.OnCall, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	t.api = kinesis.NewFromConfig(awsCfg, func(o *kinesis.Options) { ov.Apply(&o.Region, &o.BaseEndpoint, &o.APIOptions) })
	return t, nil
}

// newTarget checks cfg and makes a target without a client.
func newTarget(cfg Config) (*Target, error) {
	var problems []error
	t := &Target{stream: cfg.Stream, vars: cfg.Vars, fromRecord: cfg.ParamsFromRecord}
	switch {
	case cfg.Stream == "":
		problems = append(problems, keyerr.New("stream", errors.New("stream is required")))
	case strings.HasPrefix(cfg.Stream, "arn:"):
		if !strings.Contains(cfg.Stream, ":kinesis:") || !strings.Contains(cfg.Stream, ":stream/") {
			problems = append(problems, keyerr.New("stream", fmt.Errorf("stream %q is not a Kinesis stream ARN like arn:aws:kinesis:us-east-1:123456789012:stream/orders", cfg.Stream)))
		}
		t.arn = aws.String(cfg.Stream)
	default:
		t.name = aws.String(cfg.Stream)
	}
	key, err := param.Parse("partition key", cfg.PartitionKey)
	switch {
	case err != nil:
		problems = append(problems, keyerr.New("partition_key", err))
	case !key.Set():
		problems = append(problems, keyerr.New("partition_key", errors.New("partition key is required")))
	case key.Template() == nil && utf8.RuneCountInString(cfg.PartitionKey) > MaxPartitionKey:
		problems = append(problems, keyerr.New("partition_key", fmt.Errorf("partition key %q is over %d characters", cfg.PartitionKey, MaxPartitionKey)))
	}
	t.key = key
	problems = append(problems, awsbatch.Check(cfg.Timeout, cfg.MaxParallel)...)
	if len(problems) > 0 {
		return nil, fmt.Errorf("configuring the Kinesis target %s: %w", cfg.Stream, errors.Join(problems...))
	}
	t.batch = awsbatch.New(awsbatch.Spec[types.PutRecordsRequestEntry]{
		Service: "Kinesis", Resource: cfg.Stream, ResourceKey: "stream",
		Describe: func(n int) string { return fmt.Sprintf("putting %d records on %s", n, cfg.Stream) },
		Limits:   awsbatch.Limits{Entries: MaxBatch, Bytes: MaxBatchBytes, EntryBytes: MaxRecordBytes},
		Build:    t.entry, Call: t.put,
		Classifier: classifier, EntrySpecific: entrySpecificCodes,
		Timeout: cfg.Timeout, MaxParallel: cfg.MaxParallel, Logger: cfg.Logger,
	})
	return t, nil
}

// Close releases the idle connections of the client's HTTP client. It does
// not wait for deliveries in flight; call it once the pipe has stopped.
func (t *Target) Close(context.Context) error {
	if c, ok := t.api.(*kinesis.Client); ok {
		awsclient.CloseIdleConnections(c.Options().HTTPClient)
	}
	return nil
}

// Deliver puts one record per event and blocks until Kinesis has answered
// every call, a call's timeout has passed or ctx is done. An empty batch
// sends nothing.
//
// Events whose record Kinesis refused (or that could not be built: a
// partition key that rendered empty, a record over 1 MiB) come back as item
// failures, keyed by their message id; the others were put. When every
// call failed as a whole, Deliver returns that error instead (Throttled
// when any call was throttled, so that the pipe slows down).
func (t *Target) Deliver(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
	return t.batch.Deliver(ctx, events)
}

// entry is one record to put and the event it came from.
type entry = awsbatch.Entry[types.PutRecordsRequestEntry]

// entry builds the record of one event.
func (t *Target) entry(_ int, ev *pipe.Event) (entry, error) {
	view := ev
	if t.fromRecord {
		view = param.RecordView(ev)
	}
	key := t.key.Render(view, t.vars)
	switch n := utf8.RuneCountInString(key); {
	case n == 0:
		return entry{}, pipe.Permanent(fmt.Errorf("message %s: the partition key %q rendered empty", ev.ID(), t.key))
	case n > MaxPartitionKey:
		return entry{}, pipe.Permanent(fmt.Errorf("message %s: the partition key %q rendered %d characters, over Kinesis's %d", ev.ID(), t.key, n, MaxPartitionKey))
	}
	return entry{
		Req:  types.PutRecordsRequestEntry{Data: ev.RecordJSON, PartitionKey: aws.String(key)},
		Size: len(ev.RecordJSON) + len(key),
	}, nil
}

// put makes one PutRecords call; its result records answer the request
// records by position.
func (t *Target) put(ctx context.Context, recs []types.PutRecordsRequestEntry) (awsbatch.Reply, error) {
	res, err := t.api.PutRecords(ctx, &kinesis.PutRecordsInput{Records: recs, StreamName: t.name, StreamARN: t.arn})
	if err != nil {
		return awsbatch.Reply{}, err
	}
	return awsbatch.ByPosition(len(recs), res.Records, func(_ int, r types.PutRecordsResultEntry) error {
		if code := aws.ToString(r.ErrorCode); code != "" {
			return entryCodes.Refused("Kinesis refused the record for "+t.stream, code, aws.ToString(r.ErrorMessage))
		}
		return nil
	}), nil
}
