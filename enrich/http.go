package enrich

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pipesproject/pipes/internal/httpclass"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/template"
)

const (
	defaultHTTPTimeout = 30 * time.Second
	// maxSnippet bounds the part of a failed answer quoted in an error.
	maxSnippet = 256
	// minSecretLen is the shortest header value scrubbed from snippets.
	minSecretLen = 4
)

// HTTPConfig configures an http enrichment. Zero values of optional fields
// take the defaults documented on each field.
type HTTPConfig struct {
	// URL is the endpoint, http or https. Required.
	URL string
	// Method is the request method; default POST.
	Method string
	// Batch sends one request per batch whose body is a JSON array of the
	// payloads. False sends one request per event, whose body is that
	// event's payload (then a non-JSON answer is the new payload as is).
	Batch bool
	// Headers are added to every request. Values are secrets: they never
	// appear in logs or errors, and are scrubbed from answer snippets.
	Headers map[string]string
	// Timeout bounds each request, answer included; default 30s.
	Timeout time.Duration
	// InsecureSkipVerify accepts any TLS certificate (testing only; a
	// warning is logged). Ignored when Client is given.
	InsecureSkipVerify bool
	// Client, when set, sends the requests (tests, embedders).
	Client *http.Client
	// Logger receives the enrichment's logs; default: discard.
	Logger *slog.Logger
	// Template is the enrichment's input_template, rendered per event with
	// Vars; nil sends each event's payload (its SQS record).
	Template *template.Template
	// Vars are the template's reserved variables.
	Vars template.Vars
}

// HTTP is the `http` enrichment: it sends the batch (or each event) to an
// endpoint and hands the answer on. The answer rules (shared with Lambda):
//
//   - An empty answer (no body, `""`, `{}`, `[]`, `null`): the target is
//     not called and the events count as done.
//   - An array whose elements all carry a "messageId" maps by it (an id not
//     in the batch, or a mix with and without ids, fails the whole batch as
//     malformed; messages no element names are done); else one of the same
//     length maps by position; else, for a batch of one message, every
//     element is an event of it; else the enrichment is invoked again once
//     per event (batch of one), so that no message is lost and no output is
//     delivered twice.
//   - Any other JSON value is an array of one.
//   - An object with "batchItemFailures" fails the messages it names; an
//     "items" array then replaces the payloads of the others (by messageId
//     or position), else they go on unchanged.
//   - A non-JSON answer is malformed, except without Batch, where it is the
//     event's new payload as is.
//
// Statuses are classified as the http target does: 2xx succeeds; 429 is
// pipe.Throttled; 408, 5xx, timeouts and connection errors are retryable
// plain errors; 3xx (not followed) and other 4xx are pipe.Permanent. With
// Batch such an error fails the whole batch; without, the event alone.
// Enrich blocks until the endpoint answered; HTTP is safe for concurrent
// use.
type HTTP struct {
	url       string
	display   string // the URL without credentials or query, for errors
	method    string
	batch     bool
	header    http.Header
	secrets   [][]byte
	timeout   time.Duration
	client    *http.Client
	transport *http.Transport // ours to close; nil with HTTPConfig.Client
	log       *slog.Logger
	tmpl      *template.Template
	vars      template.Vars
}

var (
	_ pipe.Enricher = (*HTTP)(nil)
	_ pipe.Closer   = (*HTTP)(nil)
)

// NewHTTP checks cfg and returns the enrichment. It does not connect.
// Errors name the field at fault and never contain a header value.
func NewHTTP(cfg HTTPConfig) (*HTTP, error) {
	var problems []error
	u, err := url.Parse(cfg.URL)
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
		method = http.MethodPost
	}
	if !httpclass.IsToken(method) {
		problems = append(problems, fmt.Errorf("method %q is not a valid HTTP method", cfg.Method))
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = defaultHTTPTimeout
	}
	if timeout < 0 {
		problems = append(problems, fmt.Errorf("timeout %s is negative", cfg.Timeout))
	}
	header := http.Header{}
	header.Set("User-Agent", "pipes-enrichment")
	if cfg.Batch || cfg.Template == nil || cfg.Template.Kind() == template.KindJSON {
		header.Set("Content-Type", "application/json")
	}
	var secrets [][]byte
	for name, value := range cfg.Headers {
		if !httpclass.IsToken(name) {
			problems = append(problems, fmt.Errorf("header name %q is not valid", name))
			continue
		}
		if !httpclass.ValidHeaderValue(value) {
			problems = append(problems, fmt.Errorf("header %s has an invalid value (control characters)", name))
			continue
		}
		header.Set(name, value)
		if len(value) >= minSecretLen {
			secrets = append(secrets, []byte(value))
		}
	}
	if err := errors.Join(problems...); err != nil {
		return nil, fmt.Errorf("configuring the http enrichment: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &HTTP{
		url: cfg.URL, display: u.Scheme + "://" + u.Host + u.EscapedPath(), method: method, batch: cfg.Batch,
		header: header, secrets: secrets, timeout: timeout, client: cfg.Client, log: log,
		tmpl: cfg.Template, vars: cfg.Vars,
	}
	if h.client == nil {
		h.transport = http.DefaultTransport.(*http.Transport).Clone()
		if cfg.InsecureSkipVerify {
			h.transport.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // asked for, and warned about
			log.Warn("TLS verification is off for the http enrichment", "url", h.display)
		}
		h.client = &http.Client{
			Transport: h.transport,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		}
	}
	return h, nil
}

// Close releases idle connections. It does not block and never fails.
func (h *HTTP) Close(context.Context) error {
	if h.transport != nil {
		h.transport.CloseIdleConnections()
	}
	return nil
}

// Enrich sends the events and returns what the target gets. With Batch, a
// failed request or a malformed answer fails the whole batch (the error);
// without, one event's failure fails its message alone (the Result).
func (h *HTTP) Enrich(ctx context.Context, events []*pipe.Event) ([]*pipe.Event, pipe.Result, error) {
	sent, bodies, res := payloads(events, h.tmpl, h.vars)
	if len(sent) == 0 {
		return nil, res, nil
	}
	var (
		out  []*pipe.Event
		more pipe.Result
		err  error
	)
	if h.batch {
		out, more, err = enrichBatch(ctx, sent, bodies, h.invoke, func(n int) {
			h.log.DebugContext(ctx, "enrichment answer does not map to the batch; invoking once per event", "url", h.display, "events", n)
		})
		if err != nil {
			return nil, pipe.Result{}, fmt.Errorf("enriching %d events with %s: %w", len(sent), h.display, err)
		}
	} else {
		out, more, err = eachEvent(ctx, sent, func(ctx context.Context, i int) (mapping, error) {
			answer, err := h.invoke(ctx, bodies[i])
			if err != nil {
				return mapping{}, fmt.Errorf("enriching message %s with %s: %w", sent[i].ID(), h.display, err)
			}
			m, err := readAnswer(sent[i:i+1], answer, true)
			if err != nil {
				return mapping{}, fmt.Errorf("enriching message %s with %s: %w", sent[i].ID(), h.display, err)
			}
			return m, nil
		})
		if err != nil {
			return nil, pipe.Result{}, fmt.Errorf("enriching with %s: %w", h.display, err)
		}
	}
	res.Failures = append(res.Failures, more.Failures...)
	return out, res, nil
}

// invoke makes one request and classifies its outcome; it returns a 2xx
// answer's body.
func (h *HTTP) invoke(ctx context.Context, body []byte) ([]byte, error) {
	reqCtx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, h.method, h.url, bytes.NewReader(body))
	if err != nil {
		return nil, errors.New("building the request failed") // the error would quote the URL
	}
	req.Header = h.header.Clone()
	if !h.batch && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	}
	resp, err := h.client.Do(req)
	if err != nil {
		var ue *url.Error // it repeats the full URL, query included: keep its cause
		if errors.As(err, &ue) {
			err = ue.Err
		}
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("cancelled: %w", err)
		case reqCtx.Err() != nil:
			return nil, fmt.Errorf("no answer within %s: %w", h.timeout, err)
		default:
			return nil, fmt.Errorf("sending the request: %w", err)
		}
	}
	defer func() {
		_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
		_ = resp.Body.Close()
	}()
	status := resp.StatusCode
	if status >= 200 && status <= 299 {
		answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
		switch {
		case err != nil && reqCtx.Err() != nil:
			return nil, fmt.Errorf("no complete answer within %s: %w", h.timeout, err)
		case err != nil:
			return nil, fmt.Errorf("reading the answer: %w", err)
		case len(answer) > maxAnswer:
			return nil, fmt.Errorf("the answer is larger than %d bytes", maxAnswer)
		}
		return answer, nil
	}
	buf := make([]byte, 4<<10)
	n, _ := io.ReadFull(resp.Body, buf)
	return nil, httpclass.Failure(status, h.snippet(buf[:n]))
}

// snippet returns the start of a failed answer scrubbed of header values,
// on one line, at most maxSnippet bytes.
func (h *HTTP) snippet(b []byte) string {
	if len(b) == 4<<10 { // cut by the read: drop a tail that could hold half a secret
		b = b[:max(0, len(b)-httpclass.LongestSecret(h.secrets))]
	}
	s := httpclass.Scrub(b, h.secrets)
	if len(s) > maxSnippet {
		cut := maxSnippet
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
