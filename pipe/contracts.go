package pipe

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/pipesproject/pipes/internal/jsonvalue"
)

// Source is a queue a pipe polls and settles, in the broker-neutral verbs
// of a delivery (see delivery): Ack and Nak here, InProgress and Term as
// the optional abilities Extender and Terminator. The pipe's settler is the
// only caller of the settling methods: a source never acks or gives back
// on its own.
//
// The settling methods take many messages per call (the settler gathers
// them, at most MaxReceive per call for acks). A message whose entry
// failed is reported by a *SettleError keyed by its receipt handle; the
// others were settled. Any other error means nothing is known to have been
// settled.
//
// Implementations must be safe for concurrent use: the pipe calls Receive
// from several pollers and settles from several workers at once.
type Source interface {
	// Receive long-polls for up to max messages (1..10). It blocks until
	// messages arrive, the source's wait time passes (then it returns no
	// messages and a nil error), or ctx is done (then it returns ctx's error
	// and no messages: a cancelled receive must not swallow messages). An
	// error means nothing was received.
	Receive(ctx context.Context, max int) ([]*Message, error)
	// Ack settles the messages as done: they are removed for good (SQS:
	// DeleteMessageBatch; RabbitMQ: basic.ack). Entries that fail are
	// retried inside Ack; those that still fail are reported by a
	// *SettleError.
	Ack(ctx context.Context, msgs []*Message) error
	// Nak gives the messages back to be delivered again after delay: 0 at
	// once (SQS: visibility 0; RabbitMQ: reject with requeue), more later
	// (SQS: visibility delay; RabbitMQ: held or re-published after delay).
	// Failures are reported like Ack's; a message whose Nak failed comes
	// back when its current lease ends.
	Nak(ctx context.Context, msgs []*Message, delay time.Duration) error
}

// Extender is a Source whose deliveries are leases that end on their own
// (SQS's visibility timeout): InProgress extends them. The settler's
// heartbeat calls Extend for messages still being worked on, never after
// their final verb. Failures are reported like Ack's.
type Extender interface {
	Extend(ctx context.Context, msgs []*Message, d time.Duration) error
}

// Terminator is a Source with dead-lettering of its own (RabbitMQ: nack
// without requeue to the queue's dead-letter exchange). The settler uses
// it for Term when the pipe has no dead_letter target. Failures are
// reported like Ack's.
type Terminator interface {
	Term(ctx context.Context, msgs []*Message) error
}

// CancelSafe is a Source whose Receive may be cancelled without taking a
// message it does not return (RabbitMQ and memory: what arrives waits in
// the source). A pipe cancels such receives at once when it stops; an SQS
// long poll, which a server may still hand a message after the client gave
// up, is waited for instead.
type CancelSafe interface {
	ReceiveIsCancelSafe()
}

// AttemptCounter is a Source that knows better than ApproximateReceiveCount
// how often a message was delivered (RabbitMQ's x-delivery-count or
// x-death). Without it the attempt count is Message.ReceiveCount.
type AttemptCounter interface {
	Attempts(m *Message) int
}

// AckObserver is a Source that acts once messages are deleted for good:
// the SQS source deletes their offloaded S3 payloads (`delete_payloads`).
// The settler calls Acked after each Ack call with the messages whose
// delete succeeded; never with one whose delete failed, nor with one sent
// to the pipe's dead-letter target (its copy there still points at the
// payload). The messages are settled already: Acked cannot fail them. It
// blocks a settler worker: it should return within ctx's deadline, and it
// must be safe for concurrent use (several workers ack at once).
type AckObserver interface {
	Acked(ctx context.Context, msgs []*Message)
}

// Opener is a Source that must be opened before its first Receive, e.g. to
// resolve its queue and read its attributes. Open is called once.
type Opener interface {
	Open(ctx context.Context) (SourceInfo, error)
}

// Closer is a Source or Target that holds resources to release once the
// pipe has stopped and settled everything.
type Closer interface {
	Close(ctx context.Context) error
}

// SourceInfo describes the queue behind a source, as read when it opens.
type SourceInfo struct {
	// ARN identifies the queue in records and logs.
	ARN string
	// FIFO is true for queues that keep order per message group.
	FIFO bool
	// VisibilityTimeout is how long a receive hides a message.
	VisibilityTimeout time.Duration
	// MaxReceiveCount is the redrive policy's maxReceiveCount, 0 without one.
	MaxReceiveCount int
	// DeadLetterARN is the redrive policy's dead-letter queue, "" without one.
	DeadLetterARN string
	// OwnAdvice is true when the source logs its own advice on how its
	// queue dead-letters (RabbitMQ: its dead-letter exchange and delivery
	// limit) and deliveries are no leases that a crash waits out: the
	// pipe then gives none of the AWS advice on redrive policies and
	// visibility timeouts.
	OwnAdvice bool
	// InProcess is true for a queue that lives in the process (the memory
	// source): a crash loses it, so the pipe gives no advice on its
	// visibility timeout, and it warns of a missing redrive policy at the
	// first failed message rather than at start.
	InProcess bool
}

// Event is one item on its way through a pipe: the message it came from and
// the payload the next stage gets. Filters, templates and jq share its
// decoded body, so a record's JSON is parsed at most once.
type Event struct {
	// Message is the source message this event came from; its MessageID is
	// the item identifier of partial batch answers.
	Message *Message
	// RecordJSON is what the target receives for this item: by default the
	// record's JSON. An input template or enrichment replaces it.
	RecordJSON []byte
	// Attributes are message attributes that targets which send messages
	// (sqs, sns) attach to what they send, besides any of their own. The
	// dead-letter stage puts the failure context here (ErrorCode,
	// ErrorMessage, pipes-stage, …). Nil for ordinary events.
	Attributes map[string]MessageAttribute

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
func NewEvent(m *Message) (*Event, error) {
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
