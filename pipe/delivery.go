package pipe

import (
	"errors"
	"time"

	"github.com/pipesproject/pipes/source"
)

// errSettled is returned by a delivery's final verb when the delivery was
// settled already. The second verb is counted (double_settles_total) and
// logged, never applied.
var errSettled = errors.New("delivery already settled")

// verb is what a delivery's final settle does.
type verb uint8

const (
	verbNone verb = iota
	// verbAck: done; the source removes the message.
	verbAck
	// verbNak: give back after delay (0: now).
	verbNak
	// verbRetry: give back when the current lease ends (SQS: no call; the
	// visibility timeout it has brings it back). On a source without
	// leases it is a Nak after the pipe's visibility.
	verbRetry
	// verbTerm: give up: the pipe's dead-letter target, else the source's
	// own dead-lettering, else verbRetry (the queue's redrive policy).
	verbTerm
	// verbDefer: an outage's message, given back uncounted after delay
	// (Deferrer); what the source keeps goes back to the pipe's hold.
	verbDefer
)

func (v verb) String() string {
	switch v {
	case verbAck:
		return "ack"
	case verbNak:
		return "nak"
	case verbRetry:
		return "retry"
	case verbTerm:
		return "term"
	case verbDefer:
		return "defer"
	}
	return "none"
}

// delivery is the handle of one received message: the runtime settles it
// exactly once with a final verb (Ack, Nak, NakWithDelay, Term), and
// InProgress extends its lease until then. Verbs do not block: they hand
// the work to the pipe's settler, which batches calls to the source and
// orders every call of one receipt (a late extension never undoes a
// settle). A second final verb returns errSettled and is not applied.
//
// Deliveries belong to the pipe that received them; they are safe for
// concurrent use.
type delivery struct {
	// Message is the received message.
	Message *source.Message

	s          *settler
	size       int // bytes held in the budget
	recordSize int // bytes of the record's JSON: what the 6 MB limit counts
	receivedAt time.Time

	// Guarded by s.mu.
	leaseEnd  time.Time // when the source would hand the message out again
	final     verb
	delay     time.Duration
	reason    error
	extending bool // an Extend call for it is under way
	deferred  bool // the final verb waits for that call to return
	settled   bool
	stale     bool // the source refused its receipt handle: never extended again
	capped    bool // reached the 12 h lease cap (logged once)
	attempts  int
	// deadLettered: sent to the pipe's dead-letter target, then acked; an
	// AckObserver is not told of its ack.
	deadLettered bool
}

// Ack settles the delivery as done: the source removes the message.
func (d *delivery) Ack() error { return d.s.final(d, verbAck, 0, nil) }

// Nak gives the message back at once, to be delivered again.
func (d *delivery) Nak() error { return d.s.final(d, verbNak, 0, nil) }

// NakWithDelay gives the message back to be delivered again after delay
// (SQS: visibility delay, clamped under the 12 h cap).
func (d *delivery) NakWithDelay(delay time.Duration) error {
	return d.s.final(d, verbNak, max(delay, 0), nil)
}

// Term gives up on the message: the pipe's dead-letter target gets it with
// reason as its failure context (then it is acked), or the source's own
// dead-lettering, or, with neither, it is left to the queue's redrive
// policy like a failed message.
func (d *delivery) Term(reason error) error { return d.s.final(d, verbTerm, 0, reason) }

// InProgress asks the settler to extend the delivery's lease now rather
// than at its next heartbeat. It does nothing on sources without leases
// and after a final verb.
func (d *delivery) InProgress() { d.s.touch(d) }

// NumDelivered is how many times the message was delivered, this time
// included: the source's AttemptCounter, else ApproximateReceiveCount.
func (d *delivery) NumDelivered() int {
	if d.attempts > 0 {
		return d.attempts
	}
	return max(1, d.Message.ReceiveCount())
}
