// Package eventbridge is the `eventbridge` target of pipes: it puts each
// event of a batch on an Amazon EventBridge event bus with PutEvents, ten
// entries and at most 256 KB per call, and turns the entries EventBridge
// refuses into item failures of the messages they came from.
//
// Each entry's Detail is the event's payload, which must be a JSON object
// (an event whose payload is not one fails alone, permanently). Its
// EventBusName, Source and DetailType are constants or templates rendered
// per event.
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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/smithy-go/middleware"

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

	defaultTimeout     = 30 * time.Second
	defaultMaxParallel = 8
	timeBytes          = 14
)

// Config says which bus a Target puts events on and how.
type Config struct {
	// EventBusName is the bus's name or ARN; default "default". Like
	// Source and DetailType it is a constant, an input template with
	// placeholders (`<$.body.kind>`), or a Pipes dynamic path
	// (`$.body.kind`), rendered per event.
	EventBusName string
	// Source is each event's source. Required.
	Source string
	// DetailType is each event's detail-type. Required.
	DetailType string
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
	api         eventsAPI
	bus         param
	source      param
	detailType  param
	vars        template.Vars
	fromRecord  bool
	timeout     time.Duration
	maxParallel int
	log         *slog.Logger
}

var (
	_ pipe.Target = (*Target)(nil)
	_ pipe.Closer = (*Target)(nil)
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
	var awsCfg aws.Config
	if cfg.AWSConfig != nil {
		awsCfg = cfg.AWSConfig.Copy()
	} else {
		loaded, err := awsconfig.LoadDefaultConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("loading the AWS configuration for the EventBridge target: %w", err)
		}
		awsCfg = loaded
	}
	region := cfg.Region
	if region == "" && awsCfg.Region == "" {
		region = regionFromARN(cfg.EventBusName)
	}
	if region == "" && awsCfg.Region == "" {
		return nil, errors.New("configuring the EventBridge target: no AWS region: set the target's region, AWS_REGION or a profile's region")
	}
	t.api = eventbridge.NewFromConfig(awsCfg, func(o *eventbridge.Options) {
		if region != "" {
			o.Region = region
		}
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		if cfg.OnCall != nil {
			o.APIOptions = append(o.APIOptions, onCallMiddleware(cfg.OnCall))
		}
	})
	return t, nil
}

// newTarget checks cfg and makes a target without a client.
func newTarget(cfg Config) (*Target, error) {
	var problems []error
	busName := cfg.EventBusName
	if busName == "" {
		busName = DefaultBus
	}
	bus, err := parseParam("event bus name", busName)
	if err != nil {
		problems = append(problems, err)
	}
	if cfg.Source == "" {
		problems = append(problems, errors.New("source is required"))
	}
	source, err := parseParam("source", cfg.Source)
	if err != nil {
		problems = append(problems, err)
	}
	if cfg.DetailType == "" {
		problems = append(problems, errors.New("detail type is required"))
	}
	detailType, err := parseParam("detail type", cfg.DetailType)
	if err != nil {
		problems = append(problems, err)
	}
	if cfg.Timeout < 0 {
		problems = append(problems, fmt.Errorf("timeout %s is negative", cfg.Timeout))
	}
	if cfg.MaxParallel < 0 {
		problems = append(problems, fmt.Errorf("max parallel %d is negative", cfg.MaxParallel))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("configuring the EventBridge target: %w", errors.Join(problems...))
	}
	t := &Target{
		bus:         bus,
		source:      source,
		detailType:  detailType,
		vars:        cfg.Vars,
		fromRecord:  cfg.ParamsFromRecord,
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
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	return t, nil
}

// regionFromARN returns the region of a bus ARN, "" for a name.
func regionFromARN(s string) string {
	if !strings.HasPrefix(s, "arn:") {
		return ""
	}
	parts := strings.SplitN(s, ":", 6)
	if len(parts) < 6 {
		return ""
	}
	return parts[3]
}

// onCallMiddleware calls f once per attempt: it sits in the finalize step
// after the SDK's retry middleware, so every retry passes through it.
func onCallMiddleware(f func(string)) func(*middleware.Stack) error {
	return func(s *middleware.Stack) error {
		return s.Finalize.Add(middleware.FinalizeMiddlewareFunc("pipesOnCall",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				f(awsmiddleware.GetOperationName(ctx))
				return next.HandleFinalize(ctx, in)
			}), middleware.After)
	}
}

// Close releases the idle connections of the client's HTTP client. It does
// not wait for deliveries in flight; call it once the pipe has stopped.
func (t *Target) Close(context.Context) error {
	if c, ok := t.api.(*eventbridge.Client); ok {
		if h, ok := c.Options().HTTPClient.(interface{ CloseIdleConnections() }); ok {
			h.CloseIdleConnections()
		}
	}
	return nil
}

// entry is one event to put and the pipe event it came from.
type entry struct {
	ev   int // index in the batch
	req  types.PutEventsRequestEntry
	size int
}

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
	if len(events) == 0 {
		return pipe.Result{}, nil
	}
	errs := make([]error, len(events))
	entries := make([]entry, 0, len(events))
	for i, ev := range events {
		e, err := t.entry(i, ev)
		if err != nil {
			errs[i] = err
			continue
		}
		entries = append(entries, e)
	}
	prepFailed := len(entries) < len(events)

	chunks := split(entries)
	out := make([]chunkOutcome, len(chunks))
	if t.maxParallel == 1 || len(chunks) == 1 {
		for i, c := range chunks {
			out[i] = t.send(ctx, c, errs)
		}
	} else {
		sem := make(chan struct{}, t.maxParallel)
		var wg sync.WaitGroup
		for i, c := range chunks {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				out[i] = t.send(ctx, c, errs)
			})
		}
		wg.Wait()
	}

	var callErr error
	sent, entryFailed := false, prepFailed
	for _, o := range out {
		sent = sent || o.sent
		entryFailed = entryFailed || o.entryFailed
		if o.callErr != nil && (callErr == nil || pipe.IsThrottled(o.callErr) && !pipe.IsThrottled(callErr)) {
			callErr = o.callErr
		}
	}
	if callErr != nil && !sent && !entryFailed {
		return pipe.Result{}, fmt.Errorf("putting %d events on EventBridge: %w", len(events), callErr)
	}
	return result(events, errs), nil
}

// result turns per-event errors into item failures, one per message.
func result(events []*pipe.Event, errs []error) pipe.Result {
	var r pipe.Result
	seen := map[string]bool{}
	for i, err := range errs {
		if err == nil {
			continue
		}
		id := events[i].ID()
		if seen[id] {
			continue
		}
		seen[id] = true
		r.Failures = append(r.Failures, pipe.ItemFailure{ID: id, Err: err})
	}
	return r
}

// entry builds the EventBridge event of one pipe event.
func (t *Target) entry(i int, ev *pipe.Event) (entry, error) {
	if !isJSONObject(ev.Payload) {
		return entry{}, pipe.Permanent(fmt.Errorf("message %s: the payload is not a JSON object, and EventBridge's detail must be one: %s", ev.ID(), snippet(ev.Payload)))
	}
	view := ev
	if t.fromRecord {
		view = recordView(ev)
	}
	bus := t.bus.render(view, t.vars)
	source := t.source.render(view, t.vars)
	detailType := t.detailType.render(view, t.vars)
	for _, p := range []struct {
		name, value string
		param       param
	}{{"event bus name", bus, t.bus}, {"source", source, t.source}, {"detail type", detailType, t.detailType}} {
		if p.value == "" {
			return entry{}, pipe.Permanent(fmt.Errorf("message %s: the %s %q rendered empty", ev.ID(), p.name, p.param))
		}
	}
	return entry{
		ev: i,
		req: types.PutEventsRequestEntry{
			EventBusName: aws.String(bus),
			Source:       aws.String(source),
			DetailType:   aws.String(detailType),
			Detail:       aws.String(string(ev.Payload)),
		},
		size: timeBytes + len(source) + len(detailType) + len(ev.Payload),
	}, nil
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

// split cuts entries into calls of at most MaxBatch entries and
// MaxBatchBytes; an entry larger than that goes alone.
func split(entries []entry) [][]entry {
	var chunks [][]entry
	start, size := 0, 0
	for i, e := range entries {
		if i > start && (i-start == MaxBatch || size+e.size > MaxBatchBytes) {
			chunks = append(chunks, entries[start:i])
			start, size = i, 0
		}
		size += e.size
	}
	if start < len(entries) {
		chunks = append(chunks, entries[start:])
	}
	return chunks
}

// chunkOutcome is what became of one call's entries.
type chunkOutcome struct {
	sent        bool  // EventBridge took at least one entry
	entryFailed bool  // EventBridge refused at least one entry by itself
	callErr     error // a call failed as a whole
}

// send makes one PutEvents call for chunk and records each entry's error
// in errs. A call refused for what may be one entry's fault (validation) is
// retried one entry per call when it had several, so that one bad entry
// fails alone.
func (t *Target) send(ctx context.Context, chunk []entry, errs []error) chunkOutcome {
	reqs := make([]types.PutEventsRequestEntry, len(chunk))
	for i, e := range chunk {
		reqs[i] = e.req
	}
	callCtx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	res, err := t.api.PutEvents(callCtx, &eventbridge.PutEventsInput{Entries: reqs})
	if err != nil {
		err = classify(err)
		if len(chunk) > 1 && entrySpecific(err) && ctx.Err() == nil {
			var o chunkOutcome
			for i := range chunk {
				one := t.send(ctx, chunk[i:i+1], errs)
				o.sent = o.sent || one.sent
				o.entryFailed = o.entryFailed || one.entryFailed
				if o.callErr == nil {
					o.callErr = one.callErr
				}
			}
			return o
		}
		for _, e := range chunk {
			errs[e.ev] = fmt.Errorf("putting %d events on EventBridge: %w", len(chunk), err)
		}
		return chunkOutcome{callErr: err}
	}
	// Result entries answer request entries by position.
	var o chunkOutcome
	for i, e := range chunk {
		if i >= len(res.Entries) {
			o.entryFailed = true
			errs[e.ev] = fmt.Errorf("putting an event on EventBridge: the answer has %d entries for %d events", len(res.Entries), len(chunk))
			continue
		}
		r := res.Entries[i]
		if code := aws.ToString(r.ErrorCode); code != "" {
			o.entryFailed = true
			errs[e.ev] = entryError(code, aws.ToString(r.ErrorMessage), aws.ToString(e.req.EventBusName))
			continue
		}
		o.sent = true
	}
	return o
}
