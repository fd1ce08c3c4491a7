package enrich_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipesproject/pipes/enrich"
	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/internal/kit/partial"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/template"
)

// batchOf makes events a, b, c… with bodies {"n":1}, {"n":2}…
func batchOf(ids ...string) []*pipe.Event {
	evs := make([]*pipe.Event, len(ids))
	for i, id := range ids {
		evs[i] = event(id, fmt.Sprintf(`{"n":%d}`, i+1))
	}
	return evs
}

// outputs lists the returned events as "id=payload", in order.
func outputs(out []*pipe.Event) []string {
	var s []string
	for _, ev := range out {
		s = append(s, ev.ID()+"="+string(ev.RecordJSON))
	}
	return s
}

func failedIDs(res pipe.Result) []string {
	var ids []string
	for _, f := range res.Failures {
		ids = append(ids, f.ID)
		if f.Err == nil {
			ids = append(ids, "(no reason)")
		}
	}
	return ids
}

// errKind names how err is classified.
func errKind(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, partial.ErrMalformedAnswer):
		return "malformed"
	case core.IsThrottled(err):
		return "throttled"
	case core.IsPermanent(err):
		return "permanent"
	}
	return "retryable"
}

// answerWith answers every request with status and body.
func answerWith(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// splitting answers a batch of several with one aggregate, and a batch of
// one with its element wrapped: the enrichment must call once per event.
func splitting(w http.ResponseWriter, r *http.Request) {
	var in []json.RawMessage
	_ = json.NewDecoder(r.Body).Decode(&in)
	if len(in) != 1 {
		_, _ = io.WriteString(w, `[{"aggregate":true}]`)
		return
	}
	var rec struct {
		MessageID string `json:"messageId"`
	}
	_ = json.Unmarshal(in[0], &rec)
	fmt.Fprintf(w, `[{"one":%q},{"two":%q}]`, rec.MessageID, rec.MessageID)
}

func TestHTTPEnrichmentMapsAnswersToMessages(t *testing.T) {
	tests := []struct {
		name      string
		handler   http.HandlerFunc
		events    []*pipe.Event
		want      []string // "id=payload"
		wantFail  []string
		wantErr   string // errKind
		wantCalls int32
	}{
		{name: "an array of the same length replaces the payloads by position",
			handler: answerWith(200, `[1, "two", {"three":3}]`), events: batchOf("a", "b", "c"),
			want: []string{`a=1`, `b="two"`, `c={"three":3}`}},
		{name: "outputs carrying messageId map by it and unnamed messages are done",
			handler: answerWith(200, `[{"messageId":"c","v":3},{"messageId":"a","v":1}]`), events: batchOf("a", "b", "c"),
			want: []string{`c={"messageId":"c","v":3}`, `a={"messageId":"a","v":1}`}},
		{name: "several outputs naming one message make several events of it",
			handler: answerWith(200, `[{"messageId":"b","i":1},{"messageId":"b","i":2}]`), events: batchOf("a", "b"),
			want: []string{`b={"messageId":"b","i":1}`, `b={"messageId":"b","i":2}`}},
		{name: "an output naming a message not in the batch fails the whole batch",
			handler: answerWith(200, `[{"messageId":"zz"},{"messageId":"a"}]`), events: batchOf("a", "b"), wantErr: "malformed"},
		{name: "outputs mixing messageId and none fail the whole batch",
			handler: answerWith(200, `[{"messageId":"a"},{"x":1}]`), events: batchOf("a", "b"), wantErr: "malformed"},
		{name: "an empty messageId fails the whole batch",
			handler: answerWith(200, `[{"messageId":""},{"messageId":"a"}]`), events: batchOf("a", "b"), wantErr: "malformed"},
		{name: "an empty body means the target is not called", handler: answerWith(200, ``), events: batchOf("a", "b")},
		{name: "an empty string means the target is not called", handler: answerWith(200, `""`), events: batchOf("a", "b")},
		{name: "an empty object means the target is not called", handler: answerWith(200, ` {} `), events: batchOf("a", "b")},
		{name: "an empty array means the target is not called", handler: answerWith(200, `[]`), events: batchOf("a", "b")},
		{name: "null means the target is not called", handler: answerWith(200, `null`), events: batchOf("a", "b")},
		{name: "an array of another length without messageIds is retried once per event",
			handler: splitting, events: batchOf("a", "b"), wantCalls: 3,
			want: []string{`a={"one":"a"}`, `a={"two":"a"}`, `b={"one":"b"}`, `b={"two":"b"}`}},
		{name: "a longer array for a batch of one fans out",
			handler: answerWith(200, `[1,2]`), events: batchOf("a"), want: []string{`a=1`, `a=2`}},
		{name: "an object answer to a batch of one is its new payload",
			handler: answerWith(200, `{"total":3}`), events: batchOf("a"), want: []string{`a={"total":3}`}},
		{name: "an object answer to a larger batch is retried once per event",
			handler: answerWith(200, `{"total":3}`), events: batchOf("a", "b"), wantCalls: 3,
			want: []string{`a={"total":3}`, `b={"total":3}`}},
		{name: "batchItemFailures fail the named messages and the rest go on unchanged",
			handler: answerWith(200, `{"batchItemFailures":[{"itemIdentifier":"b"}]}`), events: batchOf("a", "b"),
			want: []string{`a=` + string(batchOf("a")[0].RecordJSON)}, wantFail: []string{"b"}},
		{name: "batchItemFailures with items replace the payloads of the rest",
			handler: answerWith(200, `{"batchItemFailures":[{"itemIdentifier":"a"}],"items":[{"x":2},{"x":3}]}`),
			events:  batchOf("a", "b", "c"), want: []string{`b={"x":2}`, `c={"x":3}`}, wantFail: []string{"a"}},
		{name: "batchItemFailures with empty items make the rest done",
			handler: answerWith(200, `{"batchItemFailures":[],"items":[]}`), events: batchOf("a", "b")},
		{name: "items that cannot be tied to messages fail the whole batch",
			handler: answerWith(200, `{"batchItemFailures":[],"items":[1]}`), events: batchOf("a", "b"), wantErr: "malformed"},
		{name: "a batchItemFailures naming an unknown message fails the whole batch",
			handler: answerWith(200, `{"batchItemFailures":[{"itemIdentifier":"zz"}]}`), events: batchOf("a"), wantErr: "malformed"},
		{name: "an answer that is not JSON fails the whole batch",
			handler: answerWith(200, `ok, thanks`), events: batchOf("a"), wantErr: "malformed"},
		{name: "429 is throttling", handler: answerWith(429, `slow down`), events: batchOf("a"), wantErr: "throttled"},
		{name: "503 is retryable", handler: answerWith(503, ``), events: batchOf("a"), wantErr: "retryable"},
		{name: "408 is retryable", handler: answerWith(408, ``), events: batchOf("a"), wantErr: "retryable"},
		{name: "400 is a client error", handler: answerWith(400, `bad`), events: batchOf("a"), wantErr: "permanent"},
		{name: "a redirect is a client error", handler: func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}, events: batchOf("a"), wantErr: "permanent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
					t.Errorf("got %s with Content-Type %q", r.Method, r.Header.Get("Content-Type"))
				}
				tt.handler(w, r)
			}))
			defer srv.Close()
			h, err := enrich.NewHTTP(enrich.HTTPConfig{URL: srv.URL, Batch: true})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close(context.Background())
			out, res, err := h.Enrich(context.Background(), tt.events)
			if got := errKind(err); got != tt.wantErr {
				t.Fatalf("error %v is %q, want %q", err, got, tt.wantErr)
			}
			if got := outputs(out); !slices.Equal(got, tt.want) {
				t.Errorf("outputs = %q, want %q", got, tt.want)
			}
			if got := failedIDs(res); !slices.Equal(got, tt.wantFail) {
				t.Errorf("failed = %v, want %v", got, tt.wantFail)
			}
			if want := max(tt.wantCalls, 1); calls.Load() != want {
				t.Errorf("%d requests, want %d", calls.Load(), want)
			}
		})
	}
}

func TestHTTPEnrichmentSendsTheBatchAsAnArrayOfRenderedPayloads(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = string(b)
		_, _ = w.Write(b) // echo: same length, positional
	}))
	defer srv.Close()
	tmpl, err := template.Parse(`{"id": "<$.messageId>", "n": <$.body.n>, "pipe": "<aws.pipes.pipe-name>"}`)
	if err != nil {
		t.Fatal(err)
	}
	h, err := enrich.NewHTTP(enrich.HTTPConfig{URL: srv.URL, Batch: true, Template: tmpl, Vars: template.Vars{PipeName: "orders"}})
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := h.Enrich(context.Background(), batchOf("a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"id":"a","n":1,"pipe":"orders"},{"id":"b","n":2,"pipe":"orders"}]`
	if compact(got) != want {
		t.Errorf("request body = %s, want %s", got, want)
	}
	if o := outputs(out); len(o) != 2 || compact(o[1]) != `b={"id":"b","n":2,"pipe":"orders"}` {
		t.Errorf("outputs = %q", o)
	}
}

func compact(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r != ' ' && r != '\n' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestHTTPEnrichmentOneRequestPerEvent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rec struct {
			MessageID string `json:"messageId"`
		}
		_ = json.NewDecoder(r.Body).Decode(&rec)
		switch rec.MessageID {
		case "a":
			_, _ = io.WriteString(w, "plain text answer")
		case "b":
			w.WriteHeader(http.StatusInternalServerError)
		case "c":
			_, _ = io.WriteString(w, `[]`)
		default:
			_, _ = io.WriteString(w, `{"batchItemFailures":[{"itemIdentifier":"d"}]}`)
		}
	}))
	defer srv.Close()
	h, err := enrich.NewHTTP(enrich.HTTPConfig{URL: srv.URL, Batch: false})
	if err != nil {
		t.Fatal(err)
	}
	out, res, err := h.Enrich(context.Background(), batchOf("a", "b", "c", "d"))
	if err != nil {
		t.Fatalf("one event's failure must not fail the batch: %v", err)
	}
	if got := outputs(out); !slices.Equal(got, []string{"a=plain text answer"}) {
		t.Errorf("outputs = %q", got)
	}
	if got := failedIDs(res); !slices.Equal(got, []string{"b", "d"}) {
		t.Errorf("failed = %v, want b and d", got)
	}
	if k := errKind(res.Failures[0].Err); k != "retryable" {
		t.Errorf("a 500 for one event is %s, want retryable", k)
	}
}

func TestHTTPEnrichmentTimesOutAsRetryable(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select { // no answer until the client gave up and the test ends
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	h, err := enrich.NewHTTP(enrich.HTTPConfig{URL: srv.URL, Batch: true, Timeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = h.Enrich(context.Background(), batchOf("a"))
	if errKind(err) != "retryable" || !strings.Contains(err.Error(), "no answer within") {
		t.Errorf("error = %v, want a retryable timeout", err)
	}
}

func TestHTTPEnrichmentNeverShowsSecrets(t *testing.T) {
	const token, password, key = "Bearer s3cr3t-t0ken", "hunter22", "k3y-in-query"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, "bad credentials: %s", r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close() // a port nothing listens on
	for _, u := range []string{srv.URL, down.URL} {
		u = strings.Replace(u, "http://", "http://user:"+password+"@", 1) + "/path?key=" + key
		h, err := enrich.NewHTTP(enrich.HTTPConfig{URL: u, Batch: true, Headers: map[string]string{"Authorization": token}})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = h.Enrich(context.Background(), batchOf("a"))
		if err == nil {
			t.Fatal("want an error")
		}
		for _, secret := range []string{"s3cr3t", password, key} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q shows a secret", err)
			}
		}
	}
	_, err := enrich.NewHTTP(enrich.HTTPConfig{URL: srv.URL, Headers: map[string]string{"X-Key": "s3cr3t\n"}})
	if err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("a bad header value: error %v", err)
	}
}

func TestNewHTTPReportsEveryProblem(t *testing.T) {
	_, err := enrich.NewHTTP(enrich.HTTPConfig{URL: "ftp://x", Method: "GET X", Timeout: -1, Headers: map[string]string{"bad name": "v"}})
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{"scheme", "method", "timeout", "header name"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func BenchmarkHTTPEnrichmentBatch(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, _ = w.Write(body) // echo
	}))
	defer srv.Close()
	h, err := enrich.NewHTTP(enrich.HTTPConfig{URL: srv.URL, Batch: true})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(context.Background())
	events := batchOf("a", "b", "c", "d", "e", "f", "g", "h", "i", "j")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := h.Enrich(context.Background(), events); err != nil {
			b.Fatal(err)
		}
	}
}

func TestHTTPEnrichmentOneByOneFailsWholeWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		cancel() // shutdown begins while the enrichment runs
		_, _ = io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	h, err := enrich.NewHTTP(enrich.HTTPConfig{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = h.Enrich(ctx, batchOf("a", "b"))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want the batch failed whole by the cancellation", err)
	}
}

// TestHTTPEnrichmentUsesTheSharedClientCore checks what the enrichment
// gets from the client core it shares with the http target.
func TestHTTPEnrichmentUsesTheSharedClientCore(t *testing.T) {
	var host, ctype string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, ctype = r.Host, r.Header.Get("Content-Type")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	tests := []struct {
		name               string
		headers            map[string]string
		wantHost, wantType string
	}{
		{"a Host header sets the request's host", map[string]string{"Host": "api.internal"}, "api.internal", "application/json"},
		{"a Content-Type header overrides the default", map[string]string{"Content-Type": "application/cloudevents+json"},
			strings.TrimPrefix(srv.URL, "http://"), "application/cloudevents+json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := enrich.NewHTTP(enrich.HTTPConfig{URL: srv.URL, Batch: true, Headers: tt.headers})
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = h.Enrich(context.Background(), batchOf("a"))
			if k := errKind(err); k != "throttled" {
				t.Errorf("a 429 is %s (%v), want throttled", k, err)
			}
			if host != tt.wantHost || ctype != tt.wantType {
				t.Errorf("server saw host %q, Content-Type %q; want %q, %q", host, ctype, tt.wantHost, tt.wantType)
			}
		})
	}
}

// TestHTTPEnrichmentNeverShowsEchoedCredentials has a real server answer
// with the credentials of a request (not the whole header value).
func TestHTTPEnrichmentNeverShowsEchoedCredentials(t *testing.T) {
	const token = "sk-live-0123456789abcdef"
	bearer := func(r *http.Request) string { return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") }
	tests := []struct {
		name   string
		batch  bool
		status int
		answer func(r *http.Request) string
	}{
		{"a 401 echoing the token, batch", true, 401, func(r *http.Request) string { return "invalid token: " + bearer(r) }},
		{"a 401 echoing the token, one by one", false, 401, func(r *http.Request) string { return "invalid token: " + bearer(r) }},
		{"a 429 echoing the token", true, 429, func(r *http.Request) string { return `{"message":"slow down, ` + bearer(r) + `"}` }},
		{"a 200 naming the token as a messageId", true, 200, func(r *http.Request) string {
			return `[{"messageId":"` + bearer(r) + `","n":1}]`
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.answer(r))
			}))
			defer srv.Close()
			h, err := enrich.NewHTTP(enrich.HTTPConfig{URL: srv.URL, Batch: tt.batch, Headers: map[string]string{"Authorization": "Bearer " + token}})
			if err != nil {
				t.Fatal(err)
			}
			_, res, err := h.Enrich(context.Background(), batchOf("a"))
			errs := []error{err}
			for _, f := range res.Failures {
				errs = append(errs, f.Err)
			}
			var texts []string
			for _, e := range errs {
				for ; e != nil; e = errors.Unwrap(e) {
					texts = append(texts, e.Error())
				}
			}
			if !strings.Contains(strings.Join(texts, "\n"), "[redacted]") {
				t.Fatalf("errors %q do not show where the token was redacted", texts)
			}
			for _, text := range texts {
				for _, part := range []string{token, token[:8], token[len(token)-8:]} {
					if strings.Contains(text, part) {
						t.Errorf("error %q contains %q, part of the token", text, part)
					}
				}
			}
			want := map[int]string{401: "permanent", 429: "throttled", 200: "malformed"}[tt.status]
			for _, e := range errs {
				if e != nil && errKind(e) != want {
					t.Errorf("error %v is %s, want %s", e, errKind(e), want)
				}
			}
		})
	}
}
