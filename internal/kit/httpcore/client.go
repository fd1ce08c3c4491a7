package httpcore

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pipesproject/pipes/internal/h1"
	"github.com/pipesproject/pipes/internal/keyerr"
	"github.com/pipesproject/pipes/pipe"
)

const (
	// MaxAnswer is the largest 2xx answer Do reads: Pipes' 6 MB payload
	// limit.
	MaxAnswer = 6 << 20
	// DefaultTimeout bounds a request when Config.Timeout is zero.
	DefaultTimeout = 30 * time.Second

	// ContentJSON and ContentText are the Content-Type values a request
	// can ask for without copying the client's header.
	ContentJSON = "application/json"
	ContentText = "text/plain; charset=utf-8"

	// maxSnippet bounds the part of a failed answer quoted in an error.
	maxSnippet = 256
	// snippetRead is how much of a failed answer is read to build a
	// snippet; more is drained (and dropped) so that the connection can be
	// reused.
	snippetRead = 4 << 10
	// maxDrain is how much of an unread answer is drained before closing.
	maxDrain = 64 << 10
	// minSecretLen is the shortest value scrubbed from error texts: shorter
	// values would blank out ordinary text and are no secrets.
	minSecretLen = 4
)

// ErrAnswerTooLarge is returned by Do for a 2xx answer larger than
// MaxAnswer.
var ErrAnswerTooLarge = fmt.Errorf("the answer is larger than %d bytes", MaxAnswer)

// Config configures a Client. Values are final: `${ENV}` references were
// resolved by the configuration loader.
type Config struct {
	// URL is the endpoint, http or https. Required. A caller that renders
	// the URL per request gives its skeleton here (for checks and display)
	// and the rendered URL in each Request.
	URL string
	// Method is the request method; default POST.
	Method string
	// UserAgent is sent unless Headers set one.
	UserAgent string
	// Headers are sent with every request, after User-Agent and
	// Content-Type (so they override them). A Host header sets the
	// request's host. Every value is a secret: it never appears in an
	// error, and is scrubbed from the answers errors quote.
	Headers map[string]string
	// Secrets are more values to keep out of error texts (query
	// parameters, say). The userinfo and query values of SecretURL (default
	// URL) are secrets without being listed.
	Secrets   []string
	SecretURL string
	// Timeout bounds each request, answer included; default 30s.
	Timeout time.Duration
	// InsecureSkipVerify accepts any TLS certificate (testing only: the
	// caller warns). Ignored when Client is given.
	InsecureSkipVerify bool
	// ReadBufferSize is the read buffer of each connection (0: Go's 4 KB).
	// A user whose answers are small (the http target's partial batch
	// answers) saves memory per connection with 1 KB; a larger chunked
	// answer is then read in more system calls. Ignored when Client is
	// given.
	ReadBufferSize int
	// Client, when set, sends the requests instead of the client's own
	// (tests, embedders); its redirect policy and TLS settings are used as
	// they are.
	Client *http.Client
	// Sign, when set, signs each request once its URL, headers and host
	// are set (AWS SigV4 for API Gateway, awsclient.RequestSigner): it gets
	// the request, whose header it may change (a copy of the client's),
	// and the hex SHA-256 of the body. Its error fails the request and
	// must hold no secret.
	Sign func(ctx context.Context, r *http.Request, payloadHash string) error
}

// Client sends requests to one endpoint and classifies their outcome. It is
// safe for concurrent use; requests share one connection pool.
type Client struct {
	url     string
	display string // the URL without credentials or query, for errors
	method  string
	// header is sent as is by every request that adds nothing to it: it is
	// shared, so never changed after New.
	header http.Header
	// typed holds header with Content-Type set to ContentJSON and
	// ContentText, when header has no Content-Type of its own.
	typed      map[string]http.Header
	host       string // a Host header override, "" for none
	secrets    *Secrets
	timeout    time.Duration
	client     *http.Client
	transport  idleCloser // ours to close; nil with Config.Client
	ownHeaders bool       // the client adds to request headers (a cookie jar): copy them
	sign       func(ctx context.Context, r *http.Request, payloadHash string) error

	peakMu sync.Mutex
	peak   int // the highest concurrency told since idle connections were last closed
}

// FollowConcurrency tells the client how many requests its user may have
// in flight now (a pipe's concurrency). When that falls to half of the
// highest since the last time, the client's idle keep-alive connections
// are closed: after a burst at concurrency 1000, a pipe back at 10 does
// not keep a thousand connections (a socket each, and 16 KB of buffers
// with net/http's transport) open for the idle timeout; the few it needs
// are dialled again. It does nothing with
// Config.Client (not ours). It does not block; it is safe for concurrent
// use.
func (c *Client) FollowConcurrency(n int) {
	c.peakMu.Lock()
	shrink := n > 0 && c.peak > 0 && n <= c.peak/2
	if n > c.peak || shrink {
		c.peak = n
	}
	c.peakMu.Unlock()
	if shrink && c.transport != nil {
		c.transport.CloseIdleConnections()
	}
}

// New checks cfg and returns a client. It does not connect. It reports
// every problem at once, joined; errors name the field at fault and never
// contain a header value.
func New(cfg Config) (*Client, error) {
	var problems []error
	u, err := url.Parse(cfg.URL)
	switch {
	case cfg.URL == "":
		problems = append(problems, keyerr.New("url", errors.New("url is required")))
	case err != nil:
		problems = append(problems, keyerr.New("url", errors.New("url is not a valid URL")))
	case u.Scheme != "http" && u.Scheme != "https":
		problems = append(problems, keyerr.New("url", fmt.Errorf("url scheme %q is not http or https", u.Scheme)))
	case u.Host == "":
		problems = append(problems, keyerr.New("url", errors.New("url has no host")))
	}
	method := strings.ToUpper(cfg.Method)
	if method == "" {
		method = http.MethodPost
	}
	if !IsToken(method) {
		problems = append(problems, keyerr.New("method", fmt.Errorf("method %q is not a valid HTTP method", cfg.Method)))
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	if timeout < 0 {
		problems = append(problems, keyerr.New("timeout", fmt.Errorf("timeout %s is negative", cfg.Timeout)))
	}
	header := http.Header{}
	if cfg.UserAgent != "" {
		header.Set("User-Agent", cfg.UserAgent)
	}
	var host string
	secrets := slices.Clone(cfg.Secrets)
	for _, name := range slices.Sorted(maps.Keys(cfg.Headers)) {
		value := cfg.Headers[name]
		if !IsToken(name) {
			problems = append(problems, keyerr.New("headers."+name, fmt.Errorf("header name %q is not valid", name)))
			continue
		}
		if !ValidHeaderValue(value) {
			// Never quote the value: it may be a secret.
			problems = append(problems, keyerr.New("headers."+name, fmt.Errorf("header %q has a value with control characters", name)))
			continue
		}
		if http.CanonicalHeaderKey(name) == "Host" {
			host = value // net/http ignores a Host in the header map
		} else {
			header.Set(name, value)
		}
		secrets = append(secrets, value)
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	c := &Client{
		url:     u.String(),
		display: (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}).String(),
		method:  method,
		header:  header,
		host:    host,
		secrets: NewSecrets(secrets, cmp.Or(cfg.SecretURL, cfg.URL)),
		timeout: timeout,
		client:  cfg.Client,
		sign:    cfg.Sign,
	}
	if header.Get("Content-Type") == "" {
		c.typed = make(map[string]http.Header, 2)
		for _, ct := range []string{ContentJSON, ContentText} {
			h := header.Clone()
			h.Set("Content-Type", ct)
			c.typed[ct] = h
		}
	}
	if c.client == nil {
		tr := newTransport(cfg.InsecureSkipVerify, cfg.ReadBufferSize)
		c.transport = tr
		c.client = &http.Client{
			Transport: tr,
			// A redirect would turn a POST into a GET and may carry the
			// secret headers to another host: answer 3xx to the caller.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	c.ownHeaders = c.client.Jar != nil
	return c, nil
}

// idleCloser is a transport whose idle connections can be closed.
type idleCloser interface {
	http.RoundTripper
	CloseIdleConnections()
}

// newTransport returns a transport sized for a pipe with up to 1000 batches
// in flight to one host: internal/h1's, which reads each answer on the
// calling goroutine, unless it is turned off (PIPES_HTTP_TRANSPORT=net/http,
// or a proxy in the environment), then net/http's. readBuf is each
// connection's read buffer (0: 4 KB).
func newTransport(insecure bool, readBuf int) idleCloser {
	tlsCfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: insecure, //nolint:gosec // opt-in, warned about by the caller
	}
	if h1.Enabled() {
		return h1.New(h1.Options{TLSConfig: tlsCfg, ReadBufferSize: readBuf, MaxIdlePerHost: 1000, IdleTimeout: 90 * time.Second})
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 1000
	tr.MaxIdleConnsPerHost = 1000
	tr.IdleConnTimeout = 90 * time.Second
	tr.TLSClientConfig = tlsCfg
	if readBuf > 0 {
		tr.ReadBufferSize = readBuf
	}
	return tr
}

// URL is the configured URL (the skeleton, for a caller rendering URLs).
func (c *Client) URL() string { return c.url }

// Display is the URL without credentials or query, fit for errors and
// logs.
func (c *Client) Display() string { return c.display }

// Method is the request method.
func (c *Client) Method() string { return c.method }

// Timeout is the bound of each request.
func (c *Client) Timeout() time.Duration { return c.timeout }

// Close releases the client's idle connections. It does not wait for
// requests in flight and never fails.
func (c *Client) Close() {
	if c.transport != nil {
		c.transport.CloseIdleConnections()
	}
}

// Request is one request of a Client.
type Request struct {
	// URL is the rendered URL; "" sends to the configured one.
	URL string
	// Header holds per-request values (rendered templates), set over the
	// configured headers. Only a request with such values copies the
	// client's header map.
	Header [][2]string
	// ContentType is sent unless the configured headers set one.
	ContentType string
	// Body is the request body.
	Body []byte
	// BodyFunc, when set, makes the body instead of Body: a new reader of
	// BodyLen bytes at each call (a request may be written again on a new
	// connection), so that a body written as it is read (batching.Array)
	// is not held whole.
	BodyFunc func() io.Reader
	// BodyLen is the length of what BodyFunc's readers read.
	BodyLen int64
	// ReadAnswer reads a 2xx answer (at most MaxAnswer bytes) and returns
	// it; false drops it.
	ReadAnswer bool
}

// Do sends req and blocks until the endpoint answered, the timeout passed
// or ctx is done. It returns the status and, with ReadAnswer, the body of a
// 2xx answer. Its error classifies the outcome:
//
//   - 2xx: nil (or a plain error if the answer could not be read, or
//     wrapping ErrAnswerTooLarge).
//   - 429: pipe.Throttled. 408 and 5xx: plain, retryable.
//   - 3xx (redirects are not followed), other 4xx and 1xx: pipe.Permanent.
//   - No answer (connection refused, reset, timeout, TLS failure): plain,
//     retryable, wrapping the cause but never the URL.
//
// Error texts quote the start of a failed answer (at most 256 bytes, on
// one line) and never hold a secret (see Secrets): each is replaced by
// Redacted, wherever it stands. Do does not keep req once it returns.
func (c *Client) Do(ctx context.Context, req *Request) (int, []byte, error) {
	// The steps are functions of their own so that the frame the caller's
	// goroutine waits for the answer in is small (a parked goroutine's
	// stack is halved only when a quarter of it holds what is in use:
	// issue 20).
	reqCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	hr, err := c.newRequest(ctx, reqCtx, req)
	if err != nil {
		return 0, nil, c.secrets.Error(err)
	}
	var resp *http.Response
	if c.transport != nil && hr.URL.User == nil {
		// Our own client follows no redirect and has no cookie jar:
		// http.Client would only copy the header and the URL of every
		// request (for redirects) before handing it to the transport. (A
		// URL with a user goes through it: it turns the user into a Basic
		// Authorization header.)
		resp, err = c.transport.RoundTrip(hr)
	} else {
		resp, err = c.client.Do(hr)
	}
	if err != nil {
		return 0, nil, c.secrets.Error(c.noAnswer(ctx, reqCtx, err))
	}
	status, answer, err := c.answer(reqCtx, resp, req.ReadAnswer)
	return status, answer, c.secrets.Error(err)
}

// newRequest builds the HTTP request of req, bound to reqCtx (ctx carries
// the trace).
func (c *Client) newRequest(ctx, reqCtx context.Context, req *Request) (*http.Request, error) {
	target := req.URL
	if target == "" {
		target = c.url
	}
	var body io.Reader = bytes.NewReader(req.Body)
	bodyFunc := req.BodyFunc
	if bodyFunc != nil {
		body = bodyFunc()
	}
	hr, err := http.NewRequestWithContext(reqCtx, c.method, target, body)
	if err != nil {
		// Its text would quote the URL, query included.
		return nil, pipe.Permanent(errors.New("building the request failed: the url is not valid"))
	}
	if bodyFunc != nil {
		hr.ContentLength = req.BodyLen
		hr.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bodyFunc()), nil }
	}
	hr.Header = c.headerFor(req, traceparent(ctx))
	if c.host != "" {
		hr.Host = c.host
	}
	if c.sign != nil {
		if err := c.signRequest(ctx, hr, req); err != nil {
			return nil, err
		}
	}
	return hr, nil
}

// signRequest signs hr, whose body is req's, with the client's Sign, on a
// copy of its header (the client's own may be shared).
func (c *Client) signRequest(ctx context.Context, hr *http.Request, req *Request) error {
	hr.Header = hr.Header.Clone()
	h := sha256.New()
	if req.BodyFunc != nil {
		if _, err := io.Copy(h, req.BodyFunc()); err != nil {
			return fmt.Errorf("hashing the request body to sign it: %w", err)
		}
	} else {
		h.Write(req.Body)
	}
	if err := c.sign(ctx, hr, hex.EncodeToString(h.Sum(nil))); err != nil {
		return fmt.Errorf("signing the request: %w", err)
	}
	return nil
}

// noAnswer is the error of a request that got no answer.
func (c *Client) noAnswer(ctx, reqCtx context.Context, err error) error {
	// url.Error repeats the method and the full URL (query included):
	// keep only its cause.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("cancelled: %w", err)
	case reqCtx.Err() != nil:
		return fmt.Errorf("no answer within %s: %w", c.timeout, err)
	default:
		return fmt.Errorf("sending the request: %w", err)
	}
}

// answer reads and classifies resp, and closes its body.
func (c *Client) answer(reqCtx context.Context, resp *http.Response, read bool) (int, []byte, error) {
	drained := false // the answer was read to its end
	defer func() {
		if !drained {
			_, _ = io.CopyN(io.Discard, resp.Body, maxDrain)
		}
		_ = resp.Body.Close()
	}()

	status := resp.StatusCode
	if status < 200 || status > 299 {
		buf := make([]byte, snippetRead+1)
		n, _ := io.ReadFull(resp.Body, buf)
		err := Failure(status, c.Snippet(buf[:n]))
		if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
			var se *StatusError
			if d, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok && errors.As(err, &se) {
				se.RetryAfter = d
			}
		}
		return status, nil, err
	}
	if !read {
		return status, nil, nil
	}
	answer, err := readAnswer(resp)
	drained = err == nil && len(answer) <= MaxAnswer
	switch {
	case err != nil && reqCtx.Err() != nil:
		return status, nil, fmt.Errorf("no complete answer within %s: %w", c.timeout, err)
	case err != nil:
		return status, nil, fmt.Errorf("reading the %d answer: %w", status, err)
	case len(answer) > MaxAnswer:
		return status, nil, ErrAnswerTooLarge
	}
	return status, answer, nil
}

// readAnswer reads an answer's body to its end, or to one byte past
// MaxAnswer. An answer of a known length is read into one buffer of that
// length (an empty one allocates nothing); it is never nil.
func readAnswer(resp *http.Response) ([]byte, error) {
	n := resp.ContentLength
	if n < 0 || n > MaxAnswer {
		return io.ReadAll(io.LimitReader(resp.Body, MaxAnswer+1))
	}
	if n == 0 && resp.Body == http.NoBody {
		return []byte{}, nil
	}
	// One byte more than announced, so that reading stops at the body's
	// end (io.ErrUnexpectedEOF), not before it.
	buf := make([]byte, n+1)
	got, err := io.ReadFull(resp.Body, buf)
	switch {
	case (err == io.ErrUnexpectedEOF || err == io.EOF) && int64(got) == n:
		return buf[:got], nil
	case err == io.EOF:
		return nil, io.ErrUnexpectedEOF // shorter than announced
	case err != nil:
		return nil, err
	}
	// Longer than announced (net/http does not let that happen): read on.
	rest, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer+1-int64(got)))
	return append(buf, rest...), err
}

// headerFor returns the header of req: the client's own, shared, unless
// the request adds values to it or tp, the W3C traceparent of the span in
// the request's context, is to be sent ("" for none). A traceparent that
// the configuration or the request sets is sent instead of tp.
func (c *Client) headerFor(req *Request, tp string) http.Header {
	h := c.header
	ct := "" // a Content-Type still to set
	if req.ContentType != "" && c.typed != nil {
		if t, ok := c.typed[req.ContentType]; ok {
			h = t
		} else {
			ct = req.ContentType
		}
	}
	if tp != "" && h.Get(headerTraceparent) != "" {
		tp = "" // configured: the user's choice
	}
	if len(req.Header) == 0 && ct == "" && tp == "" && !c.ownHeaders {
		return h
	}
	h = h.Clone()
	if ct != "" {
		h.Set("Content-Type", ct)
	}
	if tp != "" {
		h.Set(headerTraceparent, tp)
	}
	for _, kv := range req.Header {
		h.Set(kv[0], kv[1])
	}
	return h
}

// Snippet returns the start of a failed answer scrubbed of secrets, on one
// line, at most 256 bytes. An answer longer than 4 KiB is cut before
// scrubbing, with room for the longest secret, so that no half of a secret
// cut by the limit is quoted.
func (c *Client) Snippet(answer []byte) string {
	if len(answer) > snippetRead {
		answer = answer[:max(0, snippetRead-c.secrets.longest())]
	}
	return Truncate(c.secrets.Scrub(answer), maxSnippet)
}

// Scrub returns text with the client's secrets redacted, on one line.
func (c *Client) Scrub(text string) string { return c.secrets.Scrub([]byte(text)) }

// Secrets are the values the client keeps out of its error texts: header
// values, the credentials in them, the URL's userinfo and query values.
// Callers pass their own errors through Secrets().Error before returning
// them.
func (c *Client) Secrets() *Secrets { return c.secrets }
