package pipe

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/pipesproject/pipes/source"
)

// The messageType values of the execution logs: Pipes' execution steps
// (its log schema's messageType), for the steps pipes logs.
const (
	stepExecutionStarted           = "ExecutionStarted"
	stepExecutionSucceeded         = "ExecutionSucceeded"
	stepExecutionPartiallyFailed   = "ExecutionPartiallyFailed"
	stepExecutionFailed            = "ExecutionFailed"
	stepTargetInvocationStarted    = "TargetInvocationStarted"
	stepTargetInvocationFailed     = "TargetInvocationFailed"
	stepEnrichmentInvocationFailed = "EnrichmentInvocationFailed"
	stepTargetTransformFailed      = "TargetTransformationFailed"
	stepFilteringFailed            = "FilteringFailed"
)

// stepOfFailure is the messageType of a message's failure at stage.
func stepOfFailure(stage string) string {
	switch stage {
	case "target", "fifo":
		return stepTargetInvocationFailed
	case "enrichment":
		return stepEnrichmentInvocationFailed
	case "transform":
		return stepTargetTransformFailed
	case "filter":
		return stepFilteringFailed
	}
	return stepExecutionFailed // unwrap, runtime
}

// execCtx is a batch's context with its execution id (Pipes' executionId:
// one per batch, a random UUID), for the execution logs.
type execCtx struct {
	context.Context
	id    [16]byte
	fails failures
}

// execKey is the context key of the batch's execCtx.
type execKey struct{}

// Value answers execKey with the execCtx itself (no allocation), other
// keys from the parent.
func (c *execCtx) Value(key any) any {
	if _, ok := key.(execKey); ok {
		return c
	}
	return c.Context.Value(key)
}

// begin returns the context of a batch with a new execution id, or ctx as
// it is when the pipe's execution logs are off.
// At trace level it logs the start of the execution (n messages).
func (e execLog) begin(ctx context.Context, n int) context.Context {
	if e.level == levelOff {
		return ctx
	}
	c := &execCtx{Context: ctx}
	hi, lo := rand.Uint64(), rand.Uint64()
	for i := range 8 {
		c.id[i], c.id[8+i] = byte(hi>>(8*i)), byte(lo>>(8*i))
	}
	c.id[6] = c.id[6]&0x0f | 0x40 // version 4
	c.id[8] = c.id[8]&0x3f | 0x80 // RFC 9562 variant
	if e.level >= levelTrace {
		e.log.Log(c, slog.LevelDebug, "batch started", e.step(c, stepExecutionStarted, "messages", n)...)
	}
	return c
}

// step returns attrs after the Pipes log schema fields of a record of the
// batch of ctx: executionId, messageType, logLevel (the pipe's level).
func (e execLog) step(ctx context.Context, messageType string, attrs ...any) []any {
	return append([]any{"executionId", executionID(ctx), "messageType", messageType, "logLevel", e.levelName()}, attrs...)
}

// levelName is the pipe's execution log level as Pipes names it.
func (e execLog) levelName() string {
	switch e.level {
	case levelError:
		return "ERROR"
	case levelInfo:
		return "INFO"
	case levelTrace:
		return "TRACE"
	}
	return "OFF"
}

// executionID is the execution id of the batch of ctx as a UUID, "" when
// there is none.
func executionID(ctx context.Context) string {
	c, _ := ctx.Value(execKey{}).(*execCtx)
	if c == nil {
		return ""
	}
	const hexdigits = "0123456789abcdef"
	b := make([]byte, 0, 36)
	for i, x := range c.id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hexdigits[x>>4], hexdigits[x&15])
	}
	return string(b)
}

// logError is an error as Pipes' log schema gives it: the object
// {"httpStatusCode", "message", "awsService", "requestId"} (message always,
// the others when the error knows them). The execution logs give it under
// the key pipesError beside the error string they always had (the key
// `error`, which AWS uses for this object, is pipes' string: a contract).
type logError struct{ err error }

// LogValue is the object as a group: nested in JSON, dotted keys in text.
func (l logError) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, 4)
	if s, ok := errors.AsType[interface {
		error
		HTTPStatusCode() int
	}](l.err); ok && s.HTTPStatusCode() != 0 {
		attrs = append(attrs, slog.Int("httpStatusCode", s.HTTPStatusCode()))
	}
	attrs = append(attrs, slog.String("message", l.err.Error()))
	if s, ok := errors.AsType[interface {
		error
		Service() string
	}](l.err); ok && s.Service() != "" {
		attrs = append(attrs, slog.String("awsService", s.Service()))
	}
	if s, ok := errors.AsType[interface {
		error
		ServiceRequestID() string
	}](l.err); ok && s.ServiceRequestID() != "" {
		attrs = append(attrs, slog.String("requestId", s.ServiceRequestID()))
	}
	return slog.GroupValue(attrs...)
}

// execLog writes the execution logs at Pipes' levels: off, error (failures
// only), info (and batch summaries), trace (and every event). A batch
// with failures gives one error line (`batch failed`: how many, the first
// ids, the first error); each failed message its own line at debug.
type execLog struct {
	log     *slog.Logger
	level   int
	payload bool
	// advice is a warning held back until a message first fails; shared
	// by the copies of the execLog.
	advice *heldWarning
}

const (
	levelOff = iota
	levelError
	levelInfo
	levelTrace
)

// maxFailedIDs is how many message ids a `batch failed` line names.
const maxFailedIDs = 5

func newExecLog(log *slog.Logger, level string, payload bool) execLog {
	l := levelError
	switch level {
	case "off":
		l = levelOff
	case "info":
		l = levelInfo
	case "trace":
		l = levelTrace
	}
	return execLog{log: log, level: l, payload: payload, advice: &heldWarning{}}
}

// heldWarning is a runner warning said once, at the first failed message,
// rather than at start: about a queue where it only matters once
// something fails (an in-process outbox that nothing fails into needs no
// redrive policy). Safe for concurrent use.
type heldWarning struct {
	mu  sync.Mutex
	msg string // "" none, or said already
}

// holdUntilFailure makes msg the warning said at the first failure.
func (e execLog) holdUntilFailure(msg string) {
	if e.advice == nil {
		return
	}
	e.advice.mu.Lock()
	e.advice.msg = msg
	e.advice.mu.Unlock()
}

// sayHeld logs the held warning, once.
func (e execLog) sayHeld(ctx context.Context) {
	if e.advice == nil || e.log == nil {
		return
	}
	e.advice.mu.Lock()
	msg := e.advice.msg
	e.advice.msg = ""
	e.advice.mu.Unlock()
	if msg != "" {
		e.log.Log(ctx, slog.LevelWarn, msg)
	}
}

// failures are what the batch of an execCtx has failed so far, for its
// one `batch failed` line.
type failures struct {
	mu        sync.Mutex
	n         int
	ids       []string // the first maxFailedIDs
	stage     string   // of the first failure
	err       error    // the first failure's
	targetErr error    // the whole batch's, when the target call failed
}

// failuresOf returns the failures of ctx's batch, nil when the execution
// logs are off.
func failuresOf(ctx context.Context) *failures {
	c, _ := ctx.Value(execKey{}).(*execCtx)
	if c == nil {
		return nil
	}
	return &c.fails
}

func (e execLog) invoking(ctx context.Context, events []*Event) {
	if e.level < levelTrace {
		return
	}
	for _, ev := range events {
		attrs := e.step(ctx, stepTargetInvocationStarted, "message_id", ev.ID(), "receive_count", ev.Message.ReceiveCount())
		if e.payload {
			attrs = append(attrs, "payload", string(ev.PayloadBytes()))
		}
		e.log.Log(ctx, slog.LevelDebug, "target invocation", attrs...)
	}
}

// itemFailed notes a message's failure for its batch's `batch failed`
// line and logs it on its own at debug level.
func (e execLog) itemFailed(ctx context.Context, m *source.Message, stage string, err error) {
	if e.level < levelError {
		return
	}
	if f := failuresOf(ctx); f != nil {
		f.mu.Lock()
		if f.n == 0 {
			f.stage, f.err = stage, err
		}
		f.n++
		if len(f.ids) < maxFailedIDs {
			f.ids = append(f.ids, m.MessageID)
		}
		f.mu.Unlock()
	}
	e.log.Log(ctx, slog.LevelDebug, "message failed", e.step(ctx, stepOfFailure(stage), "message_id", m.MessageID, "stage", stage,
		"receive_count", m.ReceiveCount(), "error", err, "pipesError", logError{err})...)
}

// batchFailed notes that the batch's target call failed as a whole, for
// its `batch failed` line.
func (e execLog) batchFailed(ctx context.Context, n int, err error) {
	if e.level < levelError {
		return
	}
	if f := failuresOf(ctx); f != nil {
		f.mu.Lock()
		f.targetErr = err
		f.mu.Unlock()
	}
}

// batchDone ends the batch's execution logs: one `batch failed` line at
// error level when anything failed (the count, the first ids, the
// target's error or the first message's), and `batch done` at info.
func (e execLog) batchDone(ctx context.Context, n, ok, failed int, took time.Duration) {
	if failed > 0 {
		e.sayHeld(ctx)
	}
	if e.level < levelError {
		return
	}
	step := stepExecutionSucceeded
	switch {
	case failed > 0 && failed == n:
		step = stepExecutionFailed
	case failed > 0:
		step = stepExecutionPartiallyFailed
	}
	if f := failuresOf(ctx); f != nil {
		f.mu.Lock()
		nf, ids, stage, err := f.n, f.ids, f.stage, f.err
		if f.targetErr != nil {
			err, stage = f.targetErr, "target"
		}
		f.mu.Unlock()
		if nf > 0 || err != nil {
			mt := step
			if f.targetErr != nil || mt == stepExecutionSucceeded {
				mt = stepExecutionFailed
			}
			attrs := e.step(ctx, mt, "messages", n, "failed", nf, "message_ids", ids, "stage", stage)
			if err != nil {
				attrs = append(attrs, "error", err, "pipesError", logError{err})
			}
			e.log.Log(ctx, slog.LevelError, "batch failed", attrs...)
		}
	}
	if e.level < levelInfo {
		return
	}
	e.log.Log(ctx, slog.LevelInfo, "batch done", e.step(ctx, step, "messages", n, "settled_ok", ok, "failed", failed, "duration", took.String())...)
}
