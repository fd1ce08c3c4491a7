package httpcore

import (
	"context"

	"go.opentelemetry.io/otel/trace"
)

// headerTraceparent is the W3C Trace Context header.
const headerTraceparent = "Traceparent"

// traceparent is the W3C traceparent header value of the span in ctx
// (version 00), or "" when ctx carries no valid span context: the pipe's
// tracing is off, or the caller is not a pipe's stage.
func traceparent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	flags := sc.TraceFlags()
	const hexdigits = "0123456789abcdef"
	b := make([]byte, 0, 55)
	b = append(b, "00-"...)
	for _, x := range tid {
		b = append(b, hexdigits[x>>4], hexdigits[x&15])
	}
	b = append(b, '-')
	for _, x := range sid {
		b = append(b, hexdigits[x>>4], hexdigits[x&15])
	}
	b = append(b, '-', hexdigits[flags>>4], hexdigits[flags&15])
	return string(b)
}
