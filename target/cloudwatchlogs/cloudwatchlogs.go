// Package cloudwatchlogs is the `cloudwatch_logs` target of pipes: it
// writes each event of a batch as one log event to a CloudWatch Logs log
// stream with PutLogEvents, as EventBridge Pipes does, creating the stream
// when it does not exist yet.
//
// A batch is cut into calls the way the API allows: at most 10,000 events
// and 1,048,576 bytes per call (each event's message in UTF-8 plus 26
// bytes), events in timestamp order, spanning at most 24 hours. The log
// stream's name and the event's timestamp are parameters rendered per
// event (a constant or a template for the stream, a dynamic path such as
// `$.body.time` holding milliseconds since the epoch for the timestamp;
// by default the time the batch is delivered, as in Pipes).
//
// Events that CloudWatch Logs rejects (rejectedLogEventsInfo: too old, too
// new, older than the group's retention) fail alone, permanently; an event
// that cannot be built (an empty message, one too large, a timestamp that
// is not a number, a stream name that renders empty) fails alone too.
// Throttling is pipe.Throttled; a missing log group, access denied and
// invalid parameters are pipe.Permanent; 5xx, timeouts and connection
// errors are retryable.
package cloudwatchlogs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"
	"github.com/aws/smithy-go"

	"github.com/pipesproject/pipes/internal/keyerr"
	"github.com/pipesproject/pipes/internal/kit/awsclient"
	"github.com/pipesproject/pipes/internal/kit/batching"
	"github.com/pipesproject/pipes/internal/kit/param"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/template"
)

// PutLogEvents' limits (CloudWatch Logs API reference).
const (
	// MaxBatch is the most events one call carries.
	MaxBatch = 10000
	// MaxBatchBytes is the most bytes one call carries: the messages'
	// UTF-8 bytes plus EventOverhead per event.
	MaxBatchBytes = 1048576
	// EventOverhead is what each event weighs beyond its message.
	EventOverhead = 26
	// MaxSpan is the longest time one call's events may span.
	MaxSpan = 24 * time.Hour

	maxStreamName      = 512
	defaultTimeout     = 30 * time.Second
	defaultMaxParallel = 4
)

// Config says which log group and stream a Target writes to.
type Config struct {
	// LogGroup is the log group's name or ARN
	// (arn:aws:logs:<region>:<account>:log-group:<name>[:*]). Required.
	LogGroup string
	// LogStream is the log stream's name: a constant, a dynamic path or a
	// template with `<$…>` placeholders, rendered per event. Required.
	LogStream string
	// Timestamp is a dynamic path to the event's time in milliseconds since
	// the epoch (`$.body.time`), or a template rendering it; "" stamps each
	// event with the time the batch is delivered.
	Timestamp string
	// Vars are the reserved variables of the templates.
	Vars template.Vars
	// ParamsFromRecord renders the stream and timestamp against the
	// source record rather than the payload (when an input template has
	// replaced the payload).
	ParamsFromRecord bool
	// Region overrides the region of the AWS config; by default the AWS
	// config's, else a log group ARN's.
	Region string
	// Endpoint overrides the CloudWatch Logs endpoint (a compatible
	// server). AWS_ENDPOINT_URL_CLOUDWATCH_LOGS works too, through the SDK.
	Endpoint string
	// Timeout bounds each call, SDK retries included; default 30s.
	Timeout time.Duration
	// MaxParallel bounds the calls of one batch in flight; default 4.
	MaxParallel int
	// OnCall, when set, is called once for every HTTP attempt sent to
	// CloudWatch Logs (SDK retries included) with the operation's name,
	// "PutLogEvents" or "CreateLogStream". It must be safe for concurrent
	// use and quick.
	OnCall func(operation string)
	// Logger receives the target's logs; nil discards them.
	Logger *slog.Logger
	// AWSConfig, when set, is the AWS configuration to build the client
	// from; by default config.LoadDefaultConfig (env, profile, IMDS, IRSA).
	// Region and Endpoint above are applied on top of it.
	AWSConfig *aws.Config
	// Now, when set, is the clock for events without a timestamp (tests).
	Now func() time.Time
}

// logsAPI is the part of the CloudWatch Logs client the target calls.
type logsAPI interface {
	PutLogEvents(ctx context.Context, in *cloudwatchlogs.PutLogEventsInput, optFns ...func(*cloudwatchlogs.Options)) (*cloudwatchlogs.PutLogEventsOutput, error)
	CreateLogStream(ctx context.Context, in *cloudwatchlogs.CreateLogStreamInput, optFns ...func(*cloudwatchlogs.Options)) (*cloudwatchlogs.CreateLogStreamOutput, error)
}

// Target writes the events of a batch to a log stream. It is safe for
// concurrent use: a pipe calls Deliver from many batches at once, sharing
// one client.
type Target struct {
	api        logsAPI
	group      string
	stream     param.Param
	timestamp  param.Param
	vars       template.Vars
	fromRecord bool
	timeout    time.Duration
	now        func() time.Time
	log        *slog.Logger
	calls      batching.Calls[entry]
}

var (
	_ pipe.Target = (*Target)(nil)
)

// RejectedError is an event CloudWatch Logs took the call of but refused
// (its rejectedLogEventsInfo). ErrorCode makes its reason the ErrorCode of
// a dead-lettered item.
type RejectedError struct {
	// Reason is TooOld, TooNew or Expired.
	Reason string
}

// Error says why the event was rejected.
func (e *RejectedError) Error() string {
	switch e.Reason {
	case "TooNew":
		return "CloudWatch Logs rejected the event: its timestamp is more than 2 hours in the future"
	case "TooOld":
		return "CloudWatch Logs rejected the event: its timestamp is more than 14 days old or older than the log group's creation"
	}
	return "CloudWatch Logs rejected the event: it is older than the log group's retention"
}

// ErrorCode returns the reason.
func (e *RejectedError) ErrorCode() string { return "LogEvent" + e.Reason }

// logGroupARN matches a log group ARN and captures its name.
var logGroupARN = regexp.MustCompile(`^arn:aws[a-z-]*:logs:[a-z0-9-]+:[0-9]{12}:log-group:([\w#./-]{1,512})(:\*)?$`)

// logGroupName matches CloudWatch Logs' log group names.
var logGroupName = regexp.MustCompile(`^[\w#./-]{1,512}$`)

// New checks cfg and builds the CloudWatch Logs client. It does no network
// I/O (loading the default AWS config reads environment and files only): a
// log group that does not exist is reported by Deliver.
func New(ctx context.Context, cfg Config) (*Target, error) {
	t, err := newTarget(cfg)
	if err != nil {
		return nil, err
	}
	awsCfg, ov, err := awsclient.Configure(ctx, awsclient.Client{
		What: "the CloudWatch Logs target " + cfg.LogGroup, AWSConfig: cfg.AWSConfig,
		Region: cfg.Region, RegionGuess: awsclient.RegionFromARN(cfg.LogGroup),
		Endpoint: cfg.Endpoint, OnCall: cfg.OnCall, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	t.api = cloudwatchlogs.NewFromConfig(awsCfg, func(o *cloudwatchlogs.Options) { ov.Apply(&o.Region, &o.BaseEndpoint, &o.APIOptions) })
	return t, nil
}

// newTarget checks cfg and builds the target without its client.
func newTarget(cfg Config) (*Target, error) {
	var problems []error
	group := cfg.LogGroup
	if m := logGroupARN.FindStringSubmatch(group); m != nil {
		group = m[1]
	}
	switch {
	case cfg.LogGroup == "":
		problems = append(problems, keyerr.New("log_group_name", errors.New("log group name is required")))
	case !logGroupName.MatchString(group):
		problems = append(problems, keyerr.New("log_group_name", fmt.Errorf("log group %q is not a log group name (1 to 512 letters, digits, '_', '-', '/', '.', '#') or ARN", cfg.LogGroup)))
	}
	stream, err := param.Parse("log stream name", cfg.LogStream)
	switch {
	case err != nil:
		problems = append(problems, keyerr.New("log_stream_name", err))
	case !stream.Set():
		problems = append(problems, keyerr.New("log_stream_name", errors.New("log stream name is required")))
	case stream.Template() == nil && (len(cfg.LogStream) > maxStreamName || strings.ContainsAny(cfg.LogStream, ":*")):
		problems = append(problems, keyerr.New("log_stream_name", fmt.Errorf("log stream name %q is not a log stream name (at most 512 characters, no ':' or '*')", cfg.LogStream)))
	}
	ts, err := param.Parse("timestamp", cfg.Timestamp)
	switch {
	case err != nil:
		problems = append(problems, keyerr.New("timestamp", err))
	case ts.Set() && ts.Template() == nil:
		problems = append(problems, keyerr.New("timestamp", fmt.Errorf("timestamp %q is a constant: give a dynamic path to the event's time in milliseconds, such as $.body.time, or leave it out for the delivery time", cfg.Timestamp)))
	}
	if cfg.Timeout < 0 {
		problems = append(problems, keyerr.New("timeout", fmt.Errorf("timeout %s is negative", cfg.Timeout)))
	}
	if cfg.MaxParallel < 0 {
		problems = append(problems, fmt.Errorf("max parallel %d is negative", cfg.MaxParallel))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("configuring the CloudWatch Logs target %s: %w", cfg.LogGroup, errors.Join(problems...))
	}
	t := &Target{
		group: group, stream: stream, timestamp: ts, vars: cfg.Vars, fromRecord: cfg.ParamsFromRecord,
		timeout: cfg.Timeout, now: cfg.Now, log: cfg.Logger,
	}
	if t.timeout == 0 {
		t.timeout = defaultTimeout
	}
	if t.now == nil {
		t.now = time.Now
	}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	maxParallel := cfg.MaxParallel
	if maxParallel == 0 {
		maxParallel = defaultMaxParallel
	}
	t.calls = batching.Calls[entry]{Build: t.entry, Split: split, MaxParallel: maxParallel, Send: t.send}
	return t, nil
}

// Close releases the idle connections of the client's HTTP client. It does
// not wait for deliveries in flight; call it once the pipe has stopped.
func (t *Target) Close(context.Context) error {
	if c, ok := t.api.(*cloudwatchlogs.Client); ok {
		awsclient.CloseIdleConnections(c.Options().HTTPClient)
	}
	return nil
}

// Deliver writes one log event per event and blocks until CloudWatch Logs
// has answered every call, a call's timeout has passed or ctx is done. An
// empty batch sends nothing.
//
// Events CloudWatch Logs rejected or that could not be built come back as
// item failures, keyed by their message id; the others were written. When
// every call failed as a whole, Deliver returns that error instead
// (Throttled when any call was throttled, so that the pipe slows down).
func (t *Target) Deliver(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
	res, err := t.calls.Deliver(ctx, events)
	if err != nil {
		return pipe.Result{}, fmt.Errorf("writing %d log events to %s: %w", len(events), t.group, err)
	}
	return res, nil
}

// entry is one log event to write and the event it came from.
type entry struct {
	ev     int // index in the batch
	stream string
	ts     int64 // milliseconds since the epoch
	msg    string
}

// size is what the entry weighs in a call.
func (e entry) size() int { return len(e.msg) + EventOverhead }

// entry builds the log event of one event.
func (t *Target) entry(i int, ev *pipe.Event) (entry, error) {
	view := ev
	if t.fromRecord {
		view = param.RecordView(ev)
	}
	e := entry{ev: i, msg: string(ev.PayloadBytes())}
	switch {
	case e.msg == "":
		return entry{}, pipe.Permanent(fmt.Errorf("message %s: an empty payload cannot be a log event", ev.ID()))
	case e.size() > MaxBatchBytes:
		return entry{}, pipe.Permanent(fmt.Errorf("message %s: the payload is %d bytes, over CloudWatch Logs' %d for one event", ev.ID(), len(e.msg), MaxBatchBytes-EventOverhead))
	}
	e.stream = t.stream.Render(view, t.vars)
	if e.stream == "" || len(e.stream) > maxStreamName || strings.ContainsAny(e.stream, ":*") {
		return entry{}, pipe.Permanent(fmt.Errorf("message %s: the log stream name %q rendered %q, not a log stream name (1 to 512 characters, no ':' or '*')", ev.ID(), t.stream, e.stream))
	}
	if !t.timestamp.Set() {
		e.ts = t.now().UnixMilli()
		return e, nil
	}
	s := strings.TrimSpace(t.timestamp.Render(view, t.vars))
	ts, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f < 0 || f > 1<<53 {
			return entry{}, pipe.Permanent(fmt.Errorf("message %s: the timestamp %q rendered %q, not milliseconds since the epoch", ev.ID(), t.timestamp, s))
		}
		ts = int64(f)
	}
	if ts < 0 {
		return entry{}, pipe.Permanent(fmt.Errorf("message %s: the timestamp %q rendered %d, before the epoch", ev.ID(), t.timestamp, ts))
	}
	e.ts = ts
	return e, nil
}

// split cuts entries into PutLogEvents calls: one stream per call, events
// in timestamp order (stable: equal timestamps keep the batch's order), at
// most MaxBatch events and MaxBatchBytes bytes, spanning at most MaxSpan.
// It reorders entries in place.
func split(entries []entry) [][]entry {
	// The batch index breaks ties: a stable order without a stable sort's
	// cost (pdqsort against SortStableFunc's insertion-and-merge).
	slices.SortFunc(entries, func(a, b entry) int {
		return cmp.Or(strings.Compare(a.stream, b.stream), cmp.Compare(a.ts, b.ts), cmp.Compare(a.ev, b.ev))
	})
	span := MaxSpan.Milliseconds()
	var chunks [][]entry
	start, bytes := 0, 0
	for i, e := range entries {
		if i > start {
			first := entries[start]
			if e.stream != first.stream || i-start == MaxBatch || bytes+e.size() > MaxBatchBytes || e.ts-first.ts >= span {
				chunks = append(chunks, entries[start:i])
				start, bytes = i, 0
			}
		}
		bytes += e.size()
	}
	if start < len(entries) {
		chunks = append(chunks, entries[start:])
	}
	return chunks
}

// send makes one PutLogEvents call for chunk, creating its stream when
// CloudWatch Logs says it does not exist, and records each entry's error
// in errs. A call refused for what may be one entry's fault (an invalid
// parameter) is retried one entry per call when it had several.
func (t *Target) send(ctx context.Context, chunk []entry, errs []error) batching.Outcome {
	stream := chunk[0].stream
	in := &cloudwatchlogs.PutLogEventsInput{
		LogGroupName: aws.String(t.group), LogStreamName: aws.String(stream),
		LogEvents: make([]types.InputLogEvent, len(chunk)),
	}
	for i, e := range chunk {
		in.LogEvents[i] = types.InputLogEvent{Timestamp: aws.Int64(e.ts), Message: aws.String(e.msg)}
	}
	out, err := t.put(ctx, in)
	if isNotFound(err) && ctx.Err() == nil {
		if err = t.createStream(ctx, stream); err == nil {
			out, err = t.put(ctx, in)
		}
	}
	if err != nil {
		err = classifier.Classify(err)
		if len(chunk) > 1 && awsclient.EntrySpecific(err, entrySpecificCodes) && ctx.Err() == nil {
			return t.calls.OneByOne(ctx, chunk, errs)
		}
		for _, e := range chunk {
			errs[e.ev] = fmt.Errorf("writing %d log events to %s/%s: %w", len(chunk), t.group, stream, err)
		}
		return batching.Outcome{CallErr: err}
	}
	var o batching.Outcome
	for i, e := range chunk {
		reason := rejected(out.RejectedLogEventsInfo, i)
		if reason == "" {
			o.Sent = true
			continue
		}
		o.EntryFailed = true
		errs[e.ev] = pipe.Permanent(fmt.Errorf("writing a log event to %s/%s: %w", t.group, stream, &RejectedError{Reason: reason}))
	}
	return o
}

// put makes one PutLogEvents call within the target's timeout.
func (t *Target) put(ctx context.Context, in *cloudwatchlogs.PutLogEventsInput) (*cloudwatchlogs.PutLogEventsOutput, error) {
	callCtx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	return t.api.PutLogEvents(callCtx, in)
}

// createStream creates a log stream; one that exists already (created by
// a call of another batch) is no error. A missing log group fails it with
// ResourceNotFoundException.
func (t *Target) createStream(ctx context.Context, stream string) error {
	callCtx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	_, err := t.api.CreateLogStream(callCtx, &cloudwatchlogs.CreateLogStreamInput{LogGroupName: aws.String(t.group), LogStreamName: aws.String(stream)})
	var exists *types.ResourceAlreadyExistsException
	if errors.As(err, &exists) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating the log stream: %w", err)
	}
	t.log.Info("created the log stream", "log_group", t.group, "log_stream", stream)
	return nil
}

// isNotFound reports a ResourceNotFoundException: the stream, or the
// group, does not exist.
func isNotFound(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "ResourceNotFoundException"
}

// rejected is why CloudWatch Logs rejected the i-th event of a call, ""
// when it did not: events before tooOldLogEventEndIndex and
// expiredLogEventEndIndex (exclusive) and from tooNewLogEventStartIndex
// (inclusive) on.
func rejected(info *types.RejectedLogEventsInfo, i int) string {
	switch {
	case info == nil:
		return ""
	case info.TooNewLogEventStartIndex != nil && i >= int(*info.TooNewLogEventStartIndex):
		return "TooNew"
	case info.TooOldLogEventEndIndex != nil && i < int(*info.TooOldLogEventEndIndex):
		return "TooOld"
	case info.ExpiredLogEventEndIndex != nil && i < int(*info.ExpiredLogEventEndIndex):
		return "Expired"
	}
	return ""
}
