// Package firehose is the `firehose` target of pipes: it puts each event
// of a batch as one record on an Amazon Data Firehose delivery stream with
// PutRecordBatch, up to 500 records and 4 MiB per call, and turns the
// records Firehose refuses into item failures of the messages they came
// from.
//
// A record's data is the event's payload (the record JSON, or what the
// input template or enrichment made of it), as it is: Firehose adds no
// delimiter, and neither does the target (Pipes' Firehose target takes no
// parameters).
//
// Failures are classified once, here: a record refused with
// ServiceUnavailableException is pipe.Throttled, with InternalFailure (or
// any other code) retryable; a record over 1,000 KiB fails alone,
// permanently, unsent. Calls refused as throttled (ServiceUnavailable-
// Exception, 429) are pipe.Throttled; as client errors (access denied, no
// such stream, invalid argument, KMS refusals, any other 4xx except 408
// and 429) pipe.Permanent; everything else (5xx, timeouts, connection
// errors) is retryable.
package firehose

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/firehose"
	"github.com/aws/aws-sdk-go-v2/service/firehose/types"

	"github.com/pipesproject/pipes/internal/keyerr"
	"github.com/pipesproject/pipes/internal/kit/awsbatch"
	"github.com/pipesproject/pipes/internal/kit/awsclient"
	"github.com/pipesproject/pipes/pipe"
)

// Limits of PutRecordBatch that the target applies.
const (
	// MaxBatch is the most records one PutRecordBatch call carries.
	MaxBatch = 500
	// MaxBatchBytes is the most bytes of data one call carries (4 MiB).
	MaxBatchBytes = 4 << 20
	// MaxRecordBytes is the most bytes of one record's data (1,000 KiB,
	// before base64); a larger record fails without being sent.
	MaxRecordBytes = 1000 << 10
)

// Config says which delivery stream a Target puts records on and how.
type Config struct {
	// DeliveryStream is the delivery stream's name or ARN
	// (arn:aws:firehose:…:deliverystream/NAME). Required.
	DeliveryStream string
	// Region overrides the region of the AWS config; by default the AWS
	// config's, else a stream ARN's.
	Region string
	// Endpoint overrides the Firehose endpoint. AWS_ENDPOINT_URL_FIREHOSE
	// works too, through the SDK.
	Endpoint string
	// Timeout bounds each call, SDK retries included; default 30s.
	Timeout time.Duration
	// MaxParallel bounds the calls in flight per Deliver; default 8.
	MaxParallel int
	// OnCall, when set, is called once for every HTTP attempt sent to
	// Firehose (SDK retries included) with the operation's name, here
	// "PutRecordBatch". It must be safe for concurrent use and quick.
	OnCall func(operation string)
	// Logger receives the target's logs; nil discards them.
	Logger *slog.Logger
	// AWSConfig, when set, is the AWS configuration to build the client
	// from; by default config.LoadDefaultConfig (env, profile, IMDS, IRSA).
	// Region and Endpoint above are applied on top of it.
	AWSConfig *aws.Config
}

// firehoseAPI is the part of the Firehose client the target calls.
type firehoseAPI interface {
	PutRecordBatch(ctx context.Context, in *firehose.PutRecordBatchInput, optFns ...func(*firehose.Options)) (*firehose.PutRecordBatchOutput, error)
}

// Target puts events on one Firehose delivery stream. It is safe for
// concurrent use: a pipe calls Deliver from many batches at once, sharing
// one client.
type Target struct {
	api    firehoseAPI
	stream string // the name calls give
	batch  *awsbatch.Batch[types.Record]
}

var (
	_ pipe.Target = (*Target)(nil)
)

// New checks cfg and builds the Firehose client. It does no network I/O
// (loading the default AWS config reads environment and files only): a
// delivery stream that does not exist is reported by Deliver.
func New(ctx context.Context, cfg Config) (*Target, error) {
	t, err := newTarget(cfg)
	if err != nil {
		return nil, err
	}
	awsCfg, ov, err := awsclient.Configure(ctx, awsclient.Client{
		What: "the Firehose target " + cfg.DeliveryStream, AWSConfig: cfg.AWSConfig,
		Region: cfg.Region, RegionGuess: awsclient.RegionFromARN(cfg.DeliveryStream), Endpoint: cfg.Endpoint, OnCall: cfg.OnCall, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	t.api = firehose.NewFromConfig(awsCfg, func(o *firehose.Options) { ov.Apply(&o.Region, &o.BaseEndpoint, &o.APIOptions) })
	return t, nil
}

// streamName matches a delivery stream's name; streamARN its ARN.
var (
	streamName = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,64}$`)
	streamARN  = regexp.MustCompile(`^arn:aws[a-z-]*:firehose:[a-z0-9-]+:[0-9]{12}:deliverystream/([a-zA-Z0-9_.-]{1,64})$`)
)

// newTarget checks cfg and makes a target without a client.
func newTarget(cfg Config) (*Target, error) {
	var problems []error
	t := &Target{stream: cfg.DeliveryStream}
	switch {
	case cfg.DeliveryStream == "":
		problems = append(problems, keyerr.New("delivery_stream", errors.New("delivery stream is required")))
	case strings.HasPrefix(cfg.DeliveryStream, "arn:"):
		m := streamARN.FindStringSubmatch(cfg.DeliveryStream)
		if m == nil {
			problems = append(problems, keyerr.New("delivery_stream", fmt.Errorf("delivery stream %q is not a Firehose delivery stream ARN like arn:aws:firehose:us-east-1:123456789012:deliverystream/orders", cfg.DeliveryStream)))
		} else {
			t.stream = m[1]
		}
	case !streamName.MatchString(cfg.DeliveryStream):
		problems = append(problems, keyerr.New("delivery_stream", fmt.Errorf("delivery stream %q is not a delivery stream name (1 to 64 letters, digits, '_', '.' or '-')", cfg.DeliveryStream)))
	}
	problems = append(problems, awsbatch.Check(cfg.Timeout, cfg.MaxParallel)...)
	if len(problems) > 0 {
		return nil, fmt.Errorf("configuring the Firehose target %s: %w", cfg.DeliveryStream, errors.Join(problems...))
	}
	t.batch = awsbatch.New(awsbatch.Spec[types.Record]{
		Service: "Firehose", Resource: t.stream, ResourceKey: "delivery_stream",
		Describe: func(n int) string { return fmt.Sprintf("putting %d records on %s", n, t.stream) },
		Limits:   awsbatch.Limits{Entries: MaxBatch, Bytes: MaxBatchBytes, EntryBytes: MaxRecordBytes},
		Build:    entry, Call: t.put,
		Classifier: classifier, EntrySpecific: entrySpecificCodes,
		Timeout: cfg.Timeout, MaxParallel: cfg.MaxParallel, Logger: cfg.Logger,
	})
	return t, nil
}

// Close releases the idle connections of the client's HTTP client. It does
// not wait for deliveries in flight; call it once the pipe has stopped.
func (t *Target) Close(context.Context) error {
	if c, ok := t.api.(*firehose.Client); ok {
		awsclient.CloseIdleConnections(c.Options().HTTPClient)
	}
	return nil
}

// Deliver puts one record per event and blocks until Firehose has
// answered every call, a call's timeout has passed or ctx is done. An
// empty batch sends nothing.
//
// Events whose record Firehose refused (or that is over 1,000 KiB) come
// back as item failures, keyed by their message id; the others were put.
// When every call failed as a whole, Deliver returns that error instead
// (Throttled when any call was throttled, so that the pipe slows down).
func (t *Target) Deliver(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
	return t.batch.Deliver(ctx, events)
}

// entry builds the record of one event: its payload, as it is.
func entry(_ int, ev *pipe.Event) (awsbatch.Entry[types.Record], error) {
	return awsbatch.Entry[types.Record]{Req: types.Record{Data: ev.RecordJSON}, Size: len(ev.RecordJSON)}, nil
}

// put makes one PutRecordBatch call; its responses answer the records by
// position (FailedPutCount only says how many of them carry an error).
func (t *Target) put(ctx context.Context, recs []types.Record) (awsbatch.Reply, error) {
	res, err := t.api.PutRecordBatch(ctx, &firehose.PutRecordBatchInput{DeliveryStreamName: aws.String(t.stream), Records: recs})
	if err != nil {
		return awsbatch.Reply{}, err
	}
	return awsbatch.ByPosition(len(recs), res.RequestResponses, func(_ int, r types.PutRecordBatchResponseEntry) error {
		if code := aws.ToString(r.ErrorCode); code != "" {
			return entryCodes.Refused("Firehose refused the record for "+t.stream, code, aws.ToString(r.ErrorMessage))
		}
		return nil
	}), nil
}
