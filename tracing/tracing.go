// Package tracing is pipes' OpenTelemetry tracing: a pipe.Tracer that
// gives every batch a span (with a child per stage and a link to each
// message's producer) and exports the spans by OTLP over HTTP/protobuf.
// It is off unless an endpoint is given (pipes run --otlp-endpoint) or set
// by the standard OTEL_EXPORTER_OTLP_TRACES_ENDPOINT /
// OTEL_EXPORTER_OTLP_ENDPOINT variables; the exporter reads the other
// OTEL_EXPORTER_OTLP_* variables (headers, timeout, compression,
// certificates) itself, the resource OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES, the provider OTEL_TRACES_SAMPLER.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

// The environment variables that turn tracing on.
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
)

// The span names.
const (
	SpanBatch = "batch"
	// Stage spans are named by the stage: "filter", "enrichment",
	// "target", "settle".
)

// The attributes of the spans.
const (
	AttrPipe         = "pipes.pipe"
	AttrMessageCount = "messaging.batch.message_count"
	AttrDelivered    = "pipes.messages.delivered"
	AttrFiltered     = "pipes.messages.filtered"
	AttrFailed       = "pipes.messages.failed"
	AttrReleased     = "pipes.messages.released"
	AttrStage        = "pipes.stage"
	// AttrMessageID is set on each link: the message that carried the
	// producer's trace context.
	AttrMessageID = "messaging.message.id"
)

// Config configures a Provider.
type Config struct {
	// Endpoint is the collector's OTLP/HTTP base URL
	// (http://collector:4318): spans go to its /v1/traces, unless the URL
	// already ends in /v1/traces. "" takes the OTEL_EXPORTER_OTLP_*
	// variables.
	Endpoint string
	// ServiceName is the resource's service.name unless OTEL_SERVICE_NAME
	// sets one (default "pipes").
	ServiceName string
	// ServiceVersion is the resource's service.version, when known.
	ServiceVersion string
	// Getenv reads the environment (nil: os.Getenv); only to decide
	// whether tracing is on: the exporter reads the process's own.
	Getenv func(string) string
}

// Enabled reports whether cfg turns tracing on: an endpoint given, or one
// of the endpoint variables set.
func (cfg Config) Enabled() bool {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	return cfg.Endpoint != "" || getenv(EnvTracesEndpoint) != "" || getenv(EnvEndpoint) != ""
}

// TracesURL is the URL spans are posted to for a --otlp-endpoint value:
// the base URL with /v1/traces added, unless its path ends with it. A URL
// that is not http or https with a host is an error that names the flag
// and never quotes the URL (it may hold credentials).
func TracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", errors.New("--otlp-endpoint: not an http or https URL with a host (like http://127.0.0.1:4318)")
	}
	if !strings.HasSuffix(u.Path, "/v1/traces") {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
		u.RawPath = ""
	}
	return u.String(), nil
}

// Provider exports the spans of its Tracer. Create it with New, end it
// with Shutdown. It is safe for concurrent use.
type Provider struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

var _ pipe.Tracer = (*Provider)(nil)

// New starts a provider exporting to cfg's endpoint in batches (the SDK's
// batch span processor: a bounded queue, spans dropped when it is full,
// never blocking a pipe). It does not connect: an unreachable collector
// shows in the exports' errors, never in the pipes.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	var opts []otlptracehttp.Option
	if cfg.Endpoint != "" {
		u, err := TracesURL(cfg.Endpoint)
		if err != nil {
			return nil, err
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(u))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("starting the OTLP trace exporter: %w", err)
	}
	name := cfg.ServiceName
	if name == "" {
		name = "pipes"
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", name)}
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", cfg.ServiceVersion))
	}
	// Later detectors win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// over the defaults.
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithFromEnv())
	if err != nil {
		// A partial resource (a bad OTEL_RESOURCE_ATTRIBUTES entry) is
		// still usable; anything else is not.
		if res == nil {
			_ = exp.Shutdown(ctx)
			return nil, fmt.Errorf("reading the trace resource (OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME): %w", err)
		}
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Provider{tp: tp, tracer: tp.Tracer("github.com/pipesproject/pipes")}, nil
}

// Shutdown exports the spans still queued and stops the provider; ctx
// bounds it (what is not sent by then is dropped). It blocks.
func (p *Provider) Shutdown(ctx context.Context) error {
	if err := p.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("flushing the traces: %w", err)
	}
	return nil
}

// StartBatch starts a batch's span: a consumer span, a root (the
// producers' contexts are links, one per message that carries a valid
// one), named SpanBatch, with the pipe's name and the message count.
func (p *Provider) StartBatch(ctx context.Context, pipeName string, batch []*source.Message) (context.Context, core.BatchSpan) {
	var links []trace.Link
	for _, m := range batch {
		if sc, ok := producerContext(m); ok {
			links = append(links, trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{
				attribute.String(AttrMessageID, m.MessageID),
			}})
		}
	}
	ctx, span := p.tracer.Start(ctx, SpanBatch,
		trace.WithNewRoot(),
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(links...),
		trace.WithAttributes(
			attribute.String(AttrPipe, pipeName),
			attribute.Int(AttrMessageCount, len(batch)),
		))
	return ctx, &batchSpan{tracer: p.tracer, span: span, pipe: pipeName}
}

// batchSpan is a batch's span.
type batchSpan struct {
	tracer trace.Tracer
	span   trace.Span
	pipe   string
}

// Stage starts the stage's child span: a client span for the calls out
// (enrichment, target), internal for the others.
func (b *batchSpan) Stage(ctx context.Context, name string) (context.Context, func(error)) {
	kind := trace.SpanKindInternal
	if name == "enrichment" || name == "target" {
		kind = trace.SpanKindClient
	}
	ctx, span := b.tracer.Start(ctx, name, trace.WithSpanKind(kind),
		trace.WithAttributes(attribute.String(AttrPipe, b.pipe), attribute.String(AttrStage, name)))
	return ctx, func(err error) {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// End sets the outcome counts and ends the span; it is an error span when
// the batch failed whole or any message failed.
func (b *batchSpan) End(o core.BatchOutcome) {
	b.span.SetAttributes(
		attribute.Int(AttrDelivered, o.Delivered),
		attribute.Int(AttrFiltered, o.Filtered),
		attribute.Int(AttrFailed, o.Failed),
		attribute.Int(AttrReleased, o.Released),
	)
	switch {
	case o.Err != nil:
		b.span.SetStatus(codes.Error, o.Err.Error())
	case o.Failed > 0:
		b.span.SetStatus(codes.Error, fmt.Sprintf("%d of %d messages failed", o.Failed, o.Messages))
	}
	b.span.End()
}
