package pipe

import (
	"context"
	"errors"
	"time"

	"github.com/pipesproject/pipes/internal/backoff"
)

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

// outageRetry is the wait of a held or deferred outage batch before it
// goes again, by the whole failures in a row (of the pipe while the
// circuit is closed, of the batch while it is held): about 1 s, doubling,
// equal jitter, up to the breaker's longest probe interval.
var outageRetry = backoff.Exponential{Base: breakerProbeMin, Max: breakerProbeMax, Jitter: backoff.Equal}

type batchFailure struct{ err error }

func (e *batchFailure) Error() string { return e.err.Error() }
func (e *batchFailure) Unwrap() error { return e.err }

// BatchFailure marks err as the failure of a whole target call: every item
// of the call failed with it. A target wrapper that hands such a failure
// back per item (the retry wrapper, once its attempts ran out) marks it,
// so that the pipe takes it for an outage, not for a verdict on each item.
func BatchFailure(err error) error {
	if err == nil || IsBatchFailure(err) {
		return err
	}
	return &batchFailure{err: err}
}

// IsBatchFailure reports whether err, or an error it wraps, was marked
// BatchFailure.
func IsBatchFailure(err error) bool {
	var b *batchFailure
	return errors.As(err, &b)
}

// targetState is what a finished batch tells of the target.
type targetState uint8

const (
	// targetUnknown: the batch made no call (all filtered, failed before).
	targetUnknown targetState = iota
	// targetAnswered: the target took the call, in whole or in part, or
	// answered a client error: it works.
	targetAnswered
	// targetDown: every message that reached the call failed with a
	// retryable whole-call failure (an outage).
	targetDown
)

// heldBatch is a batch of outage messages the pipe holds (leased by the
// heartbeat, no receive spent) until it goes again.
type heldBatch struct {
	ds    []*Delivery
	at    time.Time // when it may go again while the circuit is closed
	tries int       // its whole failures in a row
}

// holdLocked keeps outage deliveries in the pipe to go again after the
// backoff of tries. p.mu is held.
func (p *Pipe) holdLocked(ds []*Delivery, tries int) {
	if len(ds) == 0 {
		return
	}
	c := &p.circuit
	c.held = append(c.held, heldBatch{ds: ds, at: time.Now().Add(outageRetry.Delay(tries)), tries: tries})
	c.heldN += len(ds)
}

// takeHeldLocked takes held batch i. p.mu is held.
func (p *Pipe) takeHeldLocked(i int) heldBatch {
	c := &p.circuit
	h := c.held[i]
	c.held = append(c.held[:i:i], c.held[i+1:]...)
	c.heldN -= len(h.ds)
	return h
}

// dueHeldLocked is the index of the held batch due first at now, or -1;
// next is when the first one not due is. p.mu is held.
func (p *Pipe) dueHeldLocked(now time.Time) (due int, next time.Time) {
	due = -1
	for i, h := range p.circuit.held {
		if !h.at.After(now) {
			if due < 0 || h.at.Before(p.circuit.held[due].at) {
				due = i
			}
			continue
		}
		if next.IsZero() || h.at.Before(next) {
			next = h.at
		}
	}
	return due, next
}

// undeferred holds the deliveries a Deferrer kept (it could not defer
// them): the pipe retries them itself; when stopping they are released.
func (p *Pipe) undeferred(ds []*Delivery) {
	p.mu.Lock()
	if p.stopping {
		p.mu.Unlock()
		p.giveBack(ds)
		return
	}
	p.holdLocked(ds, max(p.circuit.streak, 1))
	p.mu.Unlock()
	p.signal()
}
