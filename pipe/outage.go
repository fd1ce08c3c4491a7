package pipe

import (
	"time"

	"github.com/pipesproject/pipes/internal/backoff"
	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/source"
)

// outageRetry is the wait of a held or deferred outage batch before it
// goes again, by the whole failures in a row (of the pipe while the
// circuit is closed, of the batch while it is held): about 1 s, doubling,
// equal jitter, up to the breaker's longest probe interval.
var outageRetry = backoff.Exponential{Base: breakerProbeMin, Max: breakerProbeMax, Jitter: backoff.Equal}

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
	ds    []*delivery
	at    time.Time // when it may go again while the circuit is closed
	tries int       // its whole failures in a row
	// failedAt is when its first failed attempt started, or for a half
	// when it was split off: a batch the target answered that started
	// after it shows that the target works, so that a whole failure again
	// is in the batch (bisect).
	failedAt time.Time
	// rest (FIFO, one group) are the messages after ds in their group,
	// held with it: they go once ds is done (bisecting in order).
	rest []*delivery
	// until is when the first of them must be given back (HoldLimiter:
	// RabbitMQ's consumer_timeout); zero: no limit.
	until time.Time
	// half: split off by bisect (or what follows such a part in its FIFO
	// group). Its whole failures do not count towards the breaker: they
	// tell of the batch it came from, whose own failures counted, and its
	// sibling, sent at the same moment, may not have been answered yet.
	// Counted, a poison's halves opened the circuit before the siblings'
	// answers came, and with no other traffic no probe closed it again.
	half bool
}

// holdLocked keeps outage deliveries in the pipe to go again after the
// backoff of tries. p.mu is held.
func (p *Pipe) holdLocked(ds []*delivery, tries int, failedAt time.Time, rest []*delivery, half bool) {
	if len(ds) == 0 {
		return
	}
	p.keepLocked(heldBatch{ds: ds, at: time.Now().Add(outageRetry.Delay(tries)), tries: tries, failedAt: failedAt, rest: rest, half: half})
}

// keepLocked holds h. p.mu is held.
func (p *Pipe) keepLocked(h heldBatch) {
	if hl, ok := p.opt.Source.(source.HoldLimiter); ok {
		for _, ds := range [][]*delivery{h.ds, h.rest} {
			for _, d := range ds {
				if u := hl.HoldUntil(d.Message); !u.IsZero() && (h.until.IsZero() || u.Before(h.until)) {
					h.until = u
				}
			}
		}
	}
	p.held.add(h)
}

// undeferred holds the deliveries a Deferrer kept (it could not defer
// them): the pipe retries them itself; when stopping they are released,
// and so are those at their HoldLimiter's limit (it was a last try).
func (p *Pipe) undeferred(ds []*delivery) {
	var back []*delivery
	if hl, ok := p.opt.Source.(source.HoldLimiter); ok {
		now := time.Now()
		kept := ds[:0:0]
		for _, d := range ds {
			if u := hl.HoldUntil(d.Message); !u.IsZero() && !now.Before(u) {
				back = append(back, d)
			} else {
				kept = append(kept, d)
			}
		}
		ds = kept
	}
	p.mu.Lock()
	if p.stopping {
		p.mu.Unlock()
		p.giveBack(append(back, ds...))
		return
	}
	p.holdLocked(ds, max(p.circuit.streak, 1), time.Now(), nil, false)
	p.mu.Unlock()
	p.giveBack(back)
	p.signal()
}

// expireHeld gives back the held batches at their HoldLimiter's limit,
// before the source must have them (RabbitMQ: before the consumer timeout
// closes the channel over them and the broker redelivers them, counted):
// deferred when the source is a Deferrer (not FIFO, not a dry run) — what
// it cannot defer comes back to undeferred, which releases it — else
// released (Nak: on RabbitMQ a requeue). It returns when the next limit
// is, zero when none.
func (p *Pipe) expireHeld(now time.Time) (next time.Time) {
	var items []settle
	p.mu.Lock()
	defer_ := p.set.def != nil && !p.info.FIFO && !p.opt.DryRun && !p.stopping
	delay := p.circuit.deferFor(time.Now(), outageRetry.Delay(1))
	expired, next := p.held.takeExpired(now)
	for _, h := range expired {
		ds := append(append([]*delivery(nil), h.ds...), h.rest...)
		groups := map[string]bool{}
		for _, d := range ds {
			if defer_ {
				items = append(items, settle{d: d, v: verbDefer, delay: delay})
			} else {
				items = append(items, settle{d: d, v: verbNak})
			}
			groups[d.Message.GroupID()] = true
		}
		if p.info.FIFO { // the group is free again; what waits of it goes back too
			for _, d := range p.batches.done(ds, groups) {
				items = append(items, settle{d: d, v: verbNak})
			}
		}
	}
	p.mu.Unlock()
	if len(items) > 0 {
		p.log.Warn("outage messages held by the pipe reached the source's limit (RabbitMQ: the consumer timeout): they are given back",
			"messages", len(items), "deferred", defer_)
		p.set.finalMany(items)
	}
	return next
}

// maxConvictions bounds the message ids a pipe remembers as failing whole
// on their own while the target works.
const maxConvictions = 1024

// convictions is a bounded set of message ids; the oldest is forgotten
// first.
type convictions struct {
	ids  map[string]struct{}
	ring []string
	next int
}

func (c *convictions) add(id string) {
	if _, ok := c.ids[id]; ok {
		return
	}
	if c.ids == nil {
		c.ids = map[string]struct{}{}
	}
	if len(c.ring) < maxConvictions {
		c.ring = append(c.ring, id)
	} else {
		delete(c.ids, c.ring[c.next])
		c.ring[c.next] = id
		c.next = (c.next + 1) % maxConvictions
	}
	c.ids[id] = struct{}{}
}

func (c *convictions) has(id string) bool {
	_, ok := c.ids[id]
	return ok
}

// bisect decides, for a batch whose target call failed whole (every
// message that reached it an outage), whether that says something of the
// batch rather than of the target — the adaptation of Lambda's
// BisectBatchOnFunctionError. While the circuit is closed:
//
//   - a message convicted before (it failed whole on its own while the
//     target worked), in a pipe whose last batches the target answered
//     (no outage batch since), is judged: its failure is a verdict;
//   - a held batch that fails whole again is split (split): halves are
//     harmless, they count nothing, and one that goes through shows
//     whether the target works;
//   - a held batch, or from a DeferralTeller one with a copy deferred
//     before, that fails whole after the target answered a batch started
//     since its last failure (evidence: the target works, something in
//     the batch does not) is split too; a single message is judged
//     instead, and convicted.
//
// Judged messages lose their outage mark (v[i].judged): they fail as a
// named item failure would. It reports whether anything was judged, and
// whether there was evidence that the target works.
func (p *Pipe) bisect(batch []*delivery, v []verdict, h *heldBatch) (split, judged, evidence bool) {
	n := 0
	for i := range v {
		switch {
		case v[i].outage:
			n++
		case v[i].outcome == outSucceeded, v[i].outcome == outFailedRetry && v[i].stage == "target" && !core.IsBatchFailure(v[i].err):
			return false, false, false // the target answered this batch
		}
	}
	if n == 0 {
		return false, false, false
	}
	p.mu.Lock()
	c := &p.circuit
	if c.open || p.stopping {
		p.mu.Unlock()
		return false, false, false
	}
	works := c.answeredStart
	if c.streak == 0 {
		for i := range v {
			if v[i].outage && p.convicted.has(batch[i].Message.MessageID) {
				v[i].outage, v[i].judged = false, true
				n--
				judged = true
			}
		}
	}
	p.mu.Unlock()
	if n == 0 {
		return false, judged, false
	}
	evidence = h != nil && works.After(h.failedAt)
	if dt, ok := p.opt.Source.(source.DeferralTeller); ok && !evidence && p.set.def != nil {
		for i := range v {
			if !v[i].outage {
				continue
			}
			if at := dt.DeferredAt(batch[i].Message); !at.IsZero() && works.After(at) {
				evidence = true
				break
			}
		}
	}
	if n > 1 && (evidence || h != nil) {
		return true, judged, evidence
	}
	if !evidence {
		return false, judged, false
	}
	for i := range v {
		if v[i].outage {
			v[i].outage, v[i].judged = false, true
			p.mu.Lock()
			p.convicted.add(batch[i].Message.MessageID)
			p.mu.Unlock()
		}
	}
	return false, true, true
}

// splitLocked holds the two halves of an outage batch that failed whole
// in a target that works, to go again at once, each as its own batch,
// their backoff started afresh. Their last failure counts as now: a batch
// the target answers that starts after (the other half) tells that the
// target works. A FIFO batch is split between its groups; one of a single
// group is split in order: the second half (and rest, what follows in the
// group) waits, held, until the first is done. p.mu is held.
func (p *Pipe) splitLocked(ds []*delivery, rest []*delivery) {
	now := time.Now()
	half := func(part, rest []*delivery) {
		p.keepLocked(heldBatch{ds: part, at: now, failedAt: now, rest: rest, half: true})
	}
	if !p.info.FIFO {
		m := len(ds) / 2
		half(ds[:m:m], nil)
		half(ds[m:], nil)
		return
	}
	var order []string
	seen := map[string]bool{}
	for _, d := range ds {
		if g := d.Message.GroupID(); !seen[g] {
			seen[g] = true
			order = append(order, g)
		}
	}
	if len(order) > 1 {
		first := map[string]bool{}
		for _, g := range order[:len(order)/2] {
			first[g] = true
		}
		var a, b []*delivery
		for _, d := range ds {
			if first[d.Message.GroupID()] {
				a = append(a, d)
			} else {
				b = append(b, d)
			}
		}
		half(a, nil) // rest is only ever of a single-group batch
		half(b, rest)
		return
	}
	m := len(ds) / 2
	after := make([]*delivery, 0, len(ds)-m+len(rest))
	after = append(append(after, ds[m:]...), rest...)
	half(ds[:m:m], after)
}
