// Package otlptest is an in-process OTLP/HTTP trace receiver for tests: a
// real net/http server that accepts POST /v1/traces with a protobuf
// ExportTraceServiceRequest, as an OpenTelemetry collector does, and keeps
// the spans it got.
package otlptest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Receiver is a running receiver. Its methods are safe for concurrent
// use.
type Receiver struct {
	// URL is the receiver's base URL (give it as an OTLP endpoint).
	URL string

	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string
	requests []string
}

// Start starts a receiver on a free loopback port, closed when the test
// ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.requests = append(r.requests, req.Method+" "+req.URL.Path)
	r.mu.Unlock()
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.NotFound(w, req)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "content type "+ct, http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var in coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range in.GetResourceSpans() {
		if v, ok := Attr(rs.GetResource().GetAttributes(), "service.name"); ok {
			r.services = append(r.services, v.GetStringValue())
		}
		for _, ss := range rs.GetScopeSpans() {
			r.spans = append(r.spans, ss.GetSpans()...)
		}
	}
	r.mu.Unlock()
	answer, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(answer)
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

// Services returns the service.name of each resource received.
func (r *Receiver) Services() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.services...)
}

// Requests returns "METHOD /path" of every request received.
func (r *Receiver) Requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.requests...)
}

// Attr finds the attribute key among attrs.
func Attr(attrs []*commonpb.KeyValue, key string) (*commonpb.AnyValue, bool) {
	for _, a := range attrs {
		if a.GetKey() == key {
			return a.GetValue(), true
		}
	}
	return nil, false
}
