// Package eventbridge is the `eventbridge` target of pipes: it puts each
// event of a batch on an Amazon EventBridge event bus with PutEvents, ten
// entries and at most 256 KB per call, and turns the entries EventBridge
// refuses into item failures of the messages they came from.
//
// Each entry's Detail is the event's payload, which must be a JSON object
// (an event whose payload is not one fails alone, permanently). Its
// EventBusName, Source, DetailType, Resources and Time are constants or
// templates rendered per event. As in EventBridge Pipes, a missing Source
// is the pipe's ARN and a missing DetailType is "Event from " and the
// source records' eventSource ("Event from aws:sqs").
//
// Failures are classified once, here: entries refused with
// ThrottlingException are pipe.Throttled, with InternalException (or
// InternalFailure) retryable, with any other code pipe.Permanent. Calls
// refused as throttled are pipe.Throttled; as client errors (access denied,
// no such bus, validation, any other 4xx except 408 and 429) pipe.Permanent;
// everything else (5xx, timeouts, connection errors) is retryable.
package eventbridge

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/pipesproject/pipes/internal/keyerr"
	"github.com/pipesproject/pipes/internal/kit/awsbatch"
	"github.com/pipesproject/pipes/internal/kit/awsclient"
	"github.com/pipesproject/pipes/internal/kit/param"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/template"
)

// Limits of PutEvents that the target applies.
const (
	// MaxBatch is the most entries one PutEvents call carries.
	MaxBatch = 10
	// MaxBatchBytes is the most bytes of entries one call carries, counted
	// as EventBridge counts them (Source, DetailType, Detail and 14 bytes
	// for the time). An entry larger than that is sent alone, and
	// EventBridge decides.
	MaxBatchBytes = 256 << 10
	// DefaultBus is the bus events go to when EventBusName is empty.
	DefaultBus = "default"

	timeBytes = 14
)

// Config says which bus a Target puts events on and how.
type Config struct {
	// EventBusName is the bus's name or ARN; default "default". Like
	// Source and DetailType it is a constant, an input template with
	// placeholders (`<$.body.kind>`), or a Pipes dynamic path
	// (`$.body.kind`), rendered per event.
	EventBusName string
	// Source is each event's source; default Vars.PipeARN, as Pipes uses
	// the pipe's ARN.
	Source string
	// DetailType is each event's detail-type; default "Event from " and
	// EventSource, as Pipes does ("Event from aws:sqs").
	DetailType string
	// EventSource is the eventSource of the pipe's source records, for the
	// default DetailType: "aws:sqs" (the default) or "aws:rmq".
	EventSource string
	// Resources are the ARNs the event concerns (at most 10; each a
	// constant, template or dynamic path; those rendering empty are left
	// out).
	Resources []string
	// Time is the event's time stamp (RFC 3339, usually a dynamic path such
	// as `$.body.time`); an empty rendering leaves it to PutEvents' time, a
	// value that is not RFC 3339 fails the event permanently.
	Time string
	// EndpointID sends the events through an EventBridge global endpoint
	// (its URL subdomain, "abcde.veo").
	EndpointID string
	// Vars are the reserved variables of the templates above.
	Vars template.Vars
	// ParamsFromRecord renders EventBusName, Source and DetailType against
	// the source record instead of the payload. Set it when an input
	// template has replaced the payload by the time the target gets it:
	// Pipes evaluates these parameters before the input transformation.
	ParamsFromRecord bool
	// Region overrides the region of the AWS config; by default the AWS
	// config's, else a bus ARN's.
	Region string
	// Endpoint overrides the EventBridge endpoint.
	// AWS_ENDPOINT_URL_EVENTBRIDGE works too, through the SDK.
	Endpoint string
	// Timeout bounds each call, SDK retries included; default 30s.
	Timeout time.Duration
	// MaxParallel bounds the calls in flight per Deliver; default 8.
	MaxParallel int
	// OnCall, when set, is called once for every HTTP attempt sent to
	// EventBridge (SDK retries included) with the operation's name, here
	// "PutEvents". It must be safe for concurrent use and quick.
	OnCall func(operation string)
	// Logger receives the target's logs; nil discards them.
	Logger *slog.Logger
	// AWSConfig, when set, is the AWS configuration to build the client
	// from; by default config.LoadDefaultConfig (env, profile, IMDS, IRSA).
	// Region and Endpoint above are applied on top of it.
	AWSConfig *aws.Config
}

// eventsAPI is the part of the EventBridge client the target calls.
type eventsAPI interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

// Target puts events on an EventBridge bus. It is safe for concurrent use:
// a pipe calls Deliver from many batches at once, sharing one client.
type Target struct {
	api        eventsAPI
	bus        param.Param
	source     param.Param
	detailType param.Param
	resources  []param.Param
	time       param.Param
	endpointID string
	vars       template.Vars
	fromRecord bool
	batch      *awsbatch.Batch[types.PutEventsRequestEntry]
}

var (
	_ pipe.Target = (*Target)(nil)
)

// New checks cfg, compiles its templates and builds the EventBridge
// client. It does no network I/O (loading the default AWS config reads
// environment and files only): a bus that does not exist is reported by
// Deliver.
func New(ctx context.Context, cfg Config) (*Target, error) {
	t, err := newTarget(cfg)
	if err != nil {
		return nil, err
	}
	awsCfg, ov, err := awsclient.Configure(ctx, awsclient.Client{
		What: "the EventBridge target", AWSConfig: cfg.AWSConfig,
		Region: cfg.Region, RegionGuess: awsclient.RegionFromARN(cfg.EventBusName), Endpoint: cfg.Endpoint, OnCall: cfg.OnCall, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	t.api = eventbridge.NewFromConfig(awsCfg, func(o *eventbridge.Options) { ov.Apply(&o.Region, &o.BaseEndpoint, &o.APIOptions) })
	return t, nil
}

// newTarget checks cfg and makes a target without a client.
func newTarget(cfg Config) (*Target, error) {
	var problems []error
	busName := cfg.EventBusName
	if busName == "" {
		busName = DefaultBus
	}
	bus, err := param.Parse("event bus name", busName)
	if err != nil {
		problems = append(problems, keyerr.New("event_bus_name", err))
	}
	src := cfg.Source
	if src == "" {
		src = cfg.Vars.PipeARN
	}
	if src == "" {
		problems = append(problems, keyerr.New("source", errors.New("source is required (or the pipe's ARN in Vars)")))
	}
	source, err := param.Parse("source", src)
	if err != nil {
		problems = append(problems, keyerr.New("source", err))
	}
	detailType, err := param.Parse("detail type", cmp.Or(cfg.DetailType, DefaultDetailType(cfg.EventSource)))
	if err != nil {
		problems = append(problems, keyerr.New("detail_type", err))
	}
	if len(cfg.Resources) > 10 {
		problems = append(problems, keyerr.New("resources", fmt.Errorf("%d resources; PutEvents takes at most 10", len(cfg.Resources))))
	}
	var resources []param.Param
	for i, r := range cfg.Resources {
		key := fmt.Sprintf("resources[%d]", i)
		p, err := param.Parse(key, r)
		if err != nil {
			problems = append(problems, keyerr.New(key, err))
		}
		resources = append(resources, p)
	}
	tm, err := param.Parse("time", cfg.Time)
	if err != nil {
		problems = append(problems, keyerr.New("time", err))
	}
	problems = append(problems, awsbatch.Check(cfg.Timeout, cfg.MaxParallel)...)
	if len(problems) > 0 {
		return nil, fmt.Errorf("configuring the EventBridge target: %w", errors.Join(problems...))
	}
	t := &Target{
		bus:        bus,
		source:     source,
		detailType: detailType,
		resources:  resources,
		time:       tm,
		endpointID: cfg.EndpointID,
		vars:       cfg.Vars,
		fromRecord: cfg.ParamsFromRecord,
	}
	t.batch = awsbatch.New(awsbatch.Spec[types.PutEventsRequestEntry]{
		Service: "EventBridge", Resource: busName, ResourceKey: "bus",
		Describe: func(n int) string { return fmt.Sprintf("putting %d events on EventBridge", n) },
		Limits:   awsbatch.Limits{Entries: MaxBatch, Bytes: MaxBatchBytes},
		Build:    t.entry, Call: t.put,
		Classifier: classifier, EntrySpecific: entrySpecificCodes,
		Timeout: cfg.Timeout, MaxParallel: cfg.MaxParallel, Logger: cfg.Logger,
	})
	return t, nil
}

// Close releases the idle connections of the client's HTTP client. It does
// not wait for deliveries in flight; call it once the pipe has stopped.
func (t *Target) Close(context.Context) error {
	if c, ok := t.api.(*eventbridge.Client); ok {
		awsclient.CloseIdleConnections(c.Options().HTTPClient)
	}
	return nil
}

// entry is one event to put and the pipe event it came from.
type entry = awsbatch.Entry[types.PutEventsRequestEntry]

// Deliver puts one EventBridge event per pipe event and blocks until
// EventBridge has answered every call, a call's timeout has passed or ctx
// is done. An empty batch sends nothing.
//
// Events EventBridge refused (or that could not be built: a payload that is
// not a JSON object, a source or detail type that rendered empty) come back
// as item failures, keyed by their message id; the others were put. When
// every call failed as a whole, Deliver returns that error instead
// (Throttled when any call was throttled, so that the pipe slows down).
func (t *Target) Deliver(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
	return t.batch.Deliver(ctx, events)
}

// entry builds the EventBridge event of one pipe event.
func (t *Target) entry(i int, ev *pipe.Event) (entry, error) {
	if !isJSONObject(ev.RecordJSON) {
		return entry{}, pipe.Permanent(fmt.Errorf("message %s: the payload is not a JSON object, and EventBridge's detail must be one: %s", ev.ID(), snippet(ev.RecordJSON)))
	}
	view := ev
	if t.fromRecord {
		view = param.RecordView(ev)
	}
	bus := t.bus.Render(view, t.vars)
	source := t.source.Render(view, t.vars)
	detailType := t.detailType.Render(view, t.vars)
	for _, p := range []struct {
		name, value string
		param       param.Param
	}{{"event bus name", bus, t.bus}, {"source", source, t.source}, {"detail type", detailType, t.detailType}} {
		if p.value == "" {
			return entry{}, pipe.Permanent(fmt.Errorf("message %s: the %s %q rendered empty", ev.ID(), p.name, p.param))
		}
	}
	req := types.PutEventsRequestEntry{
		EventBusName: aws.String(bus),
		Source:       aws.String(source),
		DetailType:   aws.String(detailType),
		Detail:       aws.String(string(ev.RecordJSON)),
	}
	size := timeBytes + len(source) + len(detailType) + len(ev.RecordJSON)
	for _, r := range t.resources {
		if v := r.Render(view, t.vars); v != "" {
			req.Resources = append(req.Resources, v)
			size += len(v)
		}
	}
	if t.time.Set() {
		if v := t.time.Render(view, t.vars); v != "" {
			at, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return entry{}, pipe.Permanent(fmt.Errorf("message %s: the time %q rendered %q, which is not an RFC 3339 time stamp", ev.ID(), t.time, v))
			}
			req.Time = aws.Time(at)
		}
	}
	return entry{Req: req, Size: size}, nil
}

// DefaultDetailType is the detail-type Pipes gives events put on a bus
// without one: "Event from " and the source's eventSource (default
// "aws:sqs").
func DefaultDetailType(eventSource string) string {
	return "Event from " + cmp.Or(eventSource, "aws:sqs")
}

// endpointID is the EndpointId of a call: nil for none.
func endpointID(id string) *string {
	if id == "" {
		return nil
	}
	return aws.String(id)
}

// isJSONObject reports whether p is one JSON object.
func isJSONObject(p []byte) bool {
	p = bytes.TrimLeft(p, " \t\r\n")
	return len(p) > 0 && p[0] == '{' && json.Valid(p)
}

// snippet quotes the start of a payload for an error.
func snippet(p []byte) string {
	const n = 64
	if len(p) <= n {
		return fmt.Sprintf("%q", p)
	}
	return fmt.Sprintf("%q…", p[:n])
}

// put makes one PutEvents call; its result entries answer the request
// entries by position.
func (t *Target) put(ctx context.Context, reqs []types.PutEventsRequestEntry) (awsbatch.Reply, error) {
	res, err := t.api.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: reqs, EndpointId: endpointID(t.endpointID)})
	if err != nil {
		return awsbatch.Reply{}, err
	}
	return awsbatch.ByPosition(len(reqs), res.Entries, func(i int, r types.PutEventsResultEntry) error {
		if code := aws.ToString(r.ErrorCode); code != "" {
			return entryError(code, aws.ToString(r.ErrorMessage), aws.ToString(reqs[i].EventBusName))
		}
		return nil
	}), nil
}
