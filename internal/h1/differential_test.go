package h1

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The differential suite: one adversarial server (a raw listener whose
// behaviour each case scripts), and the same requests through h1 and
// through a net/http Transport, which must end in the same outcome class
// (see outcome), and through h1 never in another request's answer. Every
// answer a script gives names the request it answers ("for /1"); the
// bytes a script sends unasked say "stale".

// advServer is the adversarial server: a listener, plain or TLS, whose
// every connection is served by a script.
type advServer struct {
	url    string
	roots  *x509.CertPool // the client's roots for TLS; nil for plain TCP
	stop   chan struct{}  // closed when the test ends: pauses end
	signal chan struct{}  // a script tells the client it did something
}

// advConn is one connection of an advServer, as its script sees it.
type advConn struct {
	net.Conn
	br  *bufio.Reader
	n   int // the connection's rank: 0 for the first accepted
	srv *advServer
}

// serverTLS is a certificate for 127.0.0.1 and the pool that trusts it
// (httptest's).
func serverTLS(t testing.TB) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	s := httptest.NewUnstartedServer(http.NotFoundHandler())
	s.StartTLS()
	defer s.Close()
	return s.TLS.Certificates[0], s.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
}

// newAdvServer starts a server whose connections are served by script;
// each is closed when script returns. It stops when the test ends.
func newAdvServer(t testing.TB, useTLS bool, script func(c *advConn)) *advServer {
	t.Helper()
	var ln net.Listener
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &advServer{url: "http://" + ln.Addr().String(), stop: make(chan struct{}), signal: make(chan struct{}, 16)}
	if useTLS {
		cert, roots := serverTLS(t)
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}})
		srv.url, srv.roots = "https://"+ln.Addr().String(), roots
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		ln.Close()
		close(srv.stop)
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				script(&advConn{Conn: c, br: bufio.NewReader(c), n: n, srv: srv})
			})
		}
	})
	return srv
}

// head reads the head of the next request, leaving its body unread.
func (c *advConn) head() (*http.Request, bool) {
	req, err := http.ReadRequest(c.br)
	return req, err == nil
}

// next reads the next request, body included.
func (c *advConn) next() (*http.Request, bool) {
	req, ok := c.head()
	if ok {
		_, err := io.Copy(io.Discard, req.Body)
		ok = err == nil
	}
	return req, ok
}

func (c *advConn) write(s string) bool {
	_, err := io.WriteString(c, s)
	return err == nil
}

// pause waits for d, or less when the test ends; it reports whether the
// test goes on.
func (c *advConn) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.srv.stop:
		return false
	}
}

// hold keeps the connection open, neither reading nor writing, until the
// test ends.
func (c *advConn) hold() { c.pause(time.Minute) }

// tell signals the client (see step.wait).
func (c *advConn) tell() { c.srv.signal <- struct{}{} }

// reset closes the connection with a TCP reset (no TLS alert before it).
func (c *advConn) reset() {
	nc := c.Conn
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	if tcp, ok := nc.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	nc.Close()
}

// serve answers every request the connection brings, each with its own
// answer.
func (c *advConn) serve() {
	for {
		req, ok := c.next()
		if !ok || !c.write(answerFor(req.URL.Path)) {
			return
		}
	}
}

// answer is an HTTP/1.1 answer with a Content-Length; headers end with
// "\r\n" each.
func answer(status int, headers, body string) string {
	return fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Length: %d\r\n%s\r\n%s", status, http.StatusText(status), len(body), headers, body)
}

// answerFor is the well-formed answer to the request for path.
func answerFor(path string) string { return answer(http.StatusOK, "", "for "+path) }

// stale is an answer nobody asked for, as a confused server or proxy sends
// after the one asked for.
func stale() string { return answer(http.StatusOK, "", `stale {"batchItemFailures":[]}`) }

// outcome is what a request came to, by class: "answer" (Status, with the
// Body read and BodyErr, the class of the error that ended it early, and
// the trailer X-Trailer), "timeout", "conn" (the connection failed: EOF,
// reset, closed) or "protocol" (the answer broke HTTP's rules).
type outcome struct {
	Class   string
	Status  int
	Body    string
	BodyErr string
	Trailer string
}

func (o outcome) String() string {
	if o.Class != "answer" {
		return o.Class
	}
	s := fmt.Sprintf("%d %q", o.Status, o.Body)
	if o.BodyErr != "" {
		s += " then " + o.BodyErr
	}
	if o.Trailer != "" {
		s += " trailer " + o.Trailer
	}
	return s
}

// same reports whether a and b are of one class (a body cut short by an
// error is compared by that error's class only).
func same(a, b outcome) bool {
	if a.BodyErr != "" || b.BodyErr != "" {
		a.Body, b.Body = "", ""
	}
	return a == b
}

// foreign reports whether o is another request's answer (path's is
// "for "+path), or bytes sent unasked.
func (o outcome) foreign(path string) bool {
	return strings.Contains(o.Body, "stale") || (strings.HasPrefix(o.Body, "for ") && o.Body != "for "+path)
}

// classify is the class of a request's error.
func classify(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed):
		return "conn"
	case err.Error() == "http: server closed idle connection": // net/http's, unexported
		return "conn"
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return "conn"
	}
	return "protocol"
}

// step is one request of a case.
type step struct {
	method string
	path   string
	body   int           // bytes of body (POST)
	wait   bool          // wait for the script's signal first, then 50 ms
	limit  time.Duration // the request's deadline; 0: 300 ms
	// racy: net/http may fail with a connection error instead of the
	// answer (its write's error and its answer race when the server
	// answers and closes at once); h1 must give the answer.
	racy bool
}

// send makes s's request over rt and reads its answer.
func (s step) send(t testing.TB, rt http.RoundTripper, srv *advServer, scale time.Duration) outcome {
	t.Helper()
	if s.wait {
		select {
		case <-srv.signal:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the server sent no signal", s.path)
		}
		// Time for net/http's reader to see what came meanwhile.
		time.Sleep(50 * time.Millisecond)
	}
	limit := s.limit
	if limit == 0 {
		limit = 300 * time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit*scale)
	defer cancel()
	var rd io.Reader
	if s.body > 0 {
		rd = bytes.NewReader(bytes.Repeat([]byte("b"), s.body))
	}
	method := s.method
	if method == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequestWithContext(ctx, method, srv.url+s.path, rd)
	if err != nil {
		t.Fatal(err)
	}
	return exchange(rt, req)
}

// exchange sends req over rt and reads the answer to its end.
func exchange(rt http.RoundTripper, req *http.Request) outcome {
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return outcome{Class: classify(err)}
	}
	defer resp.Body.Close()
	o := outcome{Class: "answer", Status: resp.StatusCode}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return o // its body is the connection, never at its end
	}
	b, err := io.ReadAll(resp.Body)
	o.Body = string(b)
	if err != nil {
		o.BodyErr = classify(err)
	}
	o.Trailer = resp.Trailer.Get("X-Trailer")
	return o
}

// transports are the two under comparison: h1, and net/http's as pipes
// would use it, without compression (h1 never asks for it).
func transports(roots *x509.CertPool) (h1, std http.RoundTripper) {
	cfg := &tls.Config{RootCAs: roots}
	return New(Options{TLSConfig: cfg}),
		&http.Transport{TLSClientConfig: cfg.Clone(), DisableCompression: true, MaxIdleConnsPerHost: 100}
}

// diffCase is a script and the requests sent to it.
type diffCase struct {
	name   string
	script func(c *advConn)
	steps  []step
}

// onFirst runs first on the first connection and serve on the others.
func onFirst(first func(c *advConn)) func(c *advConn) {
	return func(c *advConn) {
		if c.n == 0 {
			first(c)
			return
		}
		c.serve()
	}
}

func diffCases() []diffCase {
	get := func(path string) step { return step{path: path} }
	post := func(path string, n int) step { return step{method: http.MethodPost, path: path, body: n} }
	waited := func(s step) step { s.wait = true; return s }
	big := 4 << 20
	filler := "X-Filler: " + strings.Repeat("y", 1000) + "\r\n"
	return []diffCase{
		{"unsolicited bytes on an idle connection", onFirst(func(c *advConn) {
			req, ok := c.next()
			if !ok || !c.write(answerFor(req.URL.Path)) || !c.pause(20*time.Millisecond) || !c.write(stale()) {
				return
			}
			c.tell()
			c.serve()
		}), []step{post("/1", 10), waited(post("/2", 10))}},
		{"a stale answer in its own write right behind the answer", onFirst(func(c *advConn) {
			req, ok := c.next()
			if !ok || !c.write(answerFor(req.URL.Path)) || !c.write(stale()) {
				return
			}
			c.tell()
			c.serve()
		}), []step{get("/1"), waited(get("/2"))}},
		{"a pipelined extra answer in the same write", onFirst(func(c *advConn) {
			req, ok := c.next()
			if !ok || !c.write(answerFor(req.URL.Path)+stale()) {
				return
			}
			c.tell()
			c.serve()
		}), []step{get("/1"), waited(get("/2"))}},
		{"an early 413 to a large body, the connection left open", onFirst(func(c *advConn) {
			if req, ok := c.head(); ok && c.write(answer(413, "", "for "+req.URL.Path)) {
				c.hold()
			}
		}), []step{{method: http.MethodPost, path: "/1", body: big, limit: 2 * time.Second}, post("/2", 10)}},
		{"an early 401 to a small body, the connection left open", onFirst(func(c *advConn) {
			if req, ok := c.head(); ok && c.write(answer(401, "", "for "+req.URL.Path)) {
				c.hold()
			}
		}), []step{post("/1", 1000), post("/2", 10)}},
		{"an early 413 to a large body, then a close", onFirst(func(c *advConn) {
			if req, ok := c.head(); ok {
				c.write(answer(413, "Connection: close\r\n", "for "+req.URL.Path))
			}
		}), []step{{method: http.MethodPost, path: "/1", body: big, limit: 2 * time.Second, racy: true}, post("/2", 10)}},
		{"a close mid-body", onFirst(func(c *advConn) {
			if req, ok := c.next(); ok {
				c.write("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nfor " + req.URL.Path)
			}
		}), []step{get("/1"), get("/2")}},
		{"a Content-Length too short", onFirst(func(c *advConn) {
			req, ok := c.next()
			if !ok {
				return
			}
			body := "for " + req.URL.Path
			if !c.write(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s, and more bytes than it said", len(body), body)) {
				return
			}
			c.tell()
			c.serve()
		}), []step{get("/1"), waited(get("/2"))}},
		{"a Content-Length too long, the connection left open", onFirst(func(c *advConn) {
			if req, ok := c.next(); ok && c.write("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nfor "+req.URL.Path) {
				c.hold()
			}
		}), []step{get("/1"), get("/2")}},
		{"chunked answers with trailers", func(c *advConn) {
			for {
				req, ok := c.next()
				if !ok {
					return
				}
				body := "for " + req.URL.Path
				if !c.write(fmt.Sprintf("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Trailer\r\n\r\n3\r\n%s\r\n%x\r\n%s\r\n0\r\nX-Trailer: t%s\r\n\r\n", body[:3], len(body)-3, body[3:], req.URL.Path)) {
					return
				}
			}
		}, []step{get("/1"), get("/2"), post("/3", 100)}},
		{"a storm of 1xx answers", func(c *advConn) {
			for {
				req, ok := c.next()
				if !ok || !c.write(strings.Repeat("HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n", 200)+"HTTP/1.1 100 Continue\r\n\r\n"+answerFor(req.URL.Path)) {
					return
				}
			}
		}, []step{get("/1"), post("/2", 10)}},
		{"1xx answers past the head cap", onFirst(func(c *advConn) {
			if _, ok := c.next(); !ok {
				return
			}
			one := "HTTP/1.1 103 Early Hints\r\n" + strings.Repeat(filler, 100) + "\r\n"
			for range 12 << 20 / len(one) {
				if !c.write(one) {
					return
				}
			}
		}), []step{{path: "/1", limit: 10 * time.Second}, get("/2")}},
		{"an HTTP/1.0 answer read to the close", func(c *advConn) {
			if req, ok := c.next(); ok {
				c.write("HTTP/1.0 200 OK\r\n\r\nfor " + req.URL.Path)
			}
		}, []step{get("/1"), post("/2", 10)}},
		{"an HTTP/1.0 keep-alive answer", func(c *advConn) {
			for {
				req, ok := c.next()
				if !ok || !c.write(strings.Replace(answerFor(req.URL.Path), "HTTP/1.1 200 OK\r\n", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n", 1)) {
					return
				}
			}
		}, []step{get("/1"), get("/2")}},
		{"Connection: close, the connection left open", onFirst(func(c *advConn) {
			req, ok := c.next()
			if !ok || !c.write(answer(200, "Connection: close\r\n", "for "+req.URL.Path)) || !c.pause(20*time.Millisecond) || !c.write(stale()) {
				return
			}
			c.tell()
			c.hold()
		}), []step{get("/1"), waited(get("/2"))}},
		{"a slow-loris answer head", onFirst(func(c *advConn) {
			req, ok := c.next()
			if !ok {
				return
			}
			for _, b := range []byte(answerFor(req.URL.Path)) {
				if !c.write(string(b)) || !c.pause(30*time.Millisecond) {
					return
				}
			}
		}), []step{get("/1"), get("/2")}},
		{"an answer head bigger than the cap", onFirst(func(c *advConn) {
			if _, ok := c.next(); !ok || !c.write("HTTP/1.1 200 OK\r\n") {
				return
			}
			for range 11 << 20 / len(filler) {
				if !c.write(filler) {
					return
				}
			}
			c.write("Content-Length: 0\r\n\r\n")
		}), []step{{path: "/1", limit: 10 * time.Second}, get("/2")}},
		{"a reset after the request was written", onFirst(func(c *advConn) {
			if _, ok := c.next(); ok {
				c.reset()
			}
		}), []step{post("/1", 10), post("/2", 10)}},
		{"a reset on a reused connection, idempotent", onFirst(func(c *advConn) {
			if req, ok := c.next(); !ok || !c.write(answerFor(req.URL.Path)) {
				return
			}
			if _, ok := c.next(); ok {
				c.reset()
			}
		}), []step{get("/1"), get("/2")}},
		{"a reset on a reused connection, not idempotent", onFirst(func(c *advConn) {
			if req, ok := c.next(); !ok || !c.write(answerFor(req.URL.Path)) {
				return
			}
			if _, ok := c.next(); ok {
				c.reset()
			}
		}), []step{post("/1", 10), post("/2", 10), post("/3", 10)}},
		{"the server closes an idle connection", onFirst(func(c *advConn) {
			if req, ok := c.next(); ok && c.write(answerFor(req.URL.Path)) && c.pause(10*time.Millisecond) {
				c.Close()
				c.tell()
			}
		}), []step{post("/1", 10), waited(post("/2", 10))}},
		{"a body on a 204", onFirst(func(c *advConn) {
			if _, ok := c.next(); ok && c.write("HTTP/1.1 204 No Content\r\n\r\nstale bytes") {
				c.tell()
				c.serve()
			}
		}), []step{get("/1"), waited(get("/2"))}},
		{"a body on an answer to HEAD", onFirst(func(c *advConn) {
			if req, ok := c.next(); ok && c.write(answerFor(req.URL.Path)+"for "+req.URL.Path) {
				c.tell()
				c.serve()
			}
		}), []step{{method: http.MethodHead, path: "/1"}, waited(get("/2"))}},
	}
}

// run sends the case's requests over both transports, each to a server
// of its own, and returns their outcomes.
func (dc diffCase) run(t testing.TB, useTLS bool, scale time.Duration) (h1Got, stdGot []outcome) {
	for i := range 2 {
		srv := newAdvServer(t, useTLS, dc.script)
		h1, std := transports(srv.roots)
		rt := []http.RoundTripper{h1, std}[i]
		var got []outcome
		for _, s := range dc.steps {
			got = append(got, s.send(t, rt, srv, scale))
		}
		rt.(interface{ CloseIdleConnections() }).CloseIdleConnections()
		if i == 0 {
			h1Got = got
		} else {
			stdGot = got
		}
	}
	return h1Got, stdGot
}

// compare checks the outcomes of one run: h1 never reads another
// request's answer, and gives net/http's outcome class. When final is
// false it reports a difference of class instead of failing on it: the
// caller runs the case again (a loaded machine may have slowed a run past
// a deadline, and net/http races with itself where a server answers and
// closes at once: its write's error may win over the answer).
func compare(t testing.TB, steps []step, h1Got, stdGot []outcome, final bool) (differ bool) {
	t.Helper()
	for i, s := range steps {
		h, n := h1Got[i], stdGot[i]
		if h.foreign(s.path) {
			t.Errorf("%s %s: h1 read another request's answer: %v", s.method, s.path, h)
			continue
		}
		if n.foreign(s.path) {
			// net/http's own race: its reader had not looked at the
			// idle connection yet when the next request took it.
			t.Logf("%s %s: net/http read another request's answer (%v); not compared", s.method, s.path, n)
			continue
		}
		if same(h, n) {
			continue
		}
		if s.racy && n.Class == "conn" && h.Class == "answer" {
			t.Logf("%s %s: net/http lost its race (%v); h1 got %v", s.method, s.path, n, h)
			continue
		}
		if !final {
			return true
		}
		t.Errorf("%s %s: h1 got %v, net/http %v", s.method, s.path, h, n)
	}
	return false
}

// runCompared runs dc until the two transports agree, three times at
// most (the later runs with deadlines three times as long), and fails the
// test when they never did.
func runCompared(t testing.TB, dc diffCase, useTLS bool) {
	t.Helper()
	for attempt := range 3 {
		scale := time.Duration(1)
		if attempt > 0 {
			scale = 3
		}
		h1Got, stdGot := dc.run(t, useTLS, scale)
		if !compare(t, dc.steps, h1Got, stdGot, attempt == 2) {
			t.Logf("h1 %v; net/http %v", h1Got, stdGot)
			return
		}
		t.Logf("run %d: outcomes differ (h1 %v, net/http %v): again", attempt+1, h1Got, stdGot)
	}
}

// TestDifferential: every case over plain TCP and over TLS.
func TestDifferential(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		for _, dc := range diffCases() {
			name := "tcp/" + dc.name
			if useTLS {
				name = "tls/" + dc.name
			}
			t.Run(name, func(t *testing.T) { runCompared(t, dc, useTLS) })
		}
	}
}

// fuzzPlan is how the fuzz server answers "/1": the answer's bytes, how
// they are written and what the server does after.
type fuzzPlan struct {
	answer []byte
	split  bool // written in two halves 5 ms apart
	after  byte // 0: serves on; 1: closes; 2: resets; 3: holds the connection
}

// FuzzDifferential serves an answer made from the fuzzer's bytes to
// "/1" (the first byte chooses how it is written, what the server does
// after it, TLS or not, GET or POST), then a well-formed one to "/2", over
// h1 and over net/http: both end each request in the same outcome class,
// and h1's "/2" is its own answer or an error, never bytes meant for "/1".
// Every request has a deadline, so no input hangs.
func FuzzDifferential(f *testing.F) {
	for _, s := range []string{
		"\x00HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"\x00HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale",
		"\x10HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale",
		// Two answers of one length: the second, stale, comes 5 ms after the
		// first, when the connection is idle.
		"\x10HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirstHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale",
		"\x14HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirstHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale",
		"\x04HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok, and more",
		"\x00HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Trailer\r\n\r\n2\r\nok\r\n0\r\nX-Trailer: t\r\n\r\n",
		"\x00HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
		"\x01HTTP/1.0 200 OK\r\n\r\nuntil the end",
		"\x01HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\nshort",
		"\x03HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\nshort",
		"\x0bHTTP/1.1 413 Request Entity Too Large\r\nContent-Length: 3\r\n\r\nbig",
		"\x02",
		"\x00HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
		"\x06HTTP/1.1 204 No Content\r\n\r\nbody on a 204",
		"\x00garbage\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	var (
		mu   sync.Mutex
		plan fuzzPlan
	)
	script := func(c *advConn) {
		for {
			req, ok := c.next()
			if !ok {
				return
			}
			if req.URL.Path != "/1" {
				if !c.write(answerFor(req.URL.Path)) {
					return
				}
				continue
			}
			mu.Lock()
			p := plan
			mu.Unlock()
			half := len(p.answer) / 2
			if p.split && half > 0 {
				if !c.write(string(p.answer[:half])) || !c.pause(5*time.Millisecond) {
					return
				}
				p.answer = p.answer[half:]
			}
			if !c.write(string(p.answer)) {
				return
			}
			switch p.after {
			case 1:
				return
			case 2:
				c.reset()
				return
			case 3:
				c.pause(2 * time.Second)
				return
			}
		}
	}
	servers := []*advServer{newAdvServer(f, false, script), newAdvServer(f, true, script)}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		flags := in[0]
		mu.Lock()
		plan = fuzzPlan{answer: in[1:], after: flags & 3, split: flags&0x10 != 0}
		mu.Unlock()
		srv := servers[flags>>2&1]
		first := step{path: "/1"}
		if flags&8 != 0 {
			first = step{method: http.MethodPost, path: "/1", body: 10}
		}
		steps := []step{first, {path: "/2"}}
		run := func(scale time.Duration) (h1Got, stdGot []outcome) {
			h1, std := transports(srv.roots)
			for i, rt := range []http.RoundTripper{h1, std} {
				var got []outcome
				for j, s := range steps {
					if j > 0 {
						time.Sleep(10 * time.Millisecond) // for net/http's reader to see what came
					}
					got = append(got, s.send(t, rt, srv, scale))
				}
				rt.(interface{ CloseIdleConnections() }).CloseIdleConnections()
				if i == 0 {
					h1Got = got
				} else {
					stdGot = got
				}
			}
			return h1Got, stdGot
		}
		for attempt := range 3 {
			scale := time.Duration(1)
			if attempt > 0 {
				scale = 3
			}
			h1Got, stdGot := run(scale)
			if h := h1Got[1]; h.Class == "answer" && (h.Status != http.StatusOK || h.Body != "for /2") {
				t.Fatalf("h1 read another answer for /2: %v (net/http: %v)", h, stdGot[1])
			}
			if n := stdGot[1]; n.Class == "answer" && n.Body != "for /2" {
				t.Logf("net/http read another answer for /2 (%v): its own race; only /1 compared", n)
				stdGot[1] = h1Got[1]
			}
			differ := false
			for i := range steps {
				differ = differ || !same(h1Got[i], stdGot[i])
			}
			if !differ {
				return
			}
			if attempt == 2 {
				t.Fatalf("h1 got %v, net/http %v", h1Got, stdGot)
			}
		}
	})
}
