package httpcore

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/core"
)

func kindOf(err error) string {
	switch {
	case err == nil:
		return "ok"
	case core.IsThrottled(err):
		return "throttled"
	case core.IsPermanent(err):
		return "permanent"
	default:
		return "retryable"
	}
}

func newClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestDoClassifiesEveryOutcome sends one request per row to a real server.
func TestDoClassifiesEveryOutcome(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/status/{code}", func(w http.ResponseWriter, r *http.Request) {
		var code int
		for _, c := range r.PathValue("code") {
			code = code*10 + int(c-'0')
		}
		if code >= 300 && code <= 399 {
			w.Header().Set("Location", "/status/200")
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, "answer of "+r.PathValue("code"))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(make([]byte, MaxAnswer+1))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close() // a port nothing listens on

	tests := []struct {
		name, url, wantKind, wantText string
	}{
		{"a 200 succeeds and its answer is read", srv.URL + "/status/200", "ok", ""},
		{"a 204 succeeds", srv.URL + "/status/204", "ok", ""},
		{"a 429 is throttled", srv.URL + "/status/429", "throttled", `answered 429 Too Many Requests: "answer of 429"`},
		{"a 408 is retryable", srv.URL + "/status/408", "retryable", "answered 408"},
		{"a 500 is retryable", srv.URL + "/status/500", "retryable", "answered 500"},
		{"a 503 is retryable", srv.URL + "/status/503", "retryable", "answered 503"},
		{"a 400 is permanent", srv.URL + "/status/400", "permanent", "answered 400"},
		{"a 401 is permanent", srv.URL + "/status/401", "permanent", "answered 401"},
		{"a 404 is permanent", srv.URL + "/status/404", "permanent", "answered 404"},
		{"a redirect is permanent and not followed", srv.URL + "/status/302", "permanent", "redirects are not followed"},
		{"a refused connection is retryable", down.URL, "retryable", "sending the request"},
		{"no answer within the timeout is retryable", srv.URL + "/slow", "retryable", "no answer within 200ms"},
		{"an answer over the cap is an error", srv.URL + "/big", "retryable", ErrAnswerTooLarge.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Only the slow row needs the short timeout; the others get a
			// long one so that a loaded machine cannot make them time out.
			timeout := 10 * time.Second
			if strings.HasSuffix(tt.url, "/slow") {
				timeout = 200 * time.Millisecond
			}
			c := newClient(t, Config{URL: tt.url, Timeout: timeout})
			_, answer, err := c.Do(context.Background(), &Request{Body: []byte("{}"), ContentType: ContentJSON, ReadAnswer: true})
			if got := kindOf(err); got != tt.wantKind {
				t.Fatalf("Do: %s (%v), want %s", got, err, tt.wantKind)
			}
			if err != nil && !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("error %q does not contain %q", err, tt.wantText)
			}
			if err != nil && strings.Contains(err.Error(), "127.0.0.1:") && !strings.Contains(tt.name, "refused") {
				t.Errorf("error %q quotes the URL", err)
			}
			if tt.name == "a 200 succeeds and its answer is read" && string(answer) != "answer of 200" {
				t.Errorf("answer = %q", answer)
			}
		})
	}
}

// headerRecorder is a real transport that notes the header map of each
// request it sends.
type headerRecorder struct {
	mu   sync.Mutex
	hdrs []http.Header // kept alive, so that no two maps share an address
}

func (r *headerRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.hdrs = append(r.hdrs, req.Header)
	r.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

func TestDoCopiesTheHeaderOnlyWhenARequestAddsToIt(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)
	tests := []struct {
		name      string
		headers   map[string]string
		req       Request
		wantShare bool
		wantType  string
	}{
		{"a JSON request shares the header", nil, Request{ContentType: ContentJSON}, true, ContentJSON},
		{"a text request shares the header", nil, Request{ContentType: ContentText}, true, ContentText},
		{"a configured Content-Type wins and is shared", map[string]string{"Content-Type": "application/x-ndjson"},
			Request{ContentType: ContentJSON}, true, "application/x-ndjson"},
		{"another content type copies it", nil, Request{ContentType: "application/xml"}, false, "application/xml"},
		{"a rendered header copies it", nil, Request{ContentType: ContentJSON, Header: [][2]string{{"X-Id", "1"}}}, false, ContentJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &headerRecorder{}
			c := newClient(t, Config{URL: srv.URL, Headers: tt.headers, Client: &http.Client{Transport: rec}})
			for range 3 {
				if _, _, err := c.Do(context.Background(), &tt.req); err != nil {
					t.Fatal(err)
				}
			}
			p := func(i int) uintptr { return reflect.ValueOf(rec.hdrs[i]).Pointer() }
			shared := p(0) == p(1) && p(1) == p(2)
			if shared != tt.wantShare {
				t.Errorf("requests shared one header map: %v, want %v", shared, tt.wantShare)
			}
			if got := rec.hdrs[2].Get("Content-Type"); got != tt.wantType {
				t.Errorf("Content-Type = %q, want %q", got, tt.wantType)
			}
		})
	}
}

func TestHostHeaderSetsTheRequestHost(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = r.Host }))
	t.Cleanup(srv.Close)
	c := newClient(t, Config{URL: srv.URL, Headers: map[string]string{"host": "api.internal"}})
	if _, _, err := c.Do(context.Background(), &Request{}); err != nil {
		t.Fatal(err)
	}
	if got != "api.internal" {
		t.Errorf("server saw host %q, want api.internal", got)
	}
}

func TestNewReportsEveryProblemWithoutHeaderValues(t *testing.T) {
	_, err := New(Config{URL: "ftp://x", Method: "GET X", Timeout: -1,
		Headers: map[string]string{"bad name": "v", "X-Key": "s3cr3t\n"}})
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{"scheme", "method", "timeout", `header name "bad name"`, `header "X-Key" has a value with control characters`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("error %q shows a header value", err)
	}
}

func TestDoReadsEveryAnswerWhole(t *testing.T) {
	big := strings.Repeat(`{"batchItemFailures":[]}`, 500)
	tests := []struct {
		name, answer string
		chunked      bool
		wantErr      bool
	}{
		{"an empty answer is empty, not nil", "", false, false},
		{"an answer of a known length is read whole", `{"batchItemFailures":[{"itemIdentifier":"m-1"}]}`, false, false},
		{"a long answer of a known length is read whole", big, false, false},
		{"a chunked answer is read whole", big, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.chunked {
					for i := 0; i < len(tt.answer); i += 1000 {
						_, _ = io.WriteString(w, tt.answer[i:min(i+1000, len(tt.answer))])
						w.(http.Flusher).Flush()
					}
					return
				}
				w.Header().Set("Content-Length", strconv.Itoa(len(tt.answer)))
				_, _ = io.WriteString(w, tt.answer)
			}))
			t.Cleanup(srv.Close)
			c := newClient(t, Config{URL: srv.URL})
			for range 2 { // the second reuses the connection
				_, answer, err := c.Do(context.Background(), &Request{ReadAnswer: true})
				if err != nil {
					t.Fatal(err)
				}
				if answer == nil || string(answer) != tt.answer {
					t.Fatalf("answer %q (nil: %v), want %q", snip(answer), answer == nil, snip([]byte(tt.answer)))
				}
			}
		})
	}
}

func TestDoFailsAnAnswerShorterThanAnnounced(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"batchItem")
		_ = buf.Flush()
		_ = conn.Close()
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, Config{URL: srv.URL})
	if _, answer, err := c.Do(context.Background(), &Request{ReadAnswer: true}); err == nil {
		t.Fatalf("a truncated answer was read as %q, want an error", answer)
	}
}

func snip(b []byte) string {
	if len(b) > 60 {
		return string(b[:60]) + "…"
	}
	return string(b)
}
