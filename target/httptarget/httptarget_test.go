package httptarget_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/internal/kit/partial"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/target/httptarget"
)

// events makes one event per id, whose payload is a small JSON object.
func events(ids ...string) []*pipe.Event {
	evs := make([]*pipe.Event, len(ids))
	for i, id := range ids {
		evs[i] = &pipe.Event{
			Message:    &source.Message{MessageID: id, Body: id},
			RecordJSON: []byte(`{"id":"` + id + `"}`),
		}
	}
	return evs
}

// answering starts a server that answers every request with status and body.
func answering(t *testing.T, status int, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func newTarget(t *testing.T, cfg httptarget.Config) *httptarget.Target {
	t.Helper()
	tg, err := httptarget.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = tg.Close(context.Background()) })
	return tg
}

func failedIDs(r pipe.Result) []string {
	ids := make([]string, 0, len(r.Failures))
	for _, f := range r.Failures {
		ids = append(ids, f.ID)
	}
	return ids
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  httptarget.Config
		want string
	}{
		{"a missing url is rejected", httptarget.Config{}, "url is required"},
		{"a url that is not http is rejected", httptarget.Config{URL: "ftp://example.com/x"}, `url scheme "ftp" is not http or https`},
		{"a url without a host is rejected", httptarget.Config{URL: "http:///path"}, "url has no host"},
		{"a url that does not parse is rejected", httptarget.Config{URL: "http://[::1"}, "url is not a valid URL"},
		{"a method with a space is rejected", httptarget.Config{URL: "http://x", Method: "PO ST"}, "is not a valid HTTP method"},
		{"a negative timeout is rejected", httptarget.Config{URL: "http://x", Timeout: -time.Second}, "timeout -1s is negative"},
		{"a negative parallelism is rejected", httptarget.Config{URL: "http://x", MaxParallel: -1}, "max parallel -1 is negative"},
		{"a header name with a colon is rejected", httptarget.Config{URL: "http://x", Headers: map[string]string{"X:Y": "v"}}, `header name "X:Y" is not valid`},
		{"a header value with a newline is rejected without quoting it", httptarget.Config{URL: "http://x", Headers: map[string]string{"Authorization": "Bearer s3cr3t\r\nX: y"}}, `header "Authorization" has a value with control characters`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := httptarget.New(tt.cfg)
			if err == nil {
				t.Fatal("New succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("error %q contains the header value", err)
			}
		})
	}
}

func TestNewReportsEveryProblemAtOnce(t *testing.T) {
	_, err := httptarget.New(httptarget.Config{URL: "ftp://x", Timeout: -1, MaxParallel: -1})
	if err == nil {
		t.Fatal("New succeeded, want an error")
	}
	for _, want := range []string{"url scheme", "timeout", "max parallel"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

// TestBatchAnswers runs every row of SPEC.md §3.2 through a real server.
func TestBatchAnswers(t *testing.T) {
	tests := []struct {
		name      string
		answer    string
		wantIDs   []string
		malformed bool
	}{
		{"an empty batchItemFailures list is complete success", `{"batchItemFailures":[]}`, nil, false},
		{"a null batchItemFailures is complete success", `{"batchItemFailures":null}`, nil, false},
		{"an empty response is complete success", ``, nil, false},
		{"a null response is complete success", `null`, nil, false},
		{"an invalid JSON response fails the whole batch", `{"batchItemFailures":[`, nil, true},
		{"an empty itemIdentifier fails the whole batch", `{"batchItemFailures":[{"itemIdentifier":""}]}`, nil, true},
		{"a null itemIdentifier fails the whole batch", `{"batchItemFailures":[{"itemIdentifier":null}]}`, nil, true},
		{"a misspelt itemIdentifier key fails the whole batch", `{"batchItemFailures":[{"itemIdentifer":"b"}]}`, nil, true},
		{"an unknown message id fails the whole batch", `{"batchItemFailures":[{"itemIdentifier":"zzz"}]}`, nil, true},
		{"a listed message id fails that item only", `{"batchItemFailures":[{"itemIdentifier":"b"}]}`, []string{"b"}, false},
		{"an answer that is not an object is complete success", `[{"id":"a"}]`, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := answering(t, http.StatusOK, tt.answer)
			tg := newTarget(t, httptarget.Config{URL: srv.URL, Batch: true})
			r, err := tg.Deliver(context.Background(), events("a", "b", "c"))
			if tt.malformed {
				if !errors.Is(err, partial.ErrMalformedAnswer) {
					t.Fatalf("error = %v, want one wrapping ErrMalformedAnswer", err)
				}
				if core.IsPermanent(err) || core.IsThrottled(err) {
					t.Errorf("a malformed answer is classified permanent or throttled: %v", err)
				}
				if !strings.Contains(err.Error(), "200") {
					t.Errorf("error %q does not name the status", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Deliver: %v", err)
			}
			if got := failedIDs(r); !slices.Equal(got, tt.wantIDs) && len(got)+len(tt.wantIDs) > 0 {
				t.Errorf("failed ids = %v, want %v", got, tt.wantIDs)
			}
		})
	}
}

func TestBatchAnswerLargerThanSixMegabytesIsMalformed(t *testing.T) {
	big := `{"batchItemFailures":[],"pad":"` + strings.Repeat("x", 6<<20) + `"}`
	srv := answering(t, http.StatusOK, big)
	tg := newTarget(t, httptarget.Config{URL: srv.URL, Batch: true})
	_, err := tg.Deliver(context.Background(), events("a"))
	if !errors.Is(err, partial.ErrMalformedAnswer) {
		t.Fatalf("error = %v, want one wrapping ErrMalformedAnswer", err)
	}
}

func TestBatchStatuses(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		permanent bool
		throttled bool
	}{
		{"a 429 answer is throttling", http.StatusTooManyRequests, false, true},
		{"a 500 answer is retryable", http.StatusInternalServerError, false, false},
		{"a 503 answer is retryable", http.StatusServiceUnavailable, false, false},
		{"a 408 answer is retryable", http.StatusRequestTimeout, false, false},
		{"a 404 answer is permanent", http.StatusNotFound, true, false},
		{"a 400 answer is permanent", http.StatusBadRequest, true, false},
		{"a redirect is not followed and is permanent", http.StatusFound, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := answering(t, tt.status, "went wrong\n"+strings.Repeat("y", 1000))
			tg := newTarget(t, httptarget.Config{URL: srv.URL, Batch: true})
			_, err := tg.Deliver(context.Background(), events("a", "b"))
			if err == nil {
				t.Fatal("Deliver succeeded, want a whole-batch error")
			}
			if got := core.IsPermanent(err); got != tt.permanent {
				t.Errorf("IsPermanent = %v, want %v (%v)", got, tt.permanent, err)
			}
			if got := core.IsThrottled(err); got != tt.throttled {
				t.Errorf("IsThrottled = %v, want %v (%v)", got, tt.throttled, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, http.StatusText(tt.status)) || !strings.Contains(msg, "went wrong") {
				t.Errorf("error %q does not name the status and quote the answer", msg)
			}
			if n := strings.Count(msg, "y"); n > 256 {
				t.Errorf("error quotes %d bytes of the answer, want at most 256", n)
			}
		})
	}
}

func TestTimeoutIsRetryable(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	tg := newTarget(t, httptarget.Config{URL: srv.URL, Batch: true, Timeout: 20 * time.Millisecond})
	_, err := tg.Deliver(context.Background(), events("a"))
	if err == nil {
		t.Fatal("Deliver succeeded, want a timeout")
	}
	if !errors.Is(err, context.DeadlineExceeded) || core.IsPermanent(err) || core.IsThrottled(err) {
		t.Errorf("error = %v, want a plain retryable timeout", err)
	}
	if !strings.Contains(err.Error(), "no answer within 20ms") {
		t.Errorf("error %q does not say it timed out", err)
	}
}

func TestConnectionRefusedIsRetryable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	tg := newTarget(t, httptarget.Config{URL: url, Batch: true})
	_, err := tg.Deliver(context.Background(), events("a"))
	if err == nil {
		t.Fatal("Deliver succeeded against a closed server")
	}
	if core.IsPermanent(err) || core.IsThrottled(err) {
		t.Errorf("error = %v, want a plain retryable error", err)
	}
}

func TestCancelledContextFailsTheBatch(t *testing.T) {
	srv := answering(t, http.StatusOK, "")
	tg := newTarget(t, httptarget.Config{URL: srv.URL, Batch: true})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := tg.Deliver(ctx, events("a"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
}

func TestEmptyBatchSendsNothing(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("the server was called for an empty batch")
	}))
	t.Cleanup(srv.Close)
	for _, batch := range []bool{true, false} {
		tg := newTarget(t, httptarget.Config{URL: srv.URL, Batch: batch})
		r, err := tg.Deliver(context.Background(), nil)
		if err != nil || len(r.Failures) > 0 {
			t.Errorf("batch=%v: Deliver = %v, %v; want success", batch, r, err)
		}
	}
}

type request struct {
	method string
	header http.Header
	body   []byte
}

// recording starts a server that records requests and answers by status(body).
func recording(t *testing.T, status func(body []byte) int) (*httptest.Server, func() []request) {
	t.Helper()
	var mu sync.Mutex
	var reqs []request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		reqs = append(reqs, request{r.Method, r.Header.Clone(), body})
		mu.Unlock()
		w.WriteHeader(status(body))
	}))
	t.Cleanup(srv.Close)
	return srv, func() []request {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(reqs)
	}
}

func TestBatchRequestCarriesPayloadsAndHeaders(t *testing.T) {
	srv, got := recording(t, func([]byte) int { return http.StatusNoContent })
	tg := newTarget(t, httptarget.Config{
		URL: srv.URL + "/orders?x=1", Method: "put", Batch: true,
		Headers: map[string]string{"X-Api-Key": "k-123", "X-Tenant": "t1"},
	})
	evs := events("a", "b", "c")
	evs[1].RecordJSON = []byte("not json <&>")
	evs[2].RecordJSON = []byte(" [1, 2] ")
	if _, err := tg.Deliver(context.Background(), evs); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	reqs := got()
	if len(reqs) != 1 {
		t.Fatalf("server got %d requests, want 1", len(reqs))
	}
	req := reqs[0]
	if req.method != http.MethodPut {
		t.Errorf("method = %s, want PUT", req.method)
	}
	for name, want := range map[string]string{
		"Content-Type": "application/json", "User-Agent": "pipes", "X-Api-Key": "k-123", "X-Tenant": "t1",
	} {
		if v := req.header.Get(name); v != want {
			t.Errorf("header %s = %q, want %q", name, v, want)
		}
	}
	var body []json.RawMessage
	if err := json.Unmarshal(req.body, &body); err != nil {
		t.Fatalf("body %s is not a JSON array: %v", req.body, err)
	}
	var s string
	if len(body) != 3 || string(body[0]) != `{"id":"a"}` || json.Unmarshal(body[1], &s) != nil || s != "not json <&>" || string(body[2]) != `[1, 2]` {
		t.Errorf("body = %s, want the payloads in order, the invalid one as a string", req.body)
	}
}

func TestUserHeadersOverrideDefaults(t *testing.T) {
	srv, got := recording(t, func([]byte) int { return http.StatusOK })
	tg := newTarget(t, httptarget.Config{
		URL: srv.URL, Batch: true,
		Headers: map[string]string{"content-type": "application/vnd.orders+json", "User-Agent": "orders/1"},
	})
	if _, err := tg.Deliver(context.Background(), events("a")); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	h := got()[0].header
	if h.Get("Content-Type") != "application/vnd.orders+json" || h.Get("User-Agent") != "orders/1" {
		t.Errorf("headers = %v, want the configured ones", h)
	}
}

func TestOneRequestPerEvent(t *testing.T) {
	statuses := map[string]int{
		`{"id":"ok"}`: 200, `{"id":"created"}`: 201, `{"id":"slow-down"}`: 429,
		`{"id":"broken"}`: 500, `{"id":"missing"}`: 404, `{"id":"late"}`: 408,
	}
	srv, got := recording(t, func(body []byte) int { return statuses[string(body)] })
	tg := newTarget(t, httptarget.Config{URL: srv.URL, MaxParallel: 2, Headers: map[string]string{"X-Api-Key": "k-123"}})
	r, err := tg.Deliver(context.Background(), events("ok", "created", "slow-down", "broken", "missing", "late"))
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if n := len(got()); n != 6 {
		t.Errorf("server got %d requests, want 6", n)
	}
	for _, req := range got() {
		if req.header.Get("Content-Type") != "application/json" || req.header.Get("X-Api-Key") != "k-123" {
			t.Errorf("request headers = %v", req.header)
		}
	}
	want := map[string]struct{ permanent, throttled bool }{
		"slow-down": {false, true}, "broken": {false, false}, "missing": {true, false}, "late": {false, false},
	}
	if len(r.Failures) != len(want) {
		t.Errorf("failures = %v, want %d", r.Failures, len(want))
	}
	for _, f := range r.Failures {
		w, ok := want[f.ID]
		if !ok {
			t.Errorf("item %s failed: %v", f.ID, f.Err)
			continue
		}
		if f.Err == nil || core.IsPermanent(f.Err) != w.permanent || core.IsThrottled(f.Err) != w.throttled {
			t.Errorf("item %s: error %v, want permanent=%v throttled=%v", f.ID, f.Err, w.permanent, w.throttled)
		}
	}
}

func TestOneRequestPerEventAllThrottledThrottlesTheBatch(t *testing.T) {
	srv, _ := recording(t, func([]byte) int { return http.StatusTooManyRequests })
	tg := newTarget(t, httptarget.Config{URL: srv.URL})
	_, err := tg.Deliver(context.Background(), events("a", "b", "c"))
	if !core.IsThrottled(err) {
		t.Fatalf("error = %v, want a whole-batch Throttled error", err)
	}
}

func TestOneRequestPerEventSendsNonJSONPayloadAsText(t *testing.T) {
	srv, got := recording(t, func([]byte) int { return http.StatusOK })
	tg := newTarget(t, httptarget.Config{URL: srv.URL})
	evs := events("a")
	evs[0].RecordJSON = []byte("plain text")
	if _, err := tg.Deliver(context.Background(), evs); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	req := got()[0]
	if string(req.body) != "plain text" || !strings.HasPrefix(req.header.Get("Content-Type"), "text/plain") {
		t.Errorf("request = %q with Content-Type %q", req.body, req.header.Get("Content-Type"))
	}
}

func TestTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the rejected handshake is expected
	srv.StartTLS()
	t.Cleanup(srv.Close)

	t.Run("an untrusted certificate is rejected by default", func(t *testing.T) {
		tg := newTarget(t, httptarget.Config{URL: srv.URL, Batch: true})
		_, err := tg.Deliver(context.Background(), events("a"))
		var certErr *tls.CertificateVerificationError
		if !errors.As(err, &certErr) {
			t.Fatalf("error = %v, want a certificate verification error", err)
		}
	})
	t.Run("an untrusted certificate is accepted with InsecureSkipVerify, with a warning", func(t *testing.T) {
		var logs bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&logs, nil))
		tg := newTarget(t, httptarget.Config{URL: srv.URL, Batch: true, InsecureSkipVerify: true, Logger: logger})
		if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "insecure_skip_verify") {
			t.Errorf("logs = %q, want a warning about insecure_skip_verify", logs.String())
		}
		if _, err := tg.Deliver(context.Background(), events("a")); err != nil {
			t.Fatalf("Deliver: %v", err)
		}
	})
}

// TestSecretHeaderNeverInErrors has a server echo the secret header in every
// kind of failed answer.
func TestSecretHeaderNeverInErrors(t *testing.T) {
	const secret = "Bearer sk-live-0123456789abcdef"
	tests := []struct {
		name   string
		status int
		body   func(secret string) string
	}{
		{"a 400 echoing the header", 400, func(s string) string { return "bad auth: " + s }},
		{"a 500 echoing the header", 500, func(s string) string { return s }},
		{"a 429 echoing the header", 429, func(s string) string { return "<" + s + ">" }},
		{"a 200 that is invalid JSON echoing the header", 200, func(s string) string { return "{" + s }},
		{"a 200 naming the header as a failed item", 200, func(s string) string {
			b, _ := json.Marshal(map[string]any{"batchItemFailures": []any{map[string]string{"itemIdentifier": s}}})
			return string(b)
		}},
		{"a long 500 with the header cut by the read limit", 500, func(s string) string {
			return strings.Repeat("z", 4096-10) + s + strings.Repeat("z", 100)
		}},
	}
	for _, tt := range tests {
		for _, batch := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s (batch %v)", tt.name, batch), func(t *testing.T) {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.WriteHeader(tt.status)
					_, _ = io.WriteString(w, tt.body(r.Header.Get("Authorization")))
				}))
				t.Cleanup(srv.Close)
				tg := newTarget(t, httptarget.Config{URL: srv.URL, Batch: batch, Headers: map[string]string{"Authorization": secret}})
				r, err := tg.Deliver(context.Background(), events("a", "b"))
				if batch && !strings.Contains(tt.name, "long") && !strings.Contains(fmt.Sprint(err), "[redacted]") {
					t.Errorf("error %v does not show where the echoed secret was redacted", err)
				}
				errs := []error{err}
				for _, f := range r.Failures {
					errs = append(errs, f.Err)
				}
				for _, e := range errs {
					for ; e != nil; e = errors.Unwrap(e) {
						for _, part := range []string{secret, secret[:12], secret[len(secret)-12:]} {
							if strings.Contains(e.Error(), part) {
								t.Errorf("batch=%v: error %q contains (part of) the secret", batch, e)
							}
						}
					}
				}
			})
		}
	}
}

func BenchmarkDeliverBatch(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer srv.Close()
	tg, err := httptarget.New(httptarget.Config{URL: srv.URL, Batch: true})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = tg.Close(context.Background()) }()
	payload := []byte(`{"data":"` + strings.Repeat("x", 1024-11) + `"}`)
	evs := events("0", "1", "2", "3", "4", "5", "6", "7", "8", "9")
	for _, ev := range evs {
		ev.RecordJSON = payload
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(10 * len(payload)))
	for b.Loop() {
		if _, err := tg.Deliver(ctx, evs); err != nil {
			b.Fatal(err)
		}
	}
}

func TestRedirectsAreNotFollowed(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/old", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/new", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/new", func(http.ResponseWriter, *http.Request) {
		t.Error("the redirect was followed")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	tg := newTarget(t, httptarget.Config{URL: srv.URL + "/old", Batch: true})
	_, err := tg.Deliver(context.Background(), events("a"))
	if !core.IsPermanent(err) || !strings.Contains(err.Error(), "307") {
		t.Fatalf("error = %v, want a permanent error naming 307", err)
	}
}

func TestOneRequestPerEventKeepsAtMostMaxParallelInFlight(t *testing.T) {
	var inFlight, most atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(srv.Close)
	tg := newTarget(t, httptarget.Config{URL: srv.URL, MaxParallel: 3})
	ids := make([]string, 30)
	for i := range ids {
		ids[i] = fmt.Sprint(i)
	}
	r, err := tg.Deliver(context.Background(), events(ids...))
	if err != nil || len(r.Failures) > 0 {
		t.Fatalf("Deliver = %v, %v; want success", r, err)
	}
	if m := most.Load(); m > 3 {
		t.Errorf("%d requests were in flight at once, want at most 3", m)
	}
}

// sharedHeaders is a real transport that counts the distinct header maps
// of the requests it sends.
type sharedHeaders struct {
	mu   sync.Mutex
	seen []http.Header // kept alive, so that no two maps share an address
}

func (s *sharedHeaders) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.seen = append(s.seen, req.Header)
	s.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

func (s *sharedHeaders) distinct() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	maps := map[uintptr]bool{}
	for _, h := range s.seen {
		maps[reflect.ValueOf(h).Pointer()] = true
	}
	return len(maps)
}

func TestRequestsShareTheHeaderMapUnlessAHeaderIsRendered(t *testing.T) {
	srv, _ := recording(t, func([]byte) int { return http.StatusOK })
	tests := []struct {
		name     string
		batch    bool
		headers  map[string]string
		wantMaps int
	}{
		{"batches with fixed headers share one map", true, map[string]string{"Authorization": "Bearer t0ken"}, 1},
		{"single events with fixed headers share one map", false, map[string]string{"Authorization": "Bearer t0ken"}, 1},
		{"a rendered header gives each request its own map", false, map[string]string{"X-Id": "<$.messageId>"}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := &sharedHeaders{}
			tg := newTarget(t, httptarget.Config{URL: srv.URL, Batch: tt.batch, Headers: tt.headers, MaxParallel: 1,
				Client: &http.Client{Transport: tr}})
			for range 2 {
				if r, err := tg.Deliver(context.Background(), events("a", "b")); err != nil || len(r.Failures) > 0 {
					t.Fatalf("Deliver = %v, %v", r, err)
				}
			}
			if got := tr.distinct(); got != tt.wantMaps {
				t.Errorf("requests used %d header maps, want %d", got, tt.wantMaps)
			}
		})
	}
}

// errorTexts lists the text of err and of every error it wraps, and the
// same for each item failure of r.
func errorTexts(r pipe.Result, err error) []string {
	var texts []string
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		texts = append(texts, e.Error())
		switch w := e.(type) {
		case interface{ Unwrap() error }:
			walk(w.Unwrap())
		case interface{ Unwrap() []error }:
			for _, e := range w.Unwrap() {
				walk(e)
			}
		}
	}
	walk(err)
	for _, f := range r.Failures {
		walk(f.Err)
	}
	return texts
}

// TestEchoedCredentialsNeverInErrors has a real server answer with the
// credentials of a request (not the whole header value) in its body.
func TestEchoedCredentialsNeverInErrors(t *testing.T) {
	const token = "sk-live-0123456789abcdef"
	const odd = "tok/en+with<html>&chars" // escaped when echoed in JSON or a URL
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("svc-user:pa55word-xyz"))
	tests := []struct {
		name    string
		url     string // appended to the server URL
		query   map[string]string
		headers map[string]string
		secret  string
		status  int
		answer  func(r *http.Request) string
	}{
		{"a 401 echoing the bearer token", "", nil, map[string]string{"Authorization": "Bearer " + token}, token, 401,
			func(r *http.Request) string {
				return "invalid token: " + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			}},
		{"a 403 echoing a Token scheme's credentials", "", nil, map[string]string{"Authorization": "Token " + token}, token, 403,
			func(r *http.Request) string { return `{"detail":"token ` + token + ` revoked"}` }},
		{"a 401 echoing the decoded basic password", "", nil, map[string]string{"Authorization": basic}, "pa55word-xyz", 401,
			func(r *http.Request) string { _, pw, _ := r.BasicAuth(); return "wrong password " + pw }},
		{"a 500 echoing the token JSON-escaped", "", nil, map[string]string{"X-Api-Key": odd}, odd, 500,
			func(r *http.Request) string {
				b, _ := json.Marshal(map[string]string{"error": "bad key " + r.Header.Get("X-Api-Key")})
				return string(b)
			}},
		{"a 400 echoing a query secret URL-escaped", "/in?api_key=" + url.QueryEscape(odd), nil, nil, odd, 400,
			func(r *http.Request) string { return "bad request " + r.URL.RawQuery }},
		{"a 400 echoing a query parameter secret", "", map[string]string{"sig": token}, nil, token, 400,
			func(r *http.Request) string { return "bad signature " + r.URL.Query().Get("sig") }},
		{"a 401 echoing the URL's password", "", nil, nil, "pa55word-xyz", 401,
			func(r *http.Request) string { _, pw, _ := r.BasicAuth(); return "denied for " + pw }},
		{"a 400 echoing the bearer token base64-encoded", "", nil, map[string]string{"Authorization": "Bearer " + token}, token, 400,
			func(r *http.Request) string {
				return "token b64 " + base64.StdEncoding.EncodeToString([]byte(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")))
			}},
		{"a 400 echoing an API key base64-encoded, URL-safe and raw", "", nil, map[string]string{"X-Api-Key": odd}, odd, 400,
			func(r *http.Request) string {
				return "key " + base64.RawURLEncoding.EncodeToString([]byte(r.Header.Get("X-Api-Key")))
			}},
		{"a 401 echoing the URL's userinfo as Basic credentials", "", nil, nil, "pa55word-xyz", 401,
			func(r *http.Request) string { return "denied for " + r.Header.Get("Authorization") }},
		{"a 200 naming the token as a failed item", "", nil, map[string]string{"Authorization": "Bearer " + token}, token, 200,
			func(r *http.Request) string {
				return `{"batchItemFailures":[{"itemIdentifier":"` + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") + `"}]}`
			}},
	}
	for _, tt := range tests {
		for _, batch := range []bool{true, false} {
			if tt.status == 200 && !batch {
				continue // a single event's 2xx answer is not read
			}
			t.Run(fmt.Sprintf("%s (batch %v)", tt.name, batch), func(t *testing.T) {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.WriteHeader(tt.status)
					_, _ = io.WriteString(w, tt.answer(r))
				}))
				t.Cleanup(srv.Close)
				u := srv.URL + tt.url
				if strings.Contains(tt.name, "URL's password") || strings.Contains(tt.name, "URL's userinfo") {
					u = strings.Replace(u, "http://", "http://svc-user:pa55word-xyz@", 1)
				}
				tg := newTarget(t, httptarget.Config{URL: u, Batch: batch, Headers: tt.headers, Query: tt.query})
				r, err := tg.Deliver(context.Background(), events("a", "b"))
				texts := errorTexts(r, err)
				if len(texts) == 0 {
					t.Fatal("Deliver succeeded, want errors")
				}
				if !strings.Contains(strings.Join(texts, "\n"), "[redacted]") {
					t.Errorf("errors %q do not show where the secret was redacted", texts)
				}
				quoted, _ := json.Marshal(tt.secret)
				parts := []string{tt.secret, tt.secret[:8], tt.secret[len(tt.secret)-8:], url.QueryEscape(tt.secret), string(quoted[1 : len(quoted)-1]),
					base64.StdEncoding.EncodeToString([]byte(tt.secret)), base64.RawURLEncoding.EncodeToString([]byte(tt.secret)),
					base64.StdEncoding.EncodeToString([]byte("svc-user:" + tt.secret))}
				for _, text := range texts {
					for _, part := range parts {
						if strings.Contains(text, part) {
							t.Errorf("error %q contains %q, part of the secret", text, part)
						}
					}
				}
				wantPermanent := tt.status >= 400 && tt.status < 500
				for _, e := range append([]error{err}, func() (es []error) {
					for _, f := range r.Failures {
						es = append(es, f.Err)
					}
					return es
				}()...) {
					if e != nil && tt.status != 200 && core.IsPermanent(e) != wantPermanent {
						t.Errorf("error %v: permanent = %v, want %v", e, core.IsPermanent(e), wantPermanent)
					}
					if e != nil && tt.status == 200 && !errors.Is(e, partial.ErrMalformedAnswer) {
						t.Errorf("error %v no longer wraps ErrMalformedAnswer", e)
					}
				}
			})
		}
	}
}

// grouped makes one event per "group/id" (or "id" without a group), as a
// FIFO queue's records carry their MessageGroupId.
func grouped(specs ...string) []*pipe.Event {
	evs := make([]*pipe.Event, len(specs))
	for i, s := range specs {
		group, id, ok := strings.Cut(s, "/")
		if !ok {
			group, id = "", s
		}
		evs[i] = &pipe.Event{
			Message:    &source.Message{MessageID: id, Body: id, Attributes: map[string]string{}},
			RecordJSON: []byte(`{"id":"` + id + `"}`),
		}
		if group != "" {
			evs[i].Message.Attributes[source.AttrMessageGroupID] = group
		}
	}
	return evs
}

// arrivals starts a server that records the ids of the requests in the
// order they arrive, sleeping a little at random before answering with
// status(id).
func arrivals(t *testing.T, status func(id string) int) (*httptest.Server, func() []string, *atomic.Int32) {
	t.Helper()
	var mu sync.Mutex
	var ids []string
	var inFlight, most atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		var body struct{ ID string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		ids = append(ids, body.ID)
		mu.Unlock()
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
		w.WriteHeader(status(body.ID))
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(ids)
	}, &most
}

func TestOneRequestPerEventKeepsTheOrderOfEachMessageGroup(t *testing.T) {
	// Four groups interleaved, and events without a group between them.
	var specs []string
	for i := range 10 {
		for _, g := range []string{"g1", "g2", "g3", "g4"} {
			specs = append(specs, fmt.Sprintf("%s/%s-%02d", g, g, i))
		}
		specs = append(specs, fmt.Sprintf("loose-%02d", i))
	}
	for round := range 3 {
		srv, got, most := arrivals(t, func(string) int { return http.StatusOK })
		tg := newTarget(t, httptarget.Config{URL: srv.URL})
		r, err := tg.Deliver(context.Background(), grouped(specs...))
		if err != nil || len(r.Failures) > 0 {
			t.Fatalf("round %d: Deliver = %v, %v; want success", round, r, err)
		}
		order := map[string][]string{}
		for _, id := range got() {
			if g, _, ok := strings.Cut(id, "-"); ok && g != "loose" {
				order[g] = append(order[g], id)
			}
		}
		for _, g := range []string{"g1", "g2", "g3", "g4"} {
			if !slices.IsSorted(order[g]) || len(order[g]) != 10 {
				t.Errorf("round %d: group %s arrived as %v, want its 10 events in batch order", round, g, order[g])
			}
		}
		if n := len(got()); n != len(specs) {
			t.Errorf("round %d: server got %d requests, want %d", round, n, len(specs))
		}
		if m := most.Load(); m < 2 || m > 16 {
			t.Errorf("round %d: %d requests were in flight at most, want groups in parallel, 16 at most", round, m)
		}
	}
}

func TestOneRequestPerEventStopsAMessageGroupAtItsFirstFailure(t *testing.T) {
	batch := []string{"A/a1", "B/b1", "A/a2", "x1", "B/b2", "A/a3", "x2", "A/a4", "B/b3"}
	tests := []struct {
		name        string
		statuses    map[string]int // others answer 200
		maxParallel int
		wantNotSent []string // failed, held back
		wantFailed  []string // failed by the server
	}{
		{"a retryable failure holds back the rest of its group", map[string]int{"a2": 500}, 0,
			[]string{"a3", "a4"}, []string{"a2"}},
		{"a permanent failure holds back the rest of its group too", map[string]int{"b1": 400}, 0,
			[]string{"b2", "b3"}, []string{"b1"}},
		{"the last event of a group holds back nothing", map[string]int{"a4": 503}, 0,
			nil, []string{"a4"}},
		{"an event without a group holds back nothing", map[string]int{"x1": 500}, 0,
			nil, []string{"x1"}},
		{"one request at a time holds back the same", map[string]int{"a1": 500, "b2": 404}, 1,
			[]string{"a2", "a3", "a4", "b3"}, []string{"a1", "b2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, got, _ := arrivals(t, func(id string) int { return cmp.Or(tt.statuses[id], http.StatusOK) })
			tg := newTarget(t, httptarget.Config{URL: srv.URL, MaxParallel: tt.maxParallel})
			r, err := tg.Deliver(context.Background(), grouped(batch...))
			if err != nil {
				t.Fatalf("Deliver: %v", err)
			}
			seen := got()
			for _, id := range tt.wantNotSent {
				if slices.Contains(seen, id) {
					t.Errorf("%s was sent after an earlier event of its group failed", id)
				}
			}
			if len(seen) != len(batch)-len(tt.wantNotSent) {
				t.Errorf("server got %v", seen)
			}
			want := slices.Sorted(slices.Values(append(slices.Clone(tt.wantFailed), tt.wantNotSent...)))
			if ids := slices.Sorted(slices.Values(failedIDs(r))); !slices.Equal(ids, want) {
				t.Errorf("failed = %v, want %v", ids, want)
			}
			for _, f := range r.Failures {
				if !slices.Contains(tt.wantNotSent, f.ID) {
					continue
				}
				if core.IsPermanent(f.Err) || !strings.Contains(f.Err.Error(), "an earlier message") {
					t.Errorf("%s: error %v, want a retryable one saying an earlier message of the group failed", f.ID, f.Err)
				}
			}
		})
	}
}

func TestOneRequestPerEventThrottledAtTheHeadOfEveryGroupThrottlesTheBatch(t *testing.T) {
	srv, _, _ := arrivals(t, func(string) int { return http.StatusTooManyRequests })
	tg := newTarget(t, httptarget.Config{URL: srv.URL})
	_, err := tg.Deliver(context.Background(), grouped("A/a1", "A/a2", "B/b1", "B/b2"))
	if !core.IsThrottled(err) {
		t.Fatalf("error = %v, want a whole-batch Throttled error", err)
	}
}

// Without batch, a call whose every request failed retryably (5xx, 408, a
// refused connection) is the endpoint down, not its records wrong: Deliver
// fails the batch whole with a retryable error, so that the pipe takes it
// for an outage (no receive counted, nothing dead-lettered), as it does a
// failed batch request. Before, each record came back as an item failure:
// a verdict on it. Where any request went through, or one failed as a
// client error, the items decide.
func TestOneRequestPerEventAllFailingRetryablyFailsTheBatch(t *testing.T) {
	tests := []struct {
		name      string
		statuses  map[string]int // by id; others 503
		whole     bool
		throttled bool
	}{
		{"all 503", nil, true, false},
		{"503, 500 and 408", map[string]int{"b": 500, "c": 408}, true, false},
		{"503 and 429", map[string]int{"b": 429}, true, true},
		{"one went through", map[string]int{"b": 200}, false, false},
		{"one client error", map[string]int{"b": 400}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := recording(t, func(body []byte) int {
				var ev struct{ ID string }
				_ = json.Unmarshal(body, &ev)
				return cmp.Or(tt.statuses[ev.ID], http.StatusServiceUnavailable)
			})
			tg := newTarget(t, httptarget.Config{URL: srv.URL})
			r, err := tg.Deliver(context.Background(), events("a", "b", "c"))
			if !tt.whole {
				if err != nil || len(r.Failures) == 0 {
					t.Fatalf("Deliver = %v, %v; want item failures", r.Failures, err)
				}
				return
			}
			if err == nil || len(r.Failures) != 0 {
				t.Fatalf("Deliver = %v, %v; want a whole-batch error", r.Failures, err)
			}
			if core.IsPermanent(err) || core.IsThrottled(err) != tt.throttled {
				t.Errorf("error %v: permanent %v, throttled %v; want retryable, throttled %v", err, core.IsPermanent(err), core.IsThrottled(err), tt.throttled)
			}
		})
	}
	t.Run("connection refused", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		tg := newTarget(t, httptarget.Config{URL: url, Timeout: 2 * time.Second})
		r, err := tg.Deliver(context.Background(), events("a", "b"))
		if err == nil || len(r.Failures) != 0 || core.IsPermanent(err) {
			t.Fatalf("Deliver = %v, %v; want a retryable whole-batch error", r.Failures, err)
		}
	})
	t.Run("a FIFO group stopped at its head", func(t *testing.T) {
		srv, _, _ := arrivals(t, func(string) int { return http.StatusBadGateway })
		tg := newTarget(t, httptarget.Config{URL: srv.URL})
		if _, err := tg.Deliver(context.Background(), grouped("A/a1", "A/a2", "B/b1")); err == nil {
			t.Fatal("every request sent failed 502, want a whole-batch error")
		}
	})
}

func TestAnItemAnswered429Or503WithRetryAfterAsksToWait(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		retryAfter string
		want       time.Duration
	}{
		{"503 with seconds", http.StatusServiceUnavailable, "7", 7 * time.Second},
		{"429 with seconds", http.StatusTooManyRequests, "30", 30 * time.Second},
		{"503 without the header leaves it to the pipe", http.StatusServiceUnavailable, "", 0},
		{"503 with a header that is not readable leaves it to the pipe", http.StatusServiceUnavailable, "later", 0},
		{"500 with the header: only 429 and 503 are read", http.StatusInternalServerError, "7", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if strings.Contains(string(body), "busy") {
					if tt.retryAfter != "" {
						w.Header().Set("Retry-After", tt.retryAfter)
					}
					w.WriteHeader(tt.status)
					return
				}
				w.WriteHeader(http.StatusOK)
			}))
			t.Cleanup(srv.Close)
			target, err := httptarget.New(httptarget.Config{URL: srv.URL, MaxParallel: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = target.Close(context.Background()) })
			res, err := target.Deliver(context.Background(), events("ok", "busy"))
			if err != nil {
				t.Fatalf("Deliver: %v", err)
			}
			if len(res.Failures) != 1 || res.Failures[0].ID != "busy" {
				t.Fatalf("failures %+v, want the busy item only", res.Failures)
			}
			if got := res.Failures[0].RetryAfter; got != tt.want {
				t.Errorf("RetryAfter %v, want %v", got, tt.want)
			}
		})
	}
}
