// Package h1 is a lean HTTP/1.1 client transport for pipes' hot calls (the
// SQS source's receives and deletes, the HTTP target's and enrichment's
// requests): each request is written, and its answer read, on the caller's
// goroutine, over a pool of keep-alive connections per host.
//
// net/http's Transport runs two goroutines per connection and hands every
// request and every answer between them and the caller: three goroutine
// wake-ups a round trip, each of which may wake an idle OS thread that
// spins looking for work and sleeps again. At a few thousand messages a
// second that scheduling is a large part of a runner's CPU. Here a round
// trip wakes the caller once, when its answer arrives.
//
// It speaks HTTP/1.1 over TCP or TLS and nothing more. These go to a
// net/http Transport (Fallback) instead: requests through a proxy
// (HTTP_PROXY and friends), of another scheme, with "Expect: 100-continue"
// or asking to switch protocols (Upgrade), and every request on a system
// without a non-blocking peek at a socket (not unix), where bytes a server
// sent unasked could not be seen. Answers are not decompressed on the fly
// (no Accept-Encoding is added).
//
// What net/http guarantees, this keeps, and a differential test (the
// same requests through both against an adversarial server, and a fuzz
// target) holds it to: the same outcome (status and body, or an error of
// the same kind: a timeout, a failed connection, a broken answer), and
// never another request's answer. So:
//   - A connection is reused only when nothing was left unread: no byte in
//     its read buffer or in the TLS layer's when its answer ends, nothing
//     in the socket (a peek) when it is taken again. A server that wrote
//     more than it was asked for (a wrong Content-Length, a body on a 204 or
//     to a HEAD, a second answer) or closed it loses it, as net/http drops
//     "unsolicited" bytes on an idle connection.
//   - A large body (over 16 KB, or of unknown length) is written while the
//     answer is read, so that an answer the server sends before it read the
//     body (a 413, a 401) is the outcome even when the server then neither
//     reads nor closes; a small one is written, then its answer read, on the
//     caller's goroutine alone.
//   - The head of an answer is bounded as net/http bounds it (10 MB, 1xx
//     answers included); 1xx answers are skipped, a 101 is returned with
//     the rest of the connection as its body.
//   - A request that fails on a reused connection before any byte of an
//     answer arrived is sent again on a new one when that is safe (see
//     RoundTrip).
//
// The differences left are of timing, never of outcome: net/http's reader
// watches an idle connection all the time, this one looks when it is
// taken, so bytes that arrive between that look and the request's write
// are read as the answer by both (no HTTP/1.1 client can tell them apart).
package h1

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Options configure a Transport. Zero values take the defaults given.
type Options struct {
	// TLSConfig is used for https (cloned per connection, ServerName set
	// from the URL when empty); nil: Go's defaults with TLS 1.2 at least.
	TLSConfig *tls.Config
	// ReadBufferSize is each connection's read buffer; default 4096. A
	// larger answer is read in more system calls, never refused.
	ReadBufferSize int
	// MaxIdlePerHost is how many idle keep-alive connections are kept per
	// host; default 100. SetMaxIdlePerHost changes it later.
	MaxIdlePerHost int
	// IdleTimeout closes a connection idle for that long; default 90 s.
	IdleTimeout time.Duration
	// DialTimeout bounds a TCP connect; default 30 s.
	DialTimeout time.Duration
	// TLSHandshakeTimeout bounds a TLS handshake; default 10 s.
	TLSHandshakeTimeout time.Duration
	// Fallback sends what this transport does not (see the package
	// comment); nil: a clone of http.DefaultTransport with TLSConfig.
	Fallback http.RoundTripper
}

// Transport is an http.RoundTripper for HTTP/1.1 (see the package comment).
// It is safe for concurrent use. The zero value is not usable: use New.
type Transport struct {
	dialer      net.Dialer
	tls         *tls.Config
	readBuf     int
	idleTimeout time.Duration
	handshake   time.Duration
	maxIdle     atomic.Int64
	viaProxy    bool // a proxy is configured in the environment: everything goes to fallback

	fallback http.RoundTripper

	// writers hold *bufio.Writer of 4 KB, bigWriters of 64 KB (for bodies
	// over 3 KB), only while a request is written: a request up to 64 KB
	// leaves in one write system call.
	writers, bigWriters sync.Pool
	readers             sync.Pool // *bufio.Reader of readBuf bytes, held only while a request is under way

	mu     sync.Mutex
	idle   map[string][]*conn // by scheme://host:port, most recently used last
	nIdle  int
	sweep  *time.Timer // closes expired idle connections; armed while any are idle
	closed bool        // CloseIdleConnections ran: nothing is kept idle until the next request
}

// New returns a Transport with o.
func New(o Options) *Transport {
	t := &Transport{
		tls:         o.TLSConfig,
		readBuf:     o.ReadBufferSize,
		idleTimeout: o.IdleTimeout,
		handshake:   o.TLSHandshakeTimeout,
		fallback:    o.Fallback,
		idle:        map[string][]*conn{},
	}
	if t.tls == nil {
		t.tls = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if t.readBuf <= 0 {
		t.readBuf = 4096
	}
	if t.idleTimeout <= 0 {
		t.idleTimeout = 90 * time.Second
	}
	if t.handshake <= 0 {
		t.handshake = 10 * time.Second
	}
	t.dialer = net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second}
	if t.dialer.Timeout <= 0 {
		t.dialer.Timeout = 30 * time.Second
	}
	t.SetMaxIdlePerHost(o.MaxIdlePerHost)
	t.viaProxy = ProxyConfigured()
	if t.fallback == nil {
		// A clone opens nothing until it is used.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = t.tls.Clone()
		tr.MaxIdleConnsPerHost = int(t.maxIdle.Load())
		t.fallback = tr
	}
	return t
}

// ProxyConfigured reports whether the environment names an HTTP proxy
// (HTTP_PROXY, HTTPS_PROXY, in either case), which this transport leaves to
// net/http.
func ProxyConfigured() bool {
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		if os.Getenv(k) != "" {
			return true
		}
	}
	return false
}

// SetMaxIdlePerHost sets how many idle connections are kept per host (n ≤
// 0: the default, 100); those beyond it are closed as they come back. It is
// safe for concurrent use.
func (t *Transport) SetMaxIdlePerHost(n int) {
	if n <= 0 {
		n = 100
	}
	t.maxIdle.Store(int64(n))
}

// CloseIdleConnections closes the connections not in use. Those in use
// are closed as their requests end, unless a new request came meanwhile
// (the pool is in use again).
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	var all []*conn
	for k, list := range t.idle {
		all = append(all, list...)
		delete(t.idle, k)
	}
	t.nIdle = 0
	if t.sweep != nil {
		t.sweep.Stop()
		t.sweep = nil
	}
	t.mu.Unlock()
	for _, c := range all {
		c.close()
	}
	if f, ok := t.fallback.(interface{ CloseIdleConnections() }); ok {
		f.CloseIdleConnections()
	}
}

// RoundTrip sends req and returns its answer; the answer's body must be
// read to its end or closed, which gives the connection back. It always
// closes req.Body. When ctx (req.Context) is done, the call returns
// ctx.Err() and the connection is dropped.
//
// A request that fails on a reused connection before any byte of an answer
// arrived is sent once more on a new connection when nothing of it was
// written, or when it is replayable (no body, or GetBody set) and either
// idempotent by its method (GET, HEAD, OPTIONS, TRACE) or carrying an
// Idempotency-Key header: net/http's rule.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		closeBody(req)
		return nil, errors.New("h1: the request has no URL")
	}
	if !peekable || t.viaProxy || (req.URL.Scheme != "http" && req.URL.Scheme != "https") || hasExpect(req.Header) || upgrades(req.Header) {
		return t.fallback.RoundTrip(req)
	}
	if req.URL.Host == "" {
		closeBody(req)
		return nil, errors.New("h1: the request's URL has no host")
	}
	ctx := req.Context()
	key, addr := hostKey(req.URL)
	for attempt := 0; ; attempt++ {
		c, reused, err := t.getConn(ctx, key, addr, req.URL)
		if err != nil {
			closeBody(req)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
		resp, err := c.roundTrip(req)
		if err == nil {
			return resp, nil
		}
		if attempt > 0 || !reused || c.read > 0 || ctx.Err() != nil || !retryable(req, c.written == 0) {
			return nil, err
		}
		next, rerr := rewound(req)
		if rerr != nil {
			return nil, err
		}
		req = next
	}
}

// hasExpect reports whether h asks for 100-continue, which this transport
// does not wait for.
func hasExpect(h http.Header) bool {
	_, ok := h["Expect"]
	return ok
}

// upgrades reports whether h asks to switch protocols (Upgrade), which
// this transport does not do.
func upgrades(h http.Header) bool {
	_, ok := h["Upgrade"]
	return ok
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// retryable is net/http's rule for sending a request again after its
// connection failed under it.
func retryable(req *http.Request, nothingWritten bool) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	if nothingWritten {
		return true
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, a := req.Header["Idempotency-Key"]
	_, b := req.Header["X-Idempotency-Key"]
	return a || b
}

// rewound is a shallow copy of req with a new body from GetBody.
func rewound(req *http.Request) (*http.Request, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return req, nil
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	r := new(http.Request)
	*r = *req
	r.Body = body
	return r, nil
}

// hostKey is the pool key (scheme://host:port) and the address to dial.
func hostKey(u *url.URL) (key, addr string) {
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	addr = net.JoinHostPort(host, port)
	return u.Scheme + "://" + addr, addr
}

// getConn takes the most recently used idle connection to key that is
// still open, or dials a new one; reused tells which.
func (t *Transport) getConn(ctx context.Context, key, addr string, u *url.URL) (c *conn, reused bool, err error) {
	now := time.Now()
	for {
		c = t.popIdle(key)
		if c == nil {
			break
		}
		if now.Sub(c.idleAt) < t.idleTimeout && c.alive() {
			return c, true, nil
		}
		c.close()
	}
	c, err = t.dial(ctx, key, addr, u)
	return c, false, err
}

func (t *Transport) popIdle(key string) *conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = false
	list := t.idle[key]
	if len(list) == 0 {
		return nil
	}
	c := list[len(list)-1]
	list[len(list)-1] = nil
	t.idle[key] = list[:len(list)-1]
	t.nIdle--
	return c
}

// putIdle keeps c for the next request to its host, or closes it when the
// host has MaxIdlePerHost idle already or the server sent more than the
// answer: any byte left in the read buffer, or in the TLS layer's (see
// tlsQuiet), would be read as the next request's answer. An idle
// connection holds no read buffer.
func (t *Transport) putIdle(c *conn) {
	if c.br != nil {
		if c.br.Buffered() > 0 {
			c.close()
			return
		}
		c.br.Reset(nil)
		t.readers.Put(c.br)
		c.br = nil
	}
	if c.tc != nil && !c.tlsQuiet() {
		c.close()
		return
	}
	c.idleAt = time.Now()
	t.mu.Lock()
	list := t.idle[c.key]
	if t.closed || int64(len(list)) >= t.maxIdle.Load() {
		t.mu.Unlock()
		c.close()
		return
	}
	t.idle[c.key] = append(list, c)
	t.nIdle++
	if t.sweep == nil {
		t.sweep = time.AfterFunc(t.idleTimeout, t.sweepIdle)
	}
	t.mu.Unlock()
}

// sweepIdle closes the connections idle for IdleTimeout and arms itself
// again while some stay idle.
func (t *Transport) sweepIdle() {
	now := time.Now()
	var expired []*conn
	t.mu.Lock()
	next := t.idleTimeout
	for k, list := range t.idle {
		kept := list[:0]
		for _, c := range list {
			if left := t.idleTimeout - now.Sub(c.idleAt); left <= 0 {
				expired = append(expired, c)
			} else {
				kept = append(kept, c)
				next = min(next, left)
			}
		}
		clear(list[len(kept):])
		if len(kept) == 0 {
			delete(t.idle, k)
		} else {
			t.idle[k] = kept
		}
	}
	t.nIdle -= len(expired)
	t.sweep = nil
	if t.nIdle > 0 {
		t.sweep = time.AfterFunc(max(next, time.Second), t.sweepIdle)
	}
	t.mu.Unlock()
	for _, c := range expired {
		c.close()
	}
}

// dial opens a connection to addr (TLS for https).
func (t *Transport) dial(ctx context.Context, key, addr string, u *url.URL) (*conn, error) {
	nc, err := t.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	raw := rawConnOf(nc)
	c := &conn{t: t, key: key, raw: raw}
	if u.Scheme == "https" {
		cfg := t.tls.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = u.Hostname()
		}
		cfg.NextProtos = []string{"http/1.1"}
		c.rec = &recordTracker{Conn: nc}
		tc := tls.Client(c.rec, cfg)
		hctx, cancel := context.WithTimeout(ctx, t.handshake)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			_ = nc.Close()
			return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
		}
		cs := tc.ConnectionState()
		c.state, c.tc, nc = &cs, tc, tc
	}
	c.nc = nc
	return c, nil
}

// rawConnOf is the socket under nc, for the liveness check; nil when it
// has none.
func rawConnOf(nc net.Conn) syscall.RawConn {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return raw
}

// conn is one keep-alive connection. It is used by one request at a time.
type conn struct {
	t   *Transport
	key string
	nc  net.Conn
	raw syscall.RawConn
	// tc, rec and state are set for TLS: the TLS connection (nc), the
	// socket under it as it sees it, and the handshake's outcome (every
	// answer's TLS).
	tc    *tls.Conn
	rec   *recordTracker
	state *tls.ConnectionState
	br    *bufio.Reader // while a request is under way; nil when idle
	// wrote is set while a request's body is written on a goroutine of its
	// own (see roundTrip): it gets the write's outcome.
	wrote  chan error
	idleAt time.Time
	// read and written count the bytes of the request under way, for the
	// retry rule.
	read, written int64
	// head is set while an answer's head is read: it may not pass
	// maxHeadBytes (net/http's MaxResponseHeaderBytes default), 1xx heads
	// before it included, as net/http counts.
	head      bool
	closeOnce sync.Once
	aliveCheck
}

// maxHeadBytes bounds the bytes read from the connection while the head
// of an answer (status line and headers, 1xx answers before it included)
// is read: net/http's default MaxResponseHeaderBytes, counted as it does.
const maxHeadBytes = 10 << 20

// errHeadTooLarge ends the read of an answer whose head passes
// maxHeadBytes.
var errHeadTooLarge = fmt.Errorf("h1: the answer's head is larger than %d bytes", maxHeadBytes)

type countingReader struct{ c *conn }

func (r countingReader) Read(p []byte) (int, error) {
	if r.c.head {
		left := maxHeadBytes - r.c.read
		if left <= 0 {
			return 0, errHeadTooLarge
		}
		if int64(len(p)) > left {
			p = p[:left]
		}
	}
	n, err := r.c.nc.Read(p)
	r.c.read += int64(n)
	return n, err
}

type countingWriter struct{ c *conn }

func (w countingWriter) Write(p []byte) (int, error) {
	n, err := w.c.nc.Write(p)
	w.c.written += int64(n)
	return n, err
}

func (c *conn) close() { c.closeOnce.Do(func() { _ = c.nc.Close() }) }

// aLongTimeAgo is a deadline in the past: it makes a blocked read or write
// return at once.
var aLongTimeAgo = time.Unix(1, 0)

// streamedBody is the size from which a request's body is written on a
// goroutine of its own while the answer is read (and a body of unknown
// length always is): a server may answer before it has read the body (a
// 413, a 401) and then neither read nor close, which would block a write
// made first until the caller's deadline. A smaller request fits in the
// socket's buffers, so its write returns without the server reading it,
// and the answer is read after it on the caller's goroutine alone.
const streamedBody = 16 << 10

// roundTrip writes req and reads the head of its answer.
func (c *conn) roundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(aLongTimeAgo) })
	c.read, c.written = 0, 0
	if c.br == nil {
		if br, _ := c.t.readers.Get().(*bufio.Reader); br != nil {
			br.Reset(countingReader{c})
			c.br = br
		} else {
			c.br = bufio.NewReaderSize(countingReader{c}, c.t.readBuf)
		}
	}
	if streamed(req) {
		return c.roundTripStreamed(ctx, req, stop)
	}
	if err := c.writeRequest(req); err != nil {
		if resp := c.earlyAnswer(ctx, req, stop); resp != nil {
			return resp, nil
		}
		return nil, c.fail(ctx, stop, fmt.Errorf("writing the request: %w", err))
	}
	resp, err := c.readAnswer(req)
	if err != nil {
		return nil, c.fail(ctx, stop, err)
	}
	return c.answer(ctx, resp, stop, !resp.Close && !req.Close), nil
}

// streamed reports whether req's body is written on a goroutine of its
// own (see streamedBody).
func streamed(req *http.Request) bool {
	if req.Body == nil || req.Body == http.NoBody {
		return false
	}
	return req.ContentLength <= 0 || req.ContentLength > streamedBody
}

// roundTripStreamed writes req on a goroutine of its own while it reads
// the answer, which is the outcome as soon as its head arrives, whether
// the write is done or not (as with net/http). The goroutine is waited for
// by whoever ends the request: fail, or finish at the answer's end (which
// drops the connection if the write is still under way then).
func (c *conn) roundTripStreamed(ctx context.Context, req *http.Request, stop func() bool) (*http.Response, error) {
	wrote := make(chan error, 1)
	c.wrote = wrote
	go func() {
		err := c.writeRequest(req)
		if err != nil && ctx.Err() == nil {
			// The server stopped reading: an answer it sent before that
			// gets a second to arrive, as in earlyAnswer.
			_ = c.nc.SetReadDeadline(time.Now().Add(time.Second))
		}
		wrote <- err
	}()
	resp, err := c.readAnswer(req)
	if err == nil {
		if c.wroteFailed() {
			resp.Close = true
		}
		return c.answer(ctx, resp, stop, !resp.Close && !req.Close), nil
	}
	// The write's error, when it failed first, says more than the read's.
	var werr error
	select {
	case werr = <-wrote:
	default:
		c.close()
		<-wrote
	}
	c.wrote = nil
	if werr != nil {
		err = fmt.Errorf("writing the request: %w", werr)
	}
	return nil, c.fail(ctx, stop, err)
}

// wroteFailed reports whether a body written on its own goroutine failed
// already (the answer then closes the connection).
func (c *conn) wroteFailed() bool {
	select {
	case err := <-c.wrote:
		c.wrote <- err
		return err != nil
	default:
		return false
	}
}

// writeRequest writes req, in one write system call where it fits: on
// loopback each write also runs the receiver's side of TCP and wakes it,
// on the writer's CPU.
func (c *conn) writeRequest(req *http.Request) error {
	pool, size := &c.t.writers, 4<<10
	if req.ContentLength > 3<<10 {
		pool, size = &c.t.bigWriters, 64<<10
	}
	bw, _ := pool.Get().(*bufio.Writer)
	if bw == nil {
		bw = bufio.NewWriterSize(countingWriter{c}, size)
	} else {
		bw.Reset(countingWriter{c})
	}
	err := req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	bw.Reset(nil)
	pool.Put(bw)
	return err
}

// readAnswer reads the head of req's final answer, past any 1xx.
func (c *conn) readAnswer(req *http.Request) (*http.Response, error) {
	for {
		c.head = true
		resp, err := http.ReadResponse(c.br, req)
		c.head = false
		if err != nil {
			return nil, fmt.Errorf("reading the answer: %w", err)
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			// As net/http: the rest of the connection is the body, and
			// the connection is not reused.
			resp.Body = io.NopCloser(c.br)
			resp.Close = true
			return resp, nil
		}
		if resp.StatusCode >= 200 || resp.StatusCode < 100 {
			return resp, nil
		}
		// 1xx (100 Continue, 103 Early Hints): the final answer follows.
	}
}

// answer hands resp to the caller: its body, when it has one, gives the
// connection back (keep) or drops it at its end; without one that is done
// now.
func (c *conn) answer(ctx context.Context, resp *http.Response, stop func() bool, keep bool) *http.Response {
	resp.TLS = c.state
	if resp.Body == http.NoBody || resp.Body == nil {
		c.finish(stop, keep)
		return resp
	}
	resp.Body = &body{rc: resp.Body, c: c, stop: stop, keep: keep, ctx: ctx}
	return resp
}

// earlyAnswer reads, for a second at most, an answer the server sent before
// it stopped reading the request (a 413 or a 401 to a large body, then a
// close that broke the write), as net/http does: that answer, not the
// broken write, is the outcome. The connection is not reused. It returns
// nil when there is none (the error of the write stands).
func (c *conn) earlyAnswer(ctx context.Context, req *http.Request, stop func() bool) *http.Response {
	if ctx.Err() != nil || c.nc.SetReadDeadline(time.Now().Add(time.Second)) != nil {
		return nil
	}
	c.head = true
	resp, err := http.ReadResponse(c.br, req)
	c.head = false
	if err != nil || resp.StatusCode < 200 {
		return nil
	}
	resp.Close = true
	return c.answer(ctx, resp, stop, false)
}

// fail drops the connection after a failed request, returning ctx's error
// when that is why it failed.
func (c *conn) fail(ctx context.Context, stop func() bool, err error) error {
	stop()
	c.close()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// finish gives the connection back, or drops it when it cannot be reused
// or the request's context fired (its deadline is then in the past).
func (c *conn) finish(stop func() bool, keep bool) {
	if c.wrote != nil {
		keep = c.waitWrite() && keep
	}
	if !stop() || !keep {
		c.close()
		return
	}
	c.t.putIdle(c)
}

// maxWriteWait is how long the end of an answer waits for its request's
// body to be written (net/http waits as long) before it drops the
// connection to stop the write.
const maxWriteWait = 50 * time.Millisecond

// waitWrite waits for the goroutine writing the request's body, stopping
// it by closing the connection when it is not done within maxWriteWait,
// and reports whether the write succeeded.
func (c *conn) waitWrite() bool {
	var err error
	select {
	case err = <-c.wrote:
	default:
		t := time.NewTimer(maxWriteWait)
		select {
		case err = <-c.wrote:
		case <-t.C:
			c.close()
			err = <-c.wrote
			if err == nil {
				err = net.ErrClosed
			}
		}
		t.Stop()
	}
	c.wrote = nil
	return err == nil
}

// maxDrain is how much of an answer not read to its end is read at Close
// so that the connection can be reused (net/http reads up to 256 KB).
const maxDrain = 256 << 10

// body is an answer's body: its end (or Close) gives the connection back,
// once. Read and Close may race (a Close to abort a Read): the one that
// ends the body first owns the connection's hand-back, and a Close that
// began owns it even when a racing Read reaches the end meanwhile, so that
// nothing touches the connection after it went back to the pool, where
// another request may have taken it.
type body struct {
	rc    io.ReadCloser
	c     *conn
	stop  func() bool
	keep  bool
	ctx   context.Context
	state atomic.Int32 // bodyOpen, bodyClosing, bodyDone
	eof   atomic.Bool  // read to its end: later reads give io.EOF again
}

// A body's states.
const (
	bodyOpen    int32 = iota
	bodyClosing       // Close is draining it: Close gives the connection back
	bodyDone          // the connection was given back or dropped
)

func (b *body) Read(p []byte) (int, error) {
	if b.state.Load() == bodyDone {
		if b.eof.Load() {
			return 0, io.EOF
		}
		return 0, errors.New("h1: read on a closed body")
	}
	n, err := b.rc.Read(p)
	switch {
	case err == io.EOF:
		b.eof.Store(true)
		if b.state.CompareAndSwap(bodyOpen, bodyDone) {
			b.c.finish(b.stop, b.keep)
		}
	case err != nil:
		if b.state.CompareAndSwap(bodyOpen, bodyDone) {
			b.c.finish(b.stop, false)
		}
		if b.ctx.Err() != nil {
			err = b.ctx.Err()
		}
	}
	return n, err
}

// Close reads what is left of a short answer (so the connection is kept)
// and gives the connection back, or drops it.
func (b *body) Close() error {
	if !b.state.CompareAndSwap(bodyOpen, bodyClosing) {
		return nil
	}
	reusable := b.keep && b.ctx.Err() == nil
	if reusable && !b.eof.Load() {
		// A server that stalls mid-answer must not hold the caller: the
		// drain gets a second, then the connection is dropped.
		_ = b.c.nc.SetReadDeadline(time.Now().Add(time.Second))
		n, err := io.CopyN(io.Discard, b.rc, maxDrain+1)
		reusable = err == io.EOF && n <= maxDrain && b.c.nc.SetReadDeadline(time.Time{}) == nil
	}
	b.state.Store(bodyDone)
	b.c.finish(b.stop, reusable)
	return nil
}

// EnvTransport is the environment variable that turns this transport off:
// PIPES_HTTP_TRANSPORT=net/http sends every request through net/http's
// Transport, as before it existed.
const EnvTransport = "PIPES_HTTP_TRANSPORT"

// Enabled reports whether pipes' clients use this transport: unless
// PIPES_HTTP_TRANSPORT=net/http, or a proxy is configured, or the system
// is not unix (then every request would go to net/http anyway).
func Enabled() bool {
	return peekable && os.Getenv(EnvTransport) != "net/http" && !ProxyConfigured()
}
