package h1

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/procs"
)

// countConns counts the connections a test server accepted.
func countConns(srv *httptest.Server) *atomic.Int32 {
	var n atomic.Int32
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			n.Add(1)
		}
	}
	return &n
}

func newServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	n := countConns(srv)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, n
}

func do(t *testing.T, tr http.RoundTripper, method, url string, body []byte) (int, string, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer of %s %s: %v", method, url, err)
	}
	return resp.StatusCode, string(b), resp.Header
}

// TestAnswersOfEveryShape sends requests whose answers have every framing
// HTTP/1.1 has, twice each, and checks that the body arrives whole and the
// connection is reused when the framing allows it.
func TestAnswersOfEveryShape(t *testing.T) {
	big := strings.Repeat("0123456789", 3000) // past the read buffer
	cases := []struct {
		name    string
		method  string
		handler http.HandlerFunc
		want    string
		status  int
		reuse   bool
	}{
		{"content length", "POST", func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Length", fmt.Sprint(len(b)+3))
			fmt.Fprintf(w, "ok:%s", b)
		}, "ok:hello", 200, true},
		{"chunked", "POST", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "part one,")
			w.(http.Flusher).Flush()
			io.WriteString(w, "part two")
		}, "part one,part two", 200, true},
		{"larger than the read buffer", "GET", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, big)
		}, big, 200, true},
		{"no content", "DELETE", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNoContent)
		}, "", 204, true},
		{"empty 200", "POST", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "0")
		}, "", 200, true},
		{"connection close", "POST", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Connection", "close")
			io.WriteString(w, "bye")
		}, "bye", 200, false},
		{"a failure status", "POST", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "no such thing", http.StatusNotFound)
		}, "no such thing\n", 404, true},
		{"early hints first", "GET", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Link", "</a.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			io.WriteString(w, "after the hints")
		}, "after the hints", 200, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, conns := newServer(t, tc.handler)
			tr := New(Options{})
			defer tr.CloseIdleConnections()
			var body []byte
			if tc.method == "POST" {
				body = []byte("hello")
			}
			for i := range 2 {
				status, got, _ := do(t, tr, tc.method, srv.URL+"/x", body)
				if status != tc.status || got != tc.want {
					t.Fatalf("request %d: got %d %.40q, want %d %.40q", i, status, got, tc.status, tc.want)
				}
			}
			want := int32(2)
			if tc.reuse {
				want = 1
			}
			if n := conns.Load(); n != want {
				t.Errorf("the server saw %d connections, want %d", n, want)
			}
		})
	}
}

// TestHeadAnswer checks that a HEAD answer's Content-Length is not read as
// a body.
func TestHeadAnswer(t *testing.T) {
	srv, conns := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1234")
	})
	tr := New(Options{})
	for range 2 {
		status, got, h := do(t, tr, "HEAD", srv.URL, nil)
		if status != 200 || got != "" || h.Get("Content-Length") != "1234" {
			t.Fatalf("got %d %q %v", status, got, h)
		}
	}
	if conns.Load() != 1 {
		t.Errorf("%d connections, want 1", conns.Load())
	}
}

// TestIdleConnectionClosedByTheServer: a server that closes idle
// keep-alive connections (Node's default is after 5 s) must not make the
// next request fail, POST included: the closed connection is found out
// before it is written to.
func TestIdleConnectionClosedByTheServer(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}))
	conns := countConns(srv)
	srv.Config.IdleTimeout = 20 * time.Millisecond
	srv.Start()
	defer srv.Close()
	tr := New(Options{})
	for i := range 3 {
		if _, got, _ := do(t, tr, "POST", srv.URL, []byte("payload")); got != "payload" {
			t.Fatalf("request %d: got %q", i, got)
		}
		time.Sleep(100 * time.Millisecond) // the server closes the idle connection
	}
	if conns.Load() != 3 {
		t.Errorf("%d connections, want 3 (one per request)", conns.Load())
	}
}

// rawServer serves each connection with handle, on a loopback port.
func rawServer(t testing.TB, handle func(c net.Conn, n int)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { defer c.Close(); handle(c, n) })
		}
	})
	return "http://" + ln.Addr().String()
}

// TestRetryOnAConnectionLostUnderTheRequest: the server answers the first
// request of each connection, then reads the second and closes without a
// word. An idempotent request, or one whose body can be made again and
// that carries an Idempotency-Key, is sent again on a new connection; a
// plain POST is not (it may have been acted on) and fails.
func TestRetryOnAConnectionLostUnderTheRequest(t *testing.T) {
	url := rawServer(t, func(c net.Conn, _ int) {
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		if req, err = http.ReadRequest(br); err == nil {
			io.Copy(io.Discard, req.Body)
		}
		// Closed with no answer to the second request.
	})
	cases := []struct {
		name   string
		method string
		header string
		ok     bool
	}{
		{"GET is sent again", "GET", "", true},
		{"POST with an idempotency key is sent again", "POST", "Idempotency-Key", true},
		{"a plain POST fails", "POST", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(Options{})
			defer tr.CloseIdleConnections()
			send := func() error {
				req, _ := http.NewRequest(tc.method, url, strings.NewReader("body"))
				if tc.header != "" {
					req.Header.Set(tc.header, "k1")
				}
				resp, err := tr.RoundTrip(req)
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				_, err = io.ReadAll(resp.Body)
				return err
			}
			if err := send(); err != nil {
				t.Fatalf("first request: %v", err)
			}
			err := send()
			if tc.ok && err != nil {
				t.Fatalf("second request: %v, want it sent again on a new connection", err)
			}
			if !tc.ok && err == nil {
				t.Fatal("second request succeeded, want its failure (it must not be sent twice)")
			}
		})
	}
}

// TestCancelWhileWaitingForTheAnswer: a long poll cancelled by its context
// returns at once with the context's error, and its connection is not
// reused.
func TestCancelWhileWaitingForTheAnswer(t *testing.T) {
	release := make(chan struct{})
	srv, conns := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		io.WriteString(w, "done")
	})
	defer close(release)
	tr := New(Options{})
	do(t, tr, "GET", srv.URL+"/fast", nil)
	for _, want := range []error{context.Canceled, context.DeadlineExceeded} {
		var ctx context.Context
		var cancel context.CancelFunc
		if want == context.Canceled {
			ctx, cancel = context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
		} else {
			ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
		}
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/slow", strings.NewReader("x"))
		start := time.Now()
		_, err := tr.RoundTrip(req)
		cancel()
		if !errors.Is(err, want) {
			t.Fatalf("got %v, want %v", err, want)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("the cancelled call took %v", d)
		}
	}
	do(t, tr, "GET", srv.URL+"/fast", nil)
	if n := conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3: the cancelled ones are not reused", n)
	}
}

// TestCancelWhileReadingTheBody: a context done while the body is read
// ends the read with the context's error.
func TestCancelWhileReadingTheBody(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first part")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	resp, err := New(Options{}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// TestCloseBeforeTheEnd: a body closed with a short rest unread keeps its
// connection (the rest is drained); one with a long rest drops it.
func TestCloseBeforeTheEnd(t *testing.T) {
	for _, tc := range []struct {
		size  int
		conns int32
	}{{1000, 1}, {maxDrain + 10000, 2}} {
		t.Run(fmt.Sprint(tc.size), func(t *testing.T) {
			srv, conns := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.Write(bytes.Repeat([]byte("a"), tc.size))
			})
			tr := New(Options{})
			for range 2 {
				req, _ := http.NewRequest("GET", srv.URL, nil)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				var b [10]byte
				io.ReadFull(resp.Body, b[:])
				resp.Body.Close()
			}
			if conns.Load() != tc.conns {
				t.Errorf("%d connections, want %d", conns.Load(), tc.conns)
			}
		})
	}
}

// TestTLS sends over https to a server with its own certificate.
func TestTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %v", r.Proto, r.TLS != nil)
	}))
	conns := countConns(srv)
	srv.StartTLS()
	defer srv.Close()
	tr := New(Options{TLSConfig: srv.Client().Transport.(*http.Transport).TLSClientConfig})
	for range 3 {
		if _, got, _ := do(t, tr, "GET", srv.URL, nil); got != "HTTP/1.1 true" {
			t.Fatalf("got %q", got)
		}
	}
	if conns.Load() != 1 {
		t.Errorf("%d connections, want 1", conns.Load())
	}
	// Every answer carries the connection's TLS state, as with net/http.
	req, _ := http.NewRequest("GET", srv.URL, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.TLS == nil || !resp.TLS.HandshakeComplete || len(resp.TLS.PeerCertificates) == 0 || resp.TLS.Version < tls.VersionTLS12 {
		t.Fatalf("the answer's TLS state is %+v, want the handshake's", resp.TLS)
	}
	// Without the server's certificate the handshake fails.
	req, _ = http.NewRequest("GET", srv.URL, nil)
	if _, err := New(Options{}).RoundTrip(req); err == nil || !strings.Contains(err.Error(), "TLS handshake") {
		t.Fatalf("got %v, want a TLS handshake error", err)
	}
}

// TestIdleLimitsAndClose: no more than MaxIdlePerHost connections stay
// idle; CloseIdleConnections closes them; IdleTimeout closes them too.
func TestIdleLimitsAndClose(t *testing.T) {
	hold := make(chan struct{})
	var arrived sync.WaitGroup
	srv, conns := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			arrived.Done()
			<-hold
		}
		io.WriteString(w, "x")
	})
	tr := New(Options{MaxIdlePerHost: 2, IdleTimeout: 200 * time.Millisecond})
	arrived.Add(5)
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() { do(t, tr, "GET", srv.URL+"/hold", nil) })
	}
	arrived.Wait()
	close(hold)
	wg.Wait()
	tr.mu.Lock()
	idle := tr.nIdle
	tr.mu.Unlock()
	if idle != 2 {
		t.Fatalf("%d idle connections, want 2", idle)
	}
	do(t, tr, "GET", srv.URL, nil)
	if conns.Load() != 5 {
		t.Fatalf("%d connections, want 5 (the 6th request reuses one)", conns.Load())
	}
	tr.CloseIdleConnections()
	do(t, tr, "GET", srv.URL, nil)
	if conns.Load() != 6 {
		t.Fatalf("%d connections, want 6 after CloseIdleConnections", conns.Load())
	}
	time.Sleep(1500 * time.Millisecond) // the sweep runs at IdleTimeout, then every second at least
	tr.mu.Lock()
	idle = tr.nIdle
	tr.mu.Unlock()
	if idle != 0 {
		t.Fatalf("%d idle connections after the idle timeout, want 0", idle)
	}
}

// TestConcurrentUse runs many requests at once over a small pool (go test
// -race checks the pool's locking).
func TestConcurrentUse(t *testing.T) {
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	})
	tr := New(Options{MaxIdlePerHost: 4})
	var wg sync.WaitGroup
	for g := range 20 {
		wg.Go(func() {
			for i := range 30 {
				msg := fmt.Sprintf("g%d-%d", g, i)
				if _, got, _ := do(t, tr, "POST", srv.URL, []byte(msg)); got != msg {
					t.Errorf("got %q, want %q", got, msg)
				}
			}
		})
	}
	wg.Wait()
}

// TestBadAnswers: what a broken server sends gives an error, never a hang
// or a panic.
func TestBadAnswers(t *testing.T) {
	for _, answer := range []string{
		"",
		"garbage\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
	} {
		t.Run(fmt.Sprintf("%.20q", answer), func(t *testing.T) {
			url := rawServer(t, func(c net.Conn, _ int) {
				if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
					io.WriteString(c, answer)
				}
			})
			req, _ := http.NewRequest("GET", url, nil)
			resp, err := New(Options{}).RoundTrip(req)
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			if err == nil {
				t.Fatal("no error")
			}
		})
	}
}

// TestProxyGoesToNetHTTP: with a proxy in the environment every request
// goes to the fallback.
func TestProxyGoesToNetHTTP(t *testing.T) {
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:1")
	var used atomic.Bool
	tr := New(Options{Fallback: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		used.Store(true)
		return nil, errors.New("fallback")
	})})
	req, _ := http.NewRequest("GET", "http://127.0.0.1:9/", nil)
	if _, err := tr.RoundTrip(req); err == nil || !used.Load() {
		t.Fatalf("got %v, used %v: want the fallback", err, used.Load())
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// BenchmarkRoundTrip compares a small POST round trip over this transport
// and over net/http's, against a server in the same process (the figures
// include the server's share), at GOMAXPROCS 1 (where `pipes run` sizes
// the scheduler at such loads) and 2. cpu-ns/op is the process's CPU per
// round trip. At 2 the client and the server hand the processors back and
// forth within one process, which costs h1 more than net/http (whose extra
// goroutines keep both busy); across processes, as pipes runs, h1 costs
// less (see bench's same-job figures).
func BenchmarkRoundTrip(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 2000)
	type transport struct {
		name string
		tr   func() http.RoundTripper
	}
	var cases []transport
	for _, p := range []int{1, 2} {
		cases = append(cases,
			transport{fmt.Sprintf("h1/procs=%d", p), func() http.RoundTripper { return New(Options{}) }},
			transport{fmt.Sprintf("net-http/procs=%d", p), func() http.RoundTripper { return &http.Transport{MaxIdleConnsPerHost: 100} }})
	}
	for _, tc := range cases {
		procsWanted := 1
		if strings.HasSuffix(tc.name, "=2") {
			procsWanted = 2
		}
		b.Run(tc.name, func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procsWanted))
			benchRoundTrips(b, tc.tr(), body)
		})
	}
}

// FuzzAnswer serves whatever bytes the fuzzer makes as the answer to one
// request: the transport returns an answer or an error, and never panics
// nor hangs past the request's deadline.
func FuzzAnswer(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nuntil the end",
		"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\nshort",
	} {
		f.Add([]byte(s))
	}
	answers := make(chan []byte, 1)
	url := rawServer(f, func(c net.Conn, _ int) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
			c.Write(<-answers)
		}
	})
	f.Fuzz(func(t *testing.T, answer []byte) {
		answers <- answer
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		req.Close = true // one connection per input: the server closes it
		resp, err := New(Options{}).RoundTrip(req)
		if err != nil {
			select {
			case <-answers: // not taken: no request reached the server
			default:
			}
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	})
}

// TestAnAnswerBeforeTheBodyWasRead: a server that answers 413 to a large
// body without reading it, then closes, breaks the write; its answer, not
// the broken write, is the outcome (as with net/http), so that the caller
// sees a client error rather than a connection failure.
func TestAnAnswerBeforeTheBodyWasRead(t *testing.T) {
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
	})
	tr := New(Options{})
	body := bytes.Repeat([]byte("x"), 10<<20)
	for i := range 3 {
		status, got, _ := do(t, tr, "POST", srv.URL, body)
		if status != http.StatusRequestEntityTooLarge || got != "too large\n" {
			t.Fatalf("request %d: got %d %q, want the server's 413", i, status, got)
		}
	}
	// The connection was dropped, not kept: the next request works.
	if status, _, _ := do(t, tr, "POST", srv.URL, []byte("small")); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("got %d after the early answers", status)
	}
}

// TestAnEndlessHeadIsRefused: a server that sends headers without end
// gets an error once the head passes 10 MB, as with net/http.
func TestAnEndlessHeadIsRefused(t *testing.T) {
	url := rawServer(t, func(c net.Conn, _ int) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\n")
		line := "X-Filler: " + strings.Repeat("y", 1000) + "\r\n"
		for range 12000 { // 12 MB of headers
			if _, err := io.WriteString(c, line); err != nil {
				return
			}
		}
	})
	req, _ := http.NewRequest("GET", url, nil)
	_, err := New(Options{}).RoundTrip(req)
	if !errors.Is(err, errHeadTooLarge) {
		t.Fatalf("got %v, want errHeadTooLarge", err)
	}
}

// TestReadsAfterTheEndGiveEOF: a body read to its end keeps answering
// io.EOF (its connection has gone back to the pool meanwhile).
func TestReadsAfterTheEndGiveEOF(t *testing.T) {
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "abc") })
	req, _ := http.NewRequest("GET", srv.URL, nil)
	resp, err := New(Options{}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "abc" {
		t.Fatalf("got %q, %v", b, err)
	}
	var p [4]byte
	for range 2 {
		if n, err := resp.Body.Read(p[:]); n != 0 || err != io.EOF {
			t.Fatalf("read after the end: %d, %v; want 0, io.EOF", n, err)
		}
	}
	if err := resp.Body.Close(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkRoundTripLargeBody is BenchmarkRoundTrip with a 64 KB body at
// GOMAXPROCS 1: a body over 16 KB is written on a goroutine of its own
// while the answer is read (see streamedBody), which costs a goroutine a
// request.
func BenchmarkRoundTripLargeBody(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 64<<10)
	for _, tc := range []struct {
		name string
		tr   func() http.RoundTripper
	}{
		{"h1", func() http.RoundTripper { return New(Options{}) }},
		{"net-http", func() http.RoundTripper { return &http.Transport{MaxIdleConnsPerHost: 100} }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			benchRoundTrips(b, tc.tr(), body)
		})
	}
}

// benchRoundTrips posts body through tr to a server of its own (the other
// transport's connections and goroutines are not in the figures), reading
// each answer to its end, and reports the process's CPU per round trip.
func benchRoundTrips(b *testing.B, tr http.RoundTripper, body []byte) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Length", "2")
		io.WriteString(w, "{}")
	}))
	defer srv.Close()
	defer tr.(interface{ CloseIdleConnections() }).CloseIdleConnections()
	b.ReportAllocs()
	cpu0, _ := procs.ProcessCPU()
	for b.Loop() {
		req, _ := http.NewRequest("POST", srv.URL, bytes.NewReader(body))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if cpu1, ok := procs.ProcessCPU(); ok {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	}
}
