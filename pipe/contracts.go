package pipe

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/pipesproject/pipes/internal/jsonvalue"
	"github.com/pipesproject/pipes/source"
)

// Event is one item on its way through a pipe: the message it came from and
// the payload the next stage gets. Filters, templates and jq share its
// decoded body, so a record's JSON is parsed at most once.
type Event struct {
	// Message is the source message this event came from; its MessageID is
	// the item identifier of partial batch answers.
	Message *source.Message
	// RecordJSON is what the target receives for this item: by default the
	// record's JSON. An input template or enrichment replaces it.
	RecordJSON []byte
	// Attributes are message attributes that targets which send messages
	// (sqs, sns) attach to what they send, besides any of their own. The
	// dead-letter stage puts the failure context here (ErrorCode,
	// ErrorMessage, pipes-stage, …). Nil for ordinary events.
	Attributes map[string]source.MessageAttribute

	bodyOnce sync.Once
	body     any
	bodyJSON bool

	// vouched is the payload known to be valid JSON (see VouchJSON): its
	// first byte and its length.
	vouched    *byte
	vouchedLen int
	// lazy: the payload is the message's record, not encoded yet (see
	// PayloadAppender); RecordJSON stays nil until a stage sets one.
	lazy bool
}

// VouchJSON records that p, a payload the caller built and knows to be
// valid JSON (a record's JSON, a JSON-kind template's output), is valid
// JSON, so that targets do not check it again (see PayloadIsJSON). It
// vouches for that slice only: once RecordJSON is another slice, it is
// checked again. The caller must not change p's bytes afterwards. It does
// not block; it is not safe for concurrent use with PayloadIsJSON: stages
// call it on the event they are handling.
func (e *Event) VouchJSON(p []byte) {
	if len(p) == 0 {
		return
	}
	e.vouched, e.vouchedLen = &p[0], len(p)
}

// PayloadIsJSON reports whether RecordJSON is known to be valid JSON without
// looking at it: it is the slice last given to VouchJSON (NewEvent vouches
// for the record's JSON). False means not known, not invalid. It does not
// block and does not read the payload.
func (e *Event) PayloadIsJSON() bool {
	if e.lazy && e.RecordJSON == nil {
		return true // the record, to be encoded
	}
	return len(e.RecordJSON) > 0 && &e.RecordJSON[0] == e.vouched && len(e.RecordJSON) == e.vouchedLen
}

// ID is the item identifier: the source message's id.
func (e *Event) ID() string { return e.Message.MessageID }

// Body returns the message body decoded as JSON and true when it is valid
// JSON, or the raw string and false otherwise (the Pipes rule for SQS). The
// value is decoded once and shared; callers must not modify it.
func (e *Event) Body() (any, bool) {
	e.bodyOnce.Do(func() {
		if v, ok := jsonvalue.Decode(e.Message.Body, false); ok {
			e.body, e.bodyJSON = v, true
			return
		}
		e.body = e.Message.Body
	})
	return e.body, e.bodyJSON
}

// SetBody records an already decoded body, so that Body does not decode it
// again; a filter that decodes the body its own way calls it once.
func (e *Event) SetBody(v any, isJSON bool) {
	e.bodyOnce.Do(func() { e.body, e.bodyJSON = v, isJSON })
}

// NewEvent makes the event of a message with the record's JSON as payload.
func NewEvent(m *source.Message) (*Event, error) {
	b, err := m.JSON()
	if err != nil {
		return nil, fmt.Errorf("encoding record %s: %w", m.MessageID, err)
	}
	ev := &Event{Message: m, RecordJSON: b}
	ev.VouchJSON(b) // Message.JSON's output is valid JSON, or an error
	return ev, nil
}

// Target receives batches of events. Deliver blocks until the target has
// answered or ctx is done; it must be safe for concurrent use, since a pipe
// has many batches in flight. It never settles messages: the pipe does.
//
// A nil error with an empty Result means every event succeeded. A Result
// naming items fails just those. A non-nil error fails the whole batch; wrap
// it with Permanent or Throttled to say what kind of failure it is.
//
// A Target (or Enricher) that holds resources has a method
// Close(ctx context.Context) error: the pipe calls it once, when Run has
// settled everything, as it closes a source.Closer.
type Target interface {
	Deliver(ctx context.Context, events []*Event) (Result, error)
}

// TargetFunc adapts a function to a Target.
type TargetFunc func(ctx context.Context, events []*Event) (Result, error)

// Deliver calls f.
func (f TargetFunc) Deliver(ctx context.Context, events []*Event) (Result, error) {
	return f(ctx, events)
}

// Result is a stage's answer for a batch: the items that failed, by message
// id. Items not named succeeded.
type Result struct {
	Failures []ItemFailure
}

// ItemFailure names one failed item and why it failed. What becomes of
// the item is the error's to say:
//
//   - a plain error (or none): the item is retried by the source's rules
//     (retry_backoff, else when its lease ends), and dead-lettered when
//     its receives run out;
//   - Permanent(err): dead-letter it now, without another try;
//   - RetryAfter > 0 with a retryable error: try it again after that
//     long (a downstream's Retry-After) rather than by retry_backoff.
type ItemFailure struct {
	// ID is the message id of the failed item.
	ID string
	// Err says why; it may be nil when the target gave no reason.
	Err error
	// RetryAfter, when positive, is how long the item should wait before
	// it is delivered again: the pipe gives its message back with that
	// delay (SQS: ChangeMessageVisibility; RabbitMQ: its delayed retry;
	// the memory queue: hidden that long), in place of retry_backoff. It
	// counts as a failed try like any other, and means nothing for a
	// Permanent error. SQS caps a delay at 12 hours.
	RetryAfter time.Duration
}

// Fail returns a Result failing the given ids with the same reason.
func Fail(err error, ids ...string) Result {
	r := Result{Failures: make([]ItemFailure, len(ids))}
	for i, id := range ids {
		r.Failures[i] = ItemFailure{ID: id, Err: err}
	}
	return r
}

// Filter decides whether an event goes on. Match must be safe for
// concurrent use. An error fails that event alone (not the batch).
type Filter interface {
	Match(ctx context.Context, ev *Event) (bool, error)
}

// FilterFunc adapts a function to a Filter.
type FilterFunc func(ctx context.Context, ev *Event) (bool, error)

// Match calls f.
func (f FilterFunc) Match(ctx context.Context, ev *Event) (bool, error) { return f(ctx, ev) }

// Transformer rewrites an event's payload (an input template). It must be
// safe for concurrent use; an error fails that event alone.
type Transformer interface {
	Transform(ctx context.Context, ev *Event) ([]byte, error)
}

// Enricher is a pipe's enrichment stage (Pipes' enrichment, always
// synchronous). It gets the events that passed the filter and returns the
// events the target gets: it may rewrite their payloads, drop events, or
// turn one event into several. Every returned event must keep the Message
// it came from, so outcomes map back to source messages: a message whose
// events are all dropped counts as done (deleted, like a filtered one); a
// message with several events succeeds only when all of them do.
//
// The Result names messages the enrichment failed (they are not handed
// on); a non-nil error fails the whole batch. Enrich must be safe for
// concurrent use and must not settle messages.
type Enricher interface {
	Enrich(ctx context.Context, events []*Event) ([]*Event, Result, error)
}
