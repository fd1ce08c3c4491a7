package main

import (
	"context"
	"log/slog"
	"net/url"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel"

	"github.com/pipesproject/pipes/internal/kit/httpcore"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/tracing"
)

// traceFlushTimeout bounds the export of the spans still queued at exit.
const traceFlushTimeout = 5 * time.Second

// otelFlags are pipes run's tracing flags.
type otelFlags struct {
	endpoint string
}

func (f *otelFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.endpoint, "otlp-endpoint", "", "send OpenTelemetry traces (a span per batch, a child per stage) by OTLP/HTTP to this collector base URL, like http://127.0.0.1:4318 (default: the OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT variables; neither: no tracing)")
}

// start returns the run's tracer (nil when tracing is off) and the
// function that flushes its spans, bounded by traceFlushTimeout. A bad
// --otlp-endpoint is a usage error.
func (f otelFlags) start(ctx context.Context, log *slog.Logger) (pipe.Tracer, func(), error) {
	cfg := tracing.Config{Endpoint: f.endpoint, ServiceVersion: moduleVersion()}
	if !cfg.Enabled() {
		return nil, func() {}, nil
	}
	// The SDK reports failed exports through its error handler: they are
	// logged, never fatal (the pipes go on without traces). Their texts
	// quote the endpoint URL and the collector's answer: the URLs'
	// credentials and the OTLP header values are redacted.
	secrets := exportSecrets(f.endpoint, os.Getenv)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("trace export failed", "error", secrets.Redact(err.Error()))
	}))
	p, err := tracing.New(ctx, cfg)
	if err != nil {
		return nil, nil, usageErr(err)
	}
	log.Info("tracing on: a span per batch, exported by OTLP/HTTP")
	return p, func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), traceFlushTimeout)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			log.Warn("traces not all exported at exit", "error", secrets.Redact(err.Error()))
		}
	}, nil
}

// moduleVersion is the version `pipes version` names, for the traces'
// service.version ("" when unknown).
func moduleVersion() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return ""
}

// exportSecrets are the values trace export errors must not show: the
// userinfo and query values of the endpoint URLs, the values of the OTLP
// header variables (key=value,… with URL-encoded values).
func exportSecrets(endpoint string, getenv func(string) string) *httpcore.Secrets {
	var values []string
	for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		for kv := range strings.SplitSeq(getenv(name), ",") {
			_, v, ok := strings.Cut(kv, "=")
			if v = strings.TrimSpace(v); !ok || v == "" {
				continue
			}
			values = append(values, v)
			if dec, err := url.QueryUnescape(v); err == nil && dec != v {
				values = append(values, dec)
			}
		}
	}
	return httpcore.NewSecrets(values, endpoint, getenv(tracing.EnvEndpoint), getenv(tracing.EnvTracesEndpoint))
}
