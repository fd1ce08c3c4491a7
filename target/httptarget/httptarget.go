// Package httptarget is the `http` target of pipes: it sends a batch of
// events to an HTTP endpoint, either as one JSON array per batch (whose answer
// may name failed items with a Lambda-style batchItemFailures list) or as one
// request per event.
//
// Status codes are classified once, here: 2xx succeeds; 429 is throttling
// (pipe.Throttled); 408, 5xx, timeouts and connection errors are retryable;
// other 4xx and 3xx (redirects are not followed) are client errors that
// retrying will not fix (pipe.Permanent).
package httptarget

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/pipesproject/pipes/internal/batching"
	"github.com/pipesproject/pipes/internal/httpclass"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/template"
)

const (
	defaultMethod      = http.MethodPost
	defaultTimeout     = 30 * time.Second
	defaultMaxParallel = 16

	// maxAnswer is the largest batch answer read (the Pipes payload limit).
	maxAnswer = 6 << 20
	// maxSnippet bounds the part of an answer quoted in an error.
	maxSnippet = 256
	// snippetRead is how much of a failed answer is read to build a snippet;
	// more is read (and dropped) so that the connection can be reused.
	snippetRead = 4 << 10
	// maxDrain is how much of an unread answer is drained before closing.
	maxDrain = 64 << 10
	// minSecretLen is the shortest header value scrubbed from snippets:
	// shorter values would blank out ordinary text and are no secrets.
	minSecretLen = 4
)

// Config configures an http target. The zero values of optional fields take
// the defaults documented on each field.
type Config struct {
	// URL is the endpoint, http or https. Required.
	URL string
	// Method is the request method; default POST.
	Method string
	// Batch sends one request per batch whose body is a JSON array of the
	// payloads, and honours a batchItemFailures answer. False sends one
	// request per event, whose body is that event's payload.
	Batch bool
	// Headers are added to every request, after Content-Type and
	// User-Agent (so they may override them). Values are treated as secrets:
	// they never appear in logs or errors, and are scrubbed from answer
	// snippets quoted in errors.
	Headers map[string]string
	// Timeout bounds each request, answer included; default 30s.
	Timeout time.Duration
	// InsecureSkipVerify accepts any TLS certificate. Only for testing: a
	// warning is logged when it is set. Ignored when Client is given.
	InsecureSkipVerify bool
	// Client, when set, sends the requests instead of the target's own
	// client (for tests and embedders). Its redirect policy and TLS settings
	// are used as they are.
	Client *http.Client
	// Logger receives the target's logs; default: discard.
	Logger *slog.Logger
	// MaxParallel bounds the requests in flight per batch when Batch is
	// false; default 16.
	MaxParallel int
	// Query parameters are added to the URL of every request. Their values,
	// like header values and the URL's path, may hold template placeholders
	// (`<$.body.id>`, `<aws.pipes.pipe-name>`): they are rendered per
	// request against its record (with Batch, the batch's first record), and
	// values placed in the URL are escaped. Header values with placeholders
	// are not treated as secrets.
	Query map[string]string
	// Vars are the reserved template variables.
	Vars template.Vars
}

// Target delivers batches to an HTTP endpoint. It is safe for concurrent
// use: a pipe calls Deliver from many batches at once, and they share one
// connection pool.
type Target struct {
	url         string
	display     string // the URL without credentials or query, for errors
	method      string
	batch       bool
	header      http.Header
	host        string // a Host header override, "" for none
	secrets     [][]byte
	timeout     time.Duration
	maxParallel int
	dyn         dynamic
	client      *http.Client
	transport   *http.Transport // owned by the target; nil with Config.Client
}

var _ pipe.Target = (*Target)(nil)

// New checks cfg and returns a target. It does not connect: an endpoint
// that is down is reported by Deliver. Errors name the field at fault and
// never contain a header value.
func New(cfg Config) (*Target, error) {
	var problems []error
	dyn := dynamic{vars: cfg.Vars}
	rawURL := cfg.URL
	if HasPlaceholder(cfg.URL) {
		parts, err := parseURL(cfg.URL)
		if err != nil {
			return nil, fmt.Errorf("configuring http target: %w", err)
		}
		dyn.url = parts
		rawURL = strings.NewReplacer("<", "", ">", "").Replace(cfg.URL) // for display and checks only
	}
	query, err := parseNamed(cfg.Query, "query parameter")
	if err != nil {
		return nil, fmt.Errorf("configuring http target: %w", err)
	}
	dyn.query = query
	u, err := url.Parse(rawURL)
	switch {
	case cfg.URL == "":
		problems = append(problems, errors.New("url is required"))
	case err != nil:
		problems = append(problems, errors.New("url is not a valid URL"))
	case u.Scheme != "http" && u.Scheme != "https":
		problems = append(problems, fmt.Errorf("url scheme %q is not http or https", u.Scheme))
	case u.Host == "":
		problems = append(problems, errors.New("url has no host"))
	}
	method := strings.ToUpper(cfg.Method)
	if method == "" {
		method = defaultMethod
	}
	if !httpclass.IsToken(method) {
		problems = append(problems, fmt.Errorf("method %q is not a valid HTTP method", cfg.Method))
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = defaultTimeout
	}
	if timeout < 0 {
		problems = append(problems, fmt.Errorf("timeout %s is negative", cfg.Timeout))
	}
	maxParallel := cfg.MaxParallel
	if maxParallel == 0 {
		maxParallel = defaultMaxParallel
	}
	if maxParallel < 0 {
		problems = append(problems, fmt.Errorf("max parallel %d is negative", cfg.MaxParallel))
	}

	header := http.Header{}
	header.Set("User-Agent", "pipes")
	if cfg.Batch {
		header.Set("Content-Type", "application/json")
	}
	var host string
	var secrets [][]byte
	for name, value := range cfg.Headers {
		if !httpclass.IsToken(name) {
			problems = append(problems, fmt.Errorf("header name %q is not valid", name))
			continue
		}
		if HasPlaceholder(value) {
			tmpl, err := template.Parse(value)
			if err != nil {
				problems = append(problems, fmt.Errorf("header %q: %w", name, err))
				continue
			}
			dyn.header = append(dyn.header, namedTemplate{name: name, tmpl: tmpl})
			continue
		}
		if !httpclass.ValidHeaderValue(value) {
			// Never quote the value: it may be a secret.
			problems = append(problems, fmt.Errorf("header %q has a value with control characters", name))
			continue
		}
		if http.CanonicalHeaderKey(name) == "Host" {
			host = value
		} else {
			header.Set(name, value)
		}
		if len(value) >= minSecretLen {
			secrets = append(secrets, []byte(value))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("configuring http target: %w", errors.Join(problems...))
	}

	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	display := (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
	t := &Target{
		url:         u.String(),
		display:     display,
		method:      method,
		batch:       cfg.Batch,
		header:      header,
		host:        host,
		secrets:     secrets,
		timeout:     timeout,
		maxParallel: maxParallel,
		dyn:         dyn,
		client:      cfg.Client,
	}
	if t.client == nil {
		t.transport = newTransport(cfg.InsecureSkipVerify)
		t.client = &http.Client{
			Transport: t.transport,
			// A redirect would turn a POST into a GET and may carry the
			// secret headers to another host: answer 3xx to the pipe instead.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
		if cfg.InsecureSkipVerify {
			logger.Warn("http target accepts any TLS certificate (insecure_skip_verify); use it for testing only", "url", display)
		}
	}
	return t, nil
}

// newTransport returns a transport sized for a pipe with up to 1000 batches
// in flight to one host.
func newTransport(insecure bool) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 1000
	tr.MaxIdleConnsPerHost = 1000
	tr.IdleConnTimeout = 90 * time.Second
	tr.TLSClientConfig = &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: insecure, //nolint:gosec // opt-in, warned about in New
	}
	return tr
}

// Close releases the target's idle connections. It does not wait for
// deliveries in flight; call it once the pipe has stopped.
func (t *Target) Close(ctx context.Context) error {
	if t.transport != nil {
		t.transport.CloseIdleConnections()
	}
	return nil
}

// Deliver sends events and blocks until the endpoint has answered, the
// timeout has passed or ctx is done. An empty batch sends nothing.
//
// With Batch, one request carries all events; a 2xx answer is read as a
// partial batch answer (pipe.ParseBatchResponse), and a malformed one fails
// the whole batch with an error wrapping pipe.ErrMalformedAnswer. Any other
// outcome fails the whole batch with an error classified by status.
//
// Without Batch, each event is its own request and fails alone, with an
// error classified the same way in its pipe.ItemFailure. When every request
// was throttled, Deliver returns a whole-batch Throttled error instead, so
// that the pipe slows down.
func (t *Target) Deliver(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
	if len(events) == 0 {
		return pipe.Result{}, nil
	}
	if t.batch {
		return t.deliverBatch(ctx, events)
	}
	return t.deliverEach(ctx, events)
}

func (t *Target) deliverBatch(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
	body := batching.JSONArray(events)

	var result pipe.Result
	err := t.send(ctx, events[0], body, true, func(status int, answer io.Reader) error {
		data, err := io.ReadAll(io.LimitReader(answer, maxAnswer+1))
		if err != nil {
			return fmt.Errorf("reading the %d answer: %w", status, err)
		}
		if len(data) > maxAnswer {
			return fmt.Errorf("answered %d: %w: larger than %d bytes", status, pipe.ErrMalformedAnswer, maxAnswer)
		}
		r, err := pipe.ParseBatchResponse(data, inBatch(events))
		if err != nil {
			// Quote the parser's reason, scrubbed: it may echo an identifier.
			reason := strings.TrimPrefix(err.Error(), pipe.ErrMalformedAnswer.Error())
			reason = strings.TrimPrefix(reason, ": ")
			return fmt.Errorf("answered %d: %w: %s; answer: %q", status, pipe.ErrMalformedAnswer,
				httpclass.Scrub([]byte(reason), t.secrets), t.snippetOf(data))
		}
		result = r
		return nil
	})
	if err != nil {
		return pipe.Result{}, fmt.Errorf("delivering %d events to %s %s: %w", len(events), t.method, t.display, err)
	}
	return result, nil
}

func (t *Target) deliverEach(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
	errs := make([]error, len(events))
	if len(events) == 1 || t.maxParallel == 1 {
		for i, ev := range events {
			errs[i] = t.sendOne(ctx, ev)
		}
	} else {
		sem := make(chan struct{}, t.maxParallel)
		var wg sync.WaitGroup
		for i, ev := range events {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				errs[i] = t.sendOne(ctx, ev)
			})
		}
		wg.Wait()
	}

	var result pipe.Result
	throttled := 0
	for i, err := range errs {
		if err == nil {
			continue
		}
		if pipe.IsThrottled(err) {
			throttled++
		}
		result.Failures = append(result.Failures, pipe.ItemFailure{ID: events[i].ID(), Err: err})
	}
	if throttled == len(events) {
		return pipe.Result{}, fmt.Errorf("delivering %d events one by one: all were throttled: %w", len(events), errs[0])
	}
	return result, nil
}

// sendOne sends one event as its own request; nil means a 2xx answer.
func (t *Target) sendOne(ctx context.Context, ev *pipe.Event) error {
	err := t.send(ctx, ev, ev.Payload, json.Valid(ev.Payload), nil)
	if err != nil {
		return fmt.Errorf("delivering event %s to %s %s: %w", ev.ID(), t.method, t.display, err)
	}
	return nil
}

// send makes one request for ev (the record dynamic parameters come from)
// and classifies its outcome. onSuccess, when not nil, reads a 2xx answer;
// its error is returned as is.
func (t *Target) send(ctx context.Context, ev *pipe.Event, body []byte, isJSON bool, onSuccess func(status int, answer io.Reader) error) error {
	reqCtx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	target := t.url
	var extra [][2]string
	if !t.dyn.empty() {
		var err error
		if target, extra, err = t.dyn.render(t.url, ev); err != nil {
			return pipe.Permanent(err)
		}
	}
	req, err := http.NewRequestWithContext(reqCtx, t.method, target, bytes.NewReader(body))
	if err != nil {
		return pipe.Permanent(fmt.Errorf("building the request: %w", err))
	}
	req.Header = t.header.Clone()
	for _, h := range extra {
		req.Header.Set(h[0], h[1])
	}
	if !t.batch && req.Header.Get("Content-Type") == "" {
		if isJSON {
			req.Header.Set("Content-Type", "application/json")
		} else {
			req.Header.Set("Content-Type", "text/plain; charset=utf-8")
		}
	}
	if t.host != "" {
		req.Host = t.host
	}

	resp, err := t.client.Do(req)
	if err != nil {
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
			return fmt.Errorf("no answer within %s: %w", t.timeout, err)
		default:
			return fmt.Errorf("sending the request: %w", err)
		}
	}
	defer func() {
		_, _ = io.CopyN(io.Discard, resp.Body, maxDrain)
		_ = resp.Body.Close()
	}()

	status := resp.StatusCode
	if status >= 200 && status <= 299 {
		if onSuccess == nil {
			return nil
		}
		return onSuccess(status, resp.Body)
	}

	return httpclass.Failure(status, t.snippet(resp.Body))
}

// snippet reads the start of a failed answer and returns it scrubbed of
// header values, on one line, at most maxSnippet bytes.
func (t *Target) snippet(r io.Reader) string {
	buf := make([]byte, snippetRead+1)
	n, _ := io.ReadFull(r, buf)
	return t.snippetOf(buf[:n])
}

// snippetOf returns the start of answer scrubbed of header values, on one
// line, at most maxSnippet bytes.
func (t *Target) snippetOf(answer []byte) string {
	if len(answer) > snippetRead {
		// Drop a tail that could hold the start of a secret cut by the
		// limit, before scrubbing.
		answer = answer[:max(0, snippetRead-httpclass.LongestSecret(t.secrets))]
	}
	return httpclass.Truncate(httpclass.Scrub(answer, t.secrets), maxSnippet)
}

// inBatch returns whether an id names an event of the batch.
func inBatch(events []*pipe.Event) func(string) bool {
	if len(events) <= 32 {
		return func(id string) bool {
			for _, ev := range events {
				if ev.ID() == id {
					return true
				}
			}
			return false
		}
	}
	ids := make(map[string]struct{}, len(events))
	for _, ev := range events {
		ids[ev.ID()] = struct{}{}
	}
	return func(id string) bool {
		_, ok := ids[id]
		return ok
	}
}
