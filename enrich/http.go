package enrich

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/pipesproject/pipes/internal/kit/httpcore"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/template"
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
	// appear in logs or errors, and neither does the part after a scheme
	// (`Bearer `, `Basic `, `Token `…) nor the URL's userinfo and query
	// values: an answer echoing one is quoted with "[redacted]" in its
	// place.
	//
	// A header value that holds a template placeholder (`<$.body.id>`,
	// `<aws.pipes.pipe-name>`) or is as a whole a JSON path (`$.body.id`,
	// Pipes' dynamic path parameter) is rendered per request against its
	// record (with Batch, the batch's first record), as the http target
	// does; such a value is not treated as a secret.
	Headers map[string]string
	// Query parameters are added to the URL of every request; values may
	// be templated as header values are. Constant values are secrets.
	Query map[string]string
	// PathParameters fill the `*` of URL, one each, in order (Pipes'
	// PathParameterValues), and may be templated as header values are.
	// When any is given the URL must have exactly as many `*`. The URL's
	// own path and query may hold placeholders too.
	PathParameters []string
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
	// Sign, when set, signs each request (AWS SigV4 for API Gateway:
	// awsclient.RequestSigner); see httpcore.Config.Sign.
	Sign func(ctx context.Context, r *http.Request, payloadHash string) error
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
	core  *httpcore.Client
	dyn   *httpcore.Dynamic
	batch bool
	log   *slog.Logger
	tmpl  *template.Template
	vars  template.Vars
	// contentType is sent unless a header sets one.
	contentType string
}

var (
	_ pipe.Enricher = (*HTTP)(nil)
)

// NewHTTP checks cfg and returns the enrichment. It does not connect.
// Errors name the field at fault and never contain a header value.
func NewHTTP(cfg HTTPConfig) (*HTTP, error) {
	dyn, st, err := httpcore.NewDynamic(httpcore.DynamicConfig{
		URL: cfg.URL, PathParameters: cfg.PathParameters, Query: cfg.Query, Headers: cfg.Headers, Vars: cfg.Vars,
	})
	if err != nil {
		return nil, fmt.Errorf("configuring the http enrichment: %w", err)
	}
	core, err := httpcore.New(httpcore.Config{
		URL:                st.URL,
		Method:             cfg.Method,
		UserAgent:          "pipes-enrichment",
		Headers:            st.Headers,
		Secrets:            st.Secrets,
		SecretURL:          st.SecretURL,
		Timeout:            cfg.Timeout,
		InsecureSkipVerify: cfg.InsecureSkipVerify,
		Client:             cfg.Client,
		Sign:               cfg.Sign,
	})
	if err != nil {
		return nil, fmt.Errorf("configuring the http enrichment: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.InsecureSkipVerify && cfg.Client == nil {
		log.Warn("TLS verification is off for the http enrichment", "url", core.Display())
	}
	h := &HTTP{core: core, dyn: dyn, batch: cfg.Batch, log: log, tmpl: cfg.Template, vars: cfg.Vars, contentType: httpcore.ContentText}
	if cfg.Batch || cfg.Template == nil || cfg.Template.Kind() == template.KindJSON {
		h.contentType = httpcore.ContentJSON
	}
	return h, nil
}

// Close releases idle connections. It does not block and never fails.
func (h *HTTP) Close(context.Context) error {
	h.core.Close()
	return nil
}

// Enrich sends the events and returns what the target gets. With Batch, a
// failed request or a malformed answer fails the whole batch (the error);
// without, one event's failure fails its message alone (the Result). No
// error it returns, in the Result or not, holds a header value, the
// credentials in one, or the URL's userinfo or query values, even when the
// endpoint echoes them: they read "[redacted]".
func (h *HTTP) Enrich(ctx context.Context, events []*pipe.Event) ([]*pipe.Event, pipe.Result, error) {
	out, res, err := h.enrich(ctx, events)
	secrets := h.core.Secrets()
	for i := range res.Failures {
		res.Failures[i].Err = secrets.Error(res.Failures[i].Err)
	}
	return out, res, secrets.Error(err)
}

func (h *HTTP) enrich(ctx context.Context, events []*pipe.Event) ([]*pipe.Event, pipe.Result, error) {
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
		// The dynamic parameters of a batch call come from its first
		// record, as the http target's do (invokeFunc).
		out, more, err = enrichBatch(ctx, sent, bodies, h.invoke, func(n int) {
			h.log.DebugContext(ctx, "enrichment answer does not map to the batch; invoking once per event", "url", h.core.Display(), "events", n)
		})
		if err != nil {
			return nil, pipe.Result{}, fmt.Errorf("enriching %d events with %s: %w", len(sent), h.core.Display(), err)
		}
	} else {
		out, more, err = eachEvent(ctx, sent, func(ctx context.Context, i int) (mapping, error) {
			answer, err := h.invoke(ctx, sent[i], bodies[i])
			if err != nil {
				return mapping{}, fmt.Errorf("enriching message %s with %s: %w", sent[i].ID(), h.core.Display(), err)
			}
			m, err := readAnswer(sent[i:i+1], answer, true)
			if err != nil {
				return mapping{}, fmt.Errorf("enriching message %s with %s: %w", sent[i].ID(), h.core.Display(), err)
			}
			return m, nil
		})
		if err != nil {
			return nil, pipe.Result{}, fmt.Errorf("enriching with %s: %w", h.core.Display(), err)
		}
	}
	res.Failures = append(res.Failures, more.Failures...)
	return out, res, nil
}

// invoke makes one request, its dynamic parameters rendered from ev, and
// classifies its outcome (httpcore.Client.Do); it returns a 2xx answer's
// body.
func (h *HTTP) invoke(ctx context.Context, ev *pipe.Event, body []byte) ([]byte, error) {
	req := &httpcore.Request{Body: body, ContentType: h.contentType, ReadAnswer: true}
	if !h.dyn.Empty() {
		var err error
		if req.URL, req.Header, err = h.dyn.Render(h.core.URL(), ev); err != nil {
			return nil, pipe.Permanent(err)
		}
	}
	_, answer, err := h.core.Do(ctx, req)
	return answer, err
}
