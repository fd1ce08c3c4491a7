package httpcore

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/pipesproject/pipes/internal/core"
	"go.opentelemetry.io/otel/trace"
)

// TestDoSendsTheTraceparentOfTheSpanInItsContext sends to a real server and
// reads the header it got: the span context of the request's ctx goes out
// as a W3C traceparent, unless the configuration or the request sets one
// (the user's choice); without a span context none is sent.
func TestDoSendsTheTraceparentOfTheSpanInItsContext(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("traceparent"))
		mu.Unlock()
	}))
	defer srv.Close()
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	unsampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: sc.TraceID(), SpanID: sc.SpanID()})
	traced := trace.ContextWithSpanContext(context.Background(), sc)
	tests := []struct {
		name    string
		ctx     context.Context
		headers map[string]string
		req     Request
		want    string
	}{
		{"a sampled span", traced, nil, Request{}, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{"an unsampled span", trace.ContextWithSpanContext(context.Background(), unsampled), nil, Request{}, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"},
		{"a span with a content type and request headers", traced, nil, Request{ContentType: ContentJSON, Header: [][2]string{{"X-Id", "1"}}}, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{"no span", context.Background(), nil, Request{}, ""},
		{"an invalid span context", trace.ContextWithSpanContext(context.Background(), trace.SpanContext{}), nil, Request{}, ""},
		{"a configured traceparent wins", traced, map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, Request{}, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		{"a request's traceparent wins", traced, nil, Request{Header: [][2]string{{"Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"}}}, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, Config{URL: srv.URL, Headers: tt.headers})
			mu.Lock()
			got = nil
			mu.Unlock()
			if _, _, err := c.Do(tt.ctx, &tt.req); err != nil {
				t.Fatal(err)
			}
			// The shared header is never changed: a request without a span
			// sends none afterwards.
			if _, _, err := c.Do(context.Background(), &Request{}); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			wantAfter := ""
			if tt.headers != nil {
				wantAfter = tt.headers["traceparent"]
			}
			if len(got) != 2 || got[0] != tt.want || got[1] != wantAfter {
				t.Errorf("traceparents sent %q, want [%q %q]", got, tt.want, wantAfter)
			}
		})
	}
}

// TestFailuresTellTheirHTTPStatus: a non-2xx answer's error gives its
// status (errors.As on HTTPStatusCode, for the logs' error.httpStatusCode),
// also once a secret was redacted from it, and keeps its class.
func TestFailuresTellTheirHTTPStatus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("down, token " + r.Header.Get("X-Key")))
	}))
	defer srv.Close()
	for _, headers := range []map[string]string{nil, {"X-Key": "s3cr3t-value"}} {
		c := newClient(t, Config{URL: srv.URL, Headers: headers})
		_, _, err := c.Do(context.Background(), &Request{})
		var se interface{ HTTPStatusCode() int }
		if !errors.As(err, &se) || se.HTTPStatusCode() != 503 {
			t.Errorf("headers %v: error %v gives no status 503", headers, err)
		}
		if core.IsPermanent(err) || core.IsThrottled(err) {
			t.Errorf("a 503 is retryable, got %s", kindOf(err))
		}
	}
	var se interface{ HTTPStatusCode() int }
	if err := Failure(429, ""); !errors.As(err, &se) || se.HTTPStatusCode() != 429 || !core.IsThrottled(err) {
		t.Errorf("Failure(429) = %v", err)
	}
}

// BenchmarkHeaderForWithoutSpan: a request without a span context shares
// the client's header (no allocation for tracing).
func BenchmarkHeaderForWithoutSpan(b *testing.B) {
	c, err := New(Config{URL: "http://127.0.0.1:1", Headers: map[string]string{"X-A": "b"}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = c.headerFor(&Request{ContentType: ContentJSON}, traceparent(ctx))
	}
}
