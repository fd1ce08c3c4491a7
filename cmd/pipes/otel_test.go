package main

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/pipesproject/pipes/internal/otlptest"
)

// headerRecorder is an HTTP endpoint that records the traceparent of each
// request and answers with the request's body (an echo enrichment, or a
// target that takes everything).
type headerRecorder struct {
	mu           sync.Mutex
	traceparents []string
}

func (h *headerRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	h.traceparents = append(h.traceparents, r.Header.Get("traceparent"))
	h.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

func (h *headerRecorder) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.traceparents...)
}

// TestRunExportsABatchSpanPerBatchWithStagesLinksAndTraceparent runs
// `pipes run --otlp-endpoint` on a memory queue (no server needed: the
// memory source keeps message attributes as SQS does) through a filter, an
// http enrichment and an http target, all real net/http servers in the
// test, and decodes what the in-process OTLP receiver got: one span per
// batch with a child per stage, the pipe and outcome attributes, a link per
// message that carried a traceparent, and the enrichment's and target's
// requests carrying their own span's traceparent.
func TestRunExportsABatchSpanPerBatchWithStagesLinksAndTraceparent(t *testing.T) {
	rcv := otlptest.Start(t)
	enrichment, target := &headerRecorder{}, &headerRecorder{}
	enrichSrv := httptest.NewServer(enrichment)
	defer enrichSrv.Close()
	targetSrv := httptest.NewServer(target)
	defer targetSrv.Close()

	producers := map[string]string{ // order id → the producer's traceparent
		"o-1": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"o-2": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	}
	dir := t.TempDir()
	var lines []string
	for _, id := range []string{"o-1", "o-2"} {
		lines = append(lines, fmt.Sprintf(`{"body": {"kind": "order", "id": %q}, "message_attributes": {"traceparent": {"data_type": "String", "string_value": %q}}}`, id, producers[id]))
	}
	lines = append(lines,
		`{"body": {"kind": "order", "id": "o-3"}, "message_attributes": {"traceparent": {"data_type": "String", "string_value": "not-a-traceparent"}}}`,
		`{"body": {"kind": "noise", "id": "n-1"}}`)
	if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "pipeline.yaml")
	yaml := fmt.Sprintf(`name: traced
source:
  type: memory
  preload: in.jsonl
  wait_time: 0s
  batch_size: 10
  initial_concurrency: 1
  max_concurrency: 2
filter:
  patterns: ['{"body": {"kind": ["order"]}}']
enrichment:
  type: http
  url: %s/enrich
target:
  type: http
  url: %s/orders
`, enrichSrv.URL, targetSrv.URL)
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}

	code, _, stderr := runCLI(t, "run", "--drain", "--metrics-addr", "", "-f", file, "--otlp-endpoint", rcv.URL)
	if code != 0 {
		t.Fatalf("pipes run exited %d:\n%s", code, stderr)
	}
	// The spans were flushed before pipes run returned.
	spans, services, paths := rcv.Spans(), rcv.Services(), rcv.Requests()
	if len(spans) == 0 {
		t.Fatalf("the receiver got no span (requests: %v); stderr:\n%s", paths, stderr)
	}
	for _, s := range services {
		if s != "pipes" {
			t.Errorf("service.name = %q, want pipes", s)
		}
	}
	byID := map[string]*tracepb.Span{}
	var batches []*tracepb.Span
	for _, s := range spans {
		byID[hex.EncodeToString(s.GetSpanId())] = s
		if s.GetName() == "batch" {
			batches = append(batches, s)
		}
	}
	if len(batches) == 0 {
		t.Fatalf("no batch span among %d spans", len(spans))
	}
	// Outcomes over every batch: 3 orders delivered, the noise filtered.
	counts := map[string]int64{}
	links := map[string]string{} // message id → linked trace id-span id
	for _, b := range batches {
		if b.GetKind() != tracepb.Span_SPAN_KIND_CONSUMER || len(b.GetParentSpanId()) != 0 {
			t.Errorf("batch span: kind %v, parent %x; want a consumer root", b.GetKind(), b.GetParentSpanId())
		}
		if v, _ := otlptest.Attr(b.GetAttributes(), "pipes.pipe"); v.GetStringValue() != "traced" {
			t.Errorf("batch span pipes.pipe = %v, want traced", v)
		}
		for _, k := range []string{"messaging.batch.message_count", "pipes.messages.delivered", "pipes.messages.filtered", "pipes.messages.failed", "pipes.messages.released"} {
			v, ok := otlptest.Attr(b.GetAttributes(), k)
			if !ok {
				t.Errorf("batch span has no %s", k)
			}
			counts[k] += v.GetIntValue()
		}
		for _, l := range b.GetLinks() {
			id, _ := otlptest.Attr(l.GetAttributes(), "messaging.message.id")
			links[id.GetStringValue()] = hex.EncodeToString(l.GetTraceId()) + "-" + hex.EncodeToString(l.GetSpanId())
		}
	}
	want := map[string]int64{"messaging.batch.message_count": 4, "pipes.messages.delivered": 3, "pipes.messages.filtered": 1, "pipes.messages.failed": 0, "pipes.messages.released": 0}
	for k, n := range want {
		if counts[k] != n {
			t.Errorf("%s summed over the batch spans = %d, want %d", k, counts[k], n)
		}
	}
	// One link per message with a valid traceparent; the malformed one and
	// the message without any give none.
	if len(links) != 2 {
		t.Errorf("links = %v, want the two producers' only", links)
	}
	gotLinked := map[string]bool{}
	for _, l := range links {
		gotLinked[l] = true
	}
	for id, tp := range producers {
		parts := strings.Split(tp, "-")
		if !gotLinked[parts[1]+"-"+parts[2]] {
			t.Errorf("no link to the producer of %s (%s); links: %v", id, tp, links)
		}
	}

	// Each stage is a child of its batch span, in the same trace.
	stages := map[string][]*tracepb.Span{}
	for _, s := range spans {
		if s.GetName() == "batch" {
			continue
		}
		parent, ok := byID[hex.EncodeToString(s.GetParentSpanId())]
		if !ok || parent.GetName() != "batch" || string(parent.GetTraceId()) != string(s.GetTraceId()) {
			t.Errorf("span %q is not a child of a batch span", s.GetName())
			continue
		}
		stages[s.GetName()] = append(stages[s.GetName()], s)
	}
	for _, name := range []string{"filter", "enrichment", "target", "settle"} {
		if len(stages[name]) == 0 {
			t.Errorf("no %q stage span; stages: %v", name, keysOf(stages))
		}
	}
	if len(stages) != 4 {
		t.Errorf("stage spans %v, want filter, enrichment, target, settle", keysOf(stages))
	}

	// The enrichment and the target got the traceparent of their own stage
	// span, whose trace is the batch span's.
	for _, c := range []struct {
		stage string
		seen  []string
	}{{"enrichment", enrichment.seen()}, {"target", target.seen()}} {
		if len(c.seen) == 0 {
			t.Errorf("the %s got no request", c.stage)
		}
		for _, tp := range c.seen {
			parts := strings.Split(tp, "-")
			if len(parts) != 4 || parts[0] != "00" || parts[3] != "01" {
				t.Errorf("the %s got traceparent %q, want 00-<trace>-<span>-01", c.stage, tp)
				continue
			}
			s, ok := byID[parts[2]]
			if !ok || s.GetName() != c.stage {
				t.Errorf("the %s's traceparent %q names no %s span", c.stage, tp, c.stage)
				continue
			}
			parent := byID[hex.EncodeToString(s.GetParentSpanId())]
			if hex.EncodeToString(parent.GetTraceId()) != parts[1] {
				t.Errorf("the %s's traceparent trace %s is not its batch span's %x", c.stage, parts[1], parent.GetTraceId())
			}
		}
	}
}

// TestRunWithoutAnEndpointExportsNothingAndSendsNoTraceparent: tracing is
// off by default, and the http target gets no traceparent header.
func TestRunWithoutAnEndpointExportsNothingAndSendsNoTraceparent(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	target := &headerRecorder{}
	srv := httptest.NewServer(target)
	defer srv.Close()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(`{"body": "a"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(file, []byte("name: plain\nsource: {type: memory, preload: in.jsonl, wait_time: 0s}\ntarget: {type: http, url: "+srv.URL+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "run", "--drain", "--metrics-addr", "", "-f", file)
	if code != 0 {
		t.Fatalf("pipes run exited %d:\n%s", code, stderr)
	}
	seen := target.seen()
	if len(seen) != 1 || seen[0] != "" {
		t.Errorf("target requests' traceparents = %q, want one request without", seen)
	}
	if strings.Contains(stderr, "tracing on") {
		t.Errorf("tracing is on without an endpoint:\n%s", stderr)
	}
}

// TestRunTakesTheEndpointFromTheStandardVariable: OTEL_EXPORTER_OTLP_ENDPOINT
// alone turns tracing on, spans going to its /v1/traces.
func TestRunTakesTheEndpointFromTheStandardVariable(t *testing.T) {
	rcv := otlptest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "orders-pipes")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(`{"body": "a"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(file, []byte("name: env\nsource: {type: memory, preload: in.jsonl, wait_time: 0s}\ntarget: {type: stdout}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "run", "--drain", "--metrics-addr", "", "-f", file)
	if code != 0 {
		t.Fatalf("pipes run exited %d:\n%s", code, stderr)
	}
	spans, services, paths := rcv.Spans(), rcv.Services(), rcv.Requests()
	names := map[string]bool{}
	for _, s := range spans {
		names[s.GetName()] = true
	}
	if !names["batch"] || !names["target"] || !names["settle"] || names["filter"] || names["enrichment"] {
		t.Errorf("span names %v, want batch, target, settle (no filter or enrichment in the file); requests %v", keysOf(names), paths)
	}
	for _, s := range services {
		if s != "orders-pipes" {
			t.Errorf("service.name = %q, want OTEL_SERVICE_NAME's orders-pipes", s)
		}
	}
}

// TestRunRefusesABadOTLPEndpoint: a bad flag value is a usage error that
// names the flag and does not quote the value.
func TestRunRefusesABadOTLPEndpoint(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(file, []byte("name: bad\nsource: {type: memory}\ntarget: {type: stdout}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "run", "--drain", "--metrics-addr", "", "-f", file, "--otlp-endpoint", "ftp://user:s3cr3t@collector")
	if code != 2 || !strings.Contains(stderr, "--otlp-endpoint") || strings.Contains(stderr, "s3cr3t") {
		t.Errorf("exit %d, stderr:\n%s\nwant 2 naming --otlp-endpoint without the value", code, stderr)
	}
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestSecretsNeverAppearInSpans: a target that echoes the Authorization
// header (a secret from the environment) in its 401 and 500 answers fails
// the batch; the spans the receiver got say it failed, with the status,
// and hold the secret nowhere (names, attributes, status, events, links),
// nor do the JSON logs, which give Pipes' error object with the status.
func TestSecretsNeverAppearInSpans(t *testing.T) {
	const secret = "s3cr3t-T0KEN-for-spans"
	t.Setenv("PIPES_TEST_SPAN_SECRET", secret)
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "denied for "+r.Header.Get("Authorization"), http.StatusUnauthorized)
	}))
	defer echo.Close()
	rcv := otlptest.Start(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(`{"body": {"n": 1}}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "pipeline.yaml")
	yaml := fmt.Sprintf(`name: secretive
source: {type: memory, preload: in.jsonl, wait_time: 0s, visibility_timeout: 1s, redrive_policy: {max_receive_count: 1, dead_letter_queue: dlq}}
target:
  type: http
  url: %s
  headers: {Authorization: "Bearer ${PIPES_TEST_SPAN_SECRET}"}
logging: {level: trace, include_execution_data: true}
`, echo.URL)
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "run", "--drain", "--metrics-addr", "", "--log-format", "json", "-f", file, "--otlp-endpoint", rcv.URL)
	if code != 0 {
		t.Fatalf("pipes run exited %d:\n%s", code, stderr)
	}
	spans := rcv.Spans()
	failedTarget := false
	for _, s := range spans {
		text, err := protojsonText(s)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(text, secret) || strings.Contains(text, "T0KEN") {
			t.Errorf("span %q holds the secret: %s", s.GetName(), text)
		}
		if s.GetName() == "target" && s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR && strings.Contains(s.GetStatus().GetMessage(), "401") {
			failedTarget = true
		}
	}
	if !failedTarget {
		t.Errorf("no target span with an error status naming the 401 among %d spans", len(spans))
	}
	if strings.Contains(stderr, secret) {
		t.Errorf("the logs hold the secret:\n%s", stderr)
	}
	if !strings.Contains(stderr, `"pipesError":{"httpStatusCode":401,"message":"`) {
		t.Errorf("the JSON logs give no Pipes error object with the status:\n%s", stderr)
	}
}

// protojsonText is the span's whole content as text, for searching.
func protojsonText(s *tracepb.Span) (string, error) {
	b, err := protojson.Marshal(s)
	return string(b), err
}

// TestTraceExportFailuresAreLoggedWithoutTheCollectorsCredentials: a
// collector that refuses every export and echoes the request's
// Authorization header (from OTEL_EXPORTER_OTLP_HEADERS) makes the run log
// the failure at warn level, the header value redacted, and the pipe still
// delivers (exit 0).
func TestTraceExportFailuresAreLoggedWithoutTheCollectorsCredentials(t *testing.T) {
	const secret = "otlp-K3Y-do-not-leak"
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20"+secret)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no: "+r.Header.Get("Authorization"), http.StatusForbidden)
	}))
	defer collector.Close()
	target := &headerRecorder{}
	srv := httptest.NewServer(target)
	defer srv.Close()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(`{"body": "a"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(file, []byte("name: refused\nsource: {type: memory, preload: in.jsonl, wait_time: 0s}\ntarget: {type: http, url: "+srv.URL+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "run", "--drain", "--metrics-addr", "", "-f", file, "--otlp-endpoint", collector.URL)
	if code != 0 || len(target.seen()) != 1 {
		t.Fatalf("exit %d, %d target requests; want 0 and 1:\n%s", code, len(target.seen()), stderr)
	}
	if !strings.Contains(stderr, "403") || !strings.Contains(stderr, "level=WARN") {
		t.Errorf("the refused export is not logged as a warning:\n%s", stderr)
	}
	if strings.Contains(stderr, secret) || strings.Contains(stderr, "K3Y") {
		t.Errorf("the logs hold the collector's credential:\n%s", stderr)
	}
}
