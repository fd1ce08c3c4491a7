// Package source is what a queue must do for a pipe to poll it: the
// Source contract, its optional abilities, and the Message a source
// receives, whose JSON is the record a target gets. The runtime that
// drives a Source is package pipe; the module's sources are source/sqs,
// source/rabbitmq and source/memory, and source/sourcetest is the
// contract suite a Source of your own should pass.
package source

import (
	"context"
	"time"
)

// Source is a queue a pipe polls and settles, in the broker-neutral verbs
// of a delivery (see delivery): Ack and Nak here, InProgress and Term as
// the optional abilities Extender and Terminator. The pipe's settler is the
// only caller of the settling methods: a source never acks or gives back
// on its own.
//
// The settling methods take many messages per call (the settler gathers
// them, at most 10 per call for acks, SQS's batch limit). A message whose entry
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
	Open(ctx context.Context) (Info, error)
}

// Closer is a Source that holds resources to release once the
// pipe has stopped and settled everything.
type Closer interface {
	Close(ctx context.Context) error
}

// Info describes the queue behind a source, as read when it opens.
type Info struct {
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

// Deferrer is a Source that can give messages back, to be delivered again
// after a delay, without that delivery counting against them: no delivery
// limit or receive count is used up and nothing is dead-lettered. The pipe
// defers the messages of an outage (a batch whose target call failed whole
// with a retryable error) when its source is a Deferrer and not FIFO;
// otherwise it holds them itself, leased by the heartbeat, and retries
// them. RabbitMQ implements it so that an outage's messages wait outside
// the basic.qos window.
type Deferrer interface {
	// Defer gives msgs back, to come again after about delay with the
	// attempt count they had before this delivery. It returns once each
	// message is deferred or not: kept are those it did not defer and left
	// as they were (received, unsettled, still the caller's to settle);
	// err tells why, and of receipts it could not settle at all (a stale
	// receipt: the source redelivers that message).
	Defer(ctx context.Context, msgs []*Message, delay time.Duration) (kept []*Message, err error)
}

// DeferralTeller is a Deferrer that tells, of a message it delivered, when
// the pipe last deferred it (zero when never, or when a failure's retry
// came in between): a copy that fails whole again after the target
// answered a batch started since is bisected (see bisect).
type DeferralTeller interface {
	DeferredAt(m *Message) time.Time
}

// HoldLimiter is a Source whose received messages may stay unsettled only
// so long (RabbitMQ: the broker's consumer_timeout closes the channel over
// an unacked delivery, and redelivers it, counted). HoldUntil is when m
// must be settled at the latest; zero means no limit. The pipe gives back
// the outage messages it holds before then: deferred again when the source
// is a Deferrer, else released (Nak).
type HoldLimiter interface {
	HoldUntil(m *Message) time.Time
}
