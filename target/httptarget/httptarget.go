// Package httptarget is the `http` target of pipes: it sends a batch of
// events to an HTTP endpoint, either as one JSON array per batch (whose answer
// may name failed items with a Lambda-style batchItemFailures list) or as one
// request per event.
//
// Status codes are classified by the client core this target shares with
// the http enrichment (internal/kit/httpcore): 2xx succeeds; 429 is throttling
// (pipe.Throttled); 408, 5xx, timeouts and connection errors are retryable;
// other 4xx and 3xx (redirects are not followed) are client errors that
// retrying will not fix (pipe.Permanent).
package httptarget

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/internal/kit/batching"
	"github.com/pipesproject/pipes/internal/kit/httpcore"
	"github.com/pipesproject/pipes/internal/kit/partial"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/template"
)

const defaultMaxParallel = 16

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
	// they never appear in logs or errors, and neither does the part after
	// a scheme (`Bearer `, `Basic `, `Token `…): an answer echoing either
	// is quoted with "[redacted]" in its place. So are the URL's userinfo
	// and query values, and static Query values.
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
	// false; default 16. The events of a FIFO message group are sent one
	// at a time, in order, whatever MaxParallel is.
	MaxParallel int
	// Query parameters are added to the URL of every request. Their values,
	// like header values and the URL's path, may hold template placeholders
	// (`<$.body.id>`, `<aws.pipes.pipe-name>`): they are rendered per
	// request against its record (with Batch, the batch's first record), and
	// values placed in the URL are escaped. Header values with placeholders
	// are not treated as secrets.
	Query map[string]string
	// PathParameters fill the `*` of URL, one each, in order, as Pipes
	// fills an API destination's path wildcards (PathParameterValues):
	// each a constant, a bare JSON path (`$.body.id`) or text with
	// placeholders, rendered per request as the URL's placeholders are.
	// When any is given the URL must have exactly as many `*` (New fails
	// otherwise), which lets the URL come from a variable.
	PathParameters []string
	// Vars are the reserved template variables.
	Vars template.Vars
	// Sign, when set, signs each request (AWS SigV4 for API Gateway:
	// awsclient.RequestSigner); see httpcore.Config.Sign.
	Sign func(ctx context.Context, r *http.Request, payloadHash string) error
}

// HasPlaceholder reports whether s holds a Pipes template placeholder
// (`<$.path>` or a reserved `<aws.pipes.…>` variable), or is as a whole a
// valid JSON path (`$.body.tenant`, Pipes' dynamic path parameter): such a
// header or query value is rendered per request.
func HasPlaceholder(s string) bool { return httpcore.HasPlaceholder(s) }

// Target delivers batches to an HTTP endpoint. It is safe for concurrent
// use: a pipe calls Deliver from many batches at once, and they share one
// connection pool.
type Target struct {
	core        *httpcore.Client
	batch       bool
	maxParallel int
	dyn         *httpcore.Dynamic
}

var (
	_ pipe.Target              = (*Target)(nil)
	_ pipe.PayloadAppender     = (*Target)(nil)
	_ pipe.ConcurrencyFollower = (*Target)(nil)
)

// FollowConcurrency closes the target's idle connections when the pipe's
// concurrency has halved (httpcore.Client.FollowConcurrency). It does not
// block.
func (t *Target) FollowConcurrency(n int) { t.core.FollowConcurrency(n) }

// AppendsPayloads says that the target reads payloads only through
// pipe.Event's AppendPayload, PayloadLen and PayloadBytes: a batch's
// records are encoded into its request as it is sent.
func (t *Target) AppendsPayloads() {}

// New checks cfg and returns a target. It does not connect: an endpoint
// that is down is reported by Deliver. Errors name the field at fault and
// never contain a header value.
func New(cfg Config) (*Target, error) {
	var problems []error
	dyn, st, err := httpcore.NewDynamic(httpcore.DynamicConfig{
		URL: cfg.URL, PathParameters: cfg.PathParameters, Query: cfg.Query, Headers: cfg.Headers, Vars: cfg.Vars,
	})
	if err != nil {
		return nil, fmt.Errorf("configuring http target: %w", err)
	}
	core, err := httpcore.New(httpcore.Config{
		URL:                st.URL,
		Method:             cfg.Method,
		UserAgent:          "pipes",
		Headers:            st.Headers,
		Secrets:            st.Secrets,
		SecretURL:          st.SecretURL,
		Timeout:            cfg.Timeout,
		InsecureSkipVerify: cfg.InsecureSkipVerify,
		// Answers are partial batch answers, small: a 1 KB read buffer is
		// 3 KB less for each batch at the target (300 B a message).
		ReadBufferSize: 1 << 10,
		Client:         cfg.Client,
		Sign:           cfg.Sign,
	})
	if err != nil {
		problems = append(problems, err)
	}
	maxParallel := cfg.MaxParallel
	if maxParallel == 0 {
		maxParallel = defaultMaxParallel
	}
	if maxParallel < 0 {
		problems = append(problems, fmt.Errorf("max parallel %d is negative", cfg.MaxParallel))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("configuring http target: %w", errors.Join(problems...))
	}

	if cfg.InsecureSkipVerify && cfg.Client == nil {
		logger := cfg.Logger
		if logger == nil {
			logger = slog.New(slog.DiscardHandler)
		}
		logger.Warn("http target accepts any TLS certificate (insecure_skip_verify); use it for testing only", "url", core.Display())
	}
	return &Target{core: core, batch: cfg.Batch, maxParallel: maxParallel, dyn: dyn}, nil
}

// Close releases the target's idle connections. It does not wait for
// deliveries in flight; call it once the pipe has stopped.
func (t *Target) Close(ctx context.Context) error {
	t.core.Close()
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
// error classified the same way in its pipe.ItemFailure. Up to MaxParallel
// requests are in flight, but the events of one FIFO message group
// (Message.GroupID) are sent one after another in batch order, and once
// one fails the later ones of its group are not sent: they fail with a
// retryable error saying so. When every request sent was throttled,
// Deliver returns a whole-batch Throttled error instead, so that the pipe
// slows down; when every request sent failed retryably (5xx, 408, 429,
// timeouts, connection errors), a whole-batch retryable error (Throttled
// when one was throttled), so that the pipe takes it for an outage, no
// verdict on each record.
func (t *Target) Deliver(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
	if len(events) == 0 {
		return pipe.Result{}, nil
	}
	if t.batch {
		// sendBatch is called from here, and its answer read in a frame of
		// its own, so that the frames a batch waits for its answer in are
		// small (a parked goroutine's stack is halved only when a quarter
		// of it holds what is in use: issue 20).
		result, err := t.sendBatch(ctx, events)
		if err != nil {
			return pipe.Result{}, t.batchFailed(len(events), err)
		}
		return result, nil
	}
	return t.deliverEach(ctx, events)
}

// batchFailed is the error of a batch call that failed.
func (t *Target) batchFailed(n int, err error) error {
	err = fmt.Errorf("delivering %d events to %s %s: %w", n, t.core.Method(), t.core.Display(), err)
	return t.core.Secrets().Error(err)
}

func (t *Target) sendBatch(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
	// The records are encoded into the request as it is written. The
	// request lives with the array rather than in this frame, which stays
	// small under the wait for the answer.
	c := &batchCall{array: batching.NewArray(events)}
	c.req.BodyFunc, c.req.BodyLen = c.body, c.array.Len()
	c.req.ContentType, c.req.ReadAnswer = httpcore.ContentJSON, true
	status, answer, err := t.send(ctx, events[0], &c.req)
	return t.batchAnswer(events, status, answer, err)
}

// batchCall is the request of a batch and the array its body is read from.
type batchCall struct {
	array *batching.Array
	req   httpcore.Request
}

// body is a new reader of the array from its start.
func (c *batchCall) body() io.Reader { return c.array.Again() }

// batchAnswer reads the answer to a batch call.
func (t *Target) batchAnswer(events []*pipe.Event, status int, answer []byte, err error) (pipe.Result, error) {
	switch {
	case errors.Is(err, httpcore.ErrAnswerTooLarge):
		return pipe.Result{}, fmt.Errorf("answered %d: %w: larger than %d bytes", status, partial.ErrMalformedAnswer, httpcore.MaxAnswer)
	case err != nil:
		return pipe.Result{}, err
	}
	r, err := partial.ParseBatchResponse(answer, inBatch(events))
	if err != nil {
		// Quote the parser's reason, scrubbed: it may echo an identifier.
		reason := strings.TrimPrefix(err.Error(), partial.ErrMalformedAnswer.Error())
		reason = strings.TrimPrefix(reason, ": ")
		return pipe.Result{}, fmt.Errorf("answered %d: %w: %s; answer: %q", status, partial.ErrMalformedAnswer,
			t.core.Scrub(reason), t.core.Snippet(answer))
	}
	return r, nil
}

func (t *Target) deliverEach(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
	errs := make([]error, len(events))
	runs := inOrder(events)
	switch {
	case len(events) == 1 || t.maxParallel == 1:
		for i, ev := range events {
			if errs[i] != nil {
				continue // held back behind an earlier failure of its group
			}
			if errs[i] = t.sendOne(ctx, ev); errs[i] != nil && runs != nil {
				failRest(events, runs.after(i), i, errs)
			}
		}
	case runs == nil:
		// No message group: every event is sent on its own, in parallel.
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
	default:
		// A message group's events are one run, sent one after another in
		// batch order; runs go in parallel.
		sem := make(chan struct{}, t.maxParallel)
		var wg sync.WaitGroup
		for _, run := range runs.runs {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				for k, i := range run {
					if errs[i] = t.sendOne(ctx, events[i]); errs[i] != nil {
						failRest(events, run[k+1:], i, errs)
						return
					}
				}
			})
		}
		wg.Wait()
	}

	var result pipe.Result
	sent, throttled, retryable := 0, 0, 0
	var firstThrottled, firstRetryable error
	for i, err := range errs {
		if err == nil {
			sent++
			continue
		}
		if !errors.Is(err, errNotSent) {
			sent++
			if core.IsThrottled(err) {
				throttled++
				firstThrottled = cmp.Or(firstThrottled, err)
			}
			if !core.IsPermanent(err) {
				retryable++
				firstRetryable = cmp.Or(firstRetryable, err)
			}
		}
		// A 429 or 503 with a Retry-After asks for this item to wait.
		result.Failures = append(result.Failures, pipe.ItemFailure{ID: events[i].ID(), Err: err, RetryAfter: httpcore.RetryAfterOf(err)})
	}
	switch {
	case throttled > 0 && throttled == sent:
		// Every request sent was throttled (the others were held back
		// behind one of them in their message group).
		return pipe.Result{}, fmt.Errorf("delivering %d events one by one: all were throttled: %w", len(events), firstThrottled)
	case retryable > 0 && retryable == sent:
		// Every request sent failed retryably (5xx, 408, timeouts, refused
		// connections): the endpoint is down, not the records wrong. A
		// whole-batch error makes it an outage for the pipe, no verdict on
		// each record, as with Batch.
		err := fmt.Errorf("delivering %d events one by one: every request failed: %w", len(events), firstRetryable)
		if throttled > 0 {
			err = pipe.Throttled(err)
		}
		return pipe.Result{}, err
	}
	return result, nil
}

// errNotSent marks the failure of an event held back because an earlier
// event of its message group failed.
var errNotSent = errors.New("not sent")

// failRest fails the events rest (later events of the message group of
// events[failed], which failed) without sending them: on a FIFO queue a
// message may not be delivered before an earlier one of its group.
func failRest(events []*pipe.Event, rest []int, failed int, errs []error) {
	for _, j := range rest {
		errs[j] = fmt.Errorf("%w: an earlier message (%s) of message group %q failed in this batch",
			errNotSent, events[failed].ID(), events[failed].Message.GroupID())
	}
}

// groupRuns splits a batch into runs that must be sent one after another:
// the events of a message group, in batch order; an event without a group
// is a run of its own. Runs are ordered by their first event.
type groupRuns struct {
	runs [][]int
	of   []int // the run of each event
	pos  []int // each event's position in its run
}

// inOrder returns the runs of events, nil when no event has a message
// group (a standard queue): then order does not matter.
func inOrder(events []*pipe.Event) *groupRuns {
	grouped := false
	for _, ev := range events {
		if ev.Message.GroupID() != "" {
			grouped = true
			break
		}
	}
	if !grouped {
		return nil
	}
	r := &groupRuns{of: make([]int, len(events)), pos: make([]int, len(events))}
	byGroup := make(map[string]int)
	for i, ev := range events {
		g := ev.Message.GroupID()
		n, ok := byGroup[g]
		if !ok || g == "" {
			n = len(r.runs)
			r.runs = append(r.runs, nil)
			if g != "" {
				byGroup[g] = n
			}
		}
		r.of[i], r.pos[i] = n, len(r.runs[n])
		r.runs[n] = append(r.runs[n], i)
	}
	return r
}

// after returns the events of i's run that come after i.
func (r *groupRuns) after(i int) []int { return r.runs[r.of[i]][r.pos[i]+1:] }

// sendOne sends one event as its own request; nil means a 2xx answer.
func (t *Target) sendOne(ctx context.Context, ev *pipe.Event) error {
	payload := ev.PayloadBytes()
	req := &httpcore.Request{Body: payload, ContentType: httpcore.ContentText}
	if ev.PayloadIsJSON() || json.Valid(payload) {
		req.ContentType = httpcore.ContentJSON
	}
	if _, _, err := t.send(ctx, ev, req); err != nil {
		err = fmt.Errorf("delivering event %s to %s %s: %w", ev.ID(), t.core.Method(), t.core.Display(), err)
		return t.core.Secrets().Error(err)
	}
	return nil
}

// send makes the request req for ev (the record dynamic parameters come
// from) and classifies its outcome (httpcore.Client.Do).
func (t *Target) send(ctx context.Context, ev *pipe.Event, req *httpcore.Request) (int, []byte, error) {
	if !t.dyn.Empty() {
		var err error
		if req.URL, req.Header, err = t.dyn.Render(t.core.URL(), ev); err != nil {
			return 0, nil, pipe.Permanent(err)
		}
	}
	return t.core.Do(ctx, req)
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
