package pipe

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
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
	id [16]byte
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
