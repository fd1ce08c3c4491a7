package rabbitmq

import (
	"slices"
	"sync"
	"time"
)

// ackLinger is how long Ack holds back the acks of a batch that finished
// before an older one of the same channel: when the older batch settles
// meanwhile, one multiple ack settles both. At 16 batches in flight they
// finish out of order most of the time; without the linger each of those
// acks would be a frame (and a write) of its own.
const ackLinger = 10 * time.Millisecond

// ackLedger lets Ack settle a session's oldest deliveries with one
// basic.ack multiple instead of a frame (and a write) per message. A
// multiple ack of tag T settles every delivery of the channel up to T that
// is still unsettled, and the broker closes the channel when T itself was
// settled already; so one is sent only when every tag up to T was acked
// or settled another way, and T was not sent yet. The other paths (a
// nack, a reject, a copy's ack) report their tags after their broker call
// (settledElsewhere), so that they do not stop the floor. Delivery tags of
// the consuming channel count 1, 2, 3… (nothing else is delivered on it).
//
// Acks above an unsettled tag linger (ackLinger) as pending, unsent: the
// older tag settling sends them with its run; else the timer, the pending
// count reaching maxPending, or the end of the ledger (flush, before Close
// requeues anything) sends them one by one. A crash meanwhile means only
// redelivery (at-least-once).
//
// Acks are decided and sent under mu, in order: the broker closes the
// channel on a multiple ack whose tag was settled already, so a later
// decision must never reach it first.
type ackLedger struct {
	mu sync.Mutex
	// send is the consuming channel's basic.ack.
	send func(tag uint64, multiple bool) error
	// linger is how long acks above an unsettled tag wait (0: not at all).
	linger time.Duration
	// maxPending is how many acks may linger at once (they hold prefetch
	// slots meanwhile).
	maxPending int
	// floor is the highest tag such that every tag up to it is settled.
	floor uint64
	// settled are the tags over floor+1 settled: acked one by one, or
	// another way.
	settled map[uint64]struct{}
	// pending are the tags over floor+1 acked by Ack and not sent yet,
	// with when they were acked.
	pending map[uint64]time.Time
	// now is the clock (time.Now; tests set another).
	now func() time.Time
	// off is set once settled grew past maxAbove (the floor is stuck
	// below an unsettled message): then every ack goes at once, alone.
	off bool
	// done is set by flush and drop: acks go at once from then on.
	done bool
	// timer sends the pending acks when they lingered long enough; timers
	// counts its callback while it is armed or running.
	timer  *time.Timer
	timers sync.WaitGroup
	// frames counts the basic.ack frames sent (tests and benchmarks).
	frames int
}

// maxAbove bounds the tags an ackLedger remembers over a stuck floor.
const maxAbove = 4 * MaxPrefetch

// newAckLedger is the ledger of a channel whose basic.ack is send, with
// the prefetch of its consumer.
func newAckLedger(send func(tag uint64, multiple bool) error, prefetch int) *ackLedger {
	return &ackLedger{send: send, linger: ackLinger, maxPending: max(prefetch/2, 1), now: time.Now}
}

// ack records tags (ascending, unsettled, claimed by Ack) as acked and
// sends what can go now: the run from the floor with one ack, the rest
// when lingering is off. It returns the errors of the sends that carried
// these tags, by tag (nil when none failed).
func (l *ackLedger) ack(tags []uint64) map[uint64]error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.off {
		return l.sendEach(tags, nil)
	}
	if l.pending == nil {
		l.pending = make(map[uint64]time.Time, l.maxPending)
	}
	now := l.now()
	for _, t := range tags {
		l.pending[t] = now
	}
	var failed map[uint64]error
	if top, err := l.advance(); err != nil {
		failed = map[uint64]error{}
		for _, t := range tags {
			if t <= top {
				failed[t] = err
			}
		}
	}
	if len(l.pending) == 0 {
		return failed
	}
	if l.done || l.linger <= 0 || len(l.pending) >= l.maxPending {
		return l.flushLocked(tags, failed, time.Time{})
	}
	if l.timer == nil {
		l.timers.Add(1)
		l.timer = time.AfterFunc(l.linger, l.fire)
	}
	return failed
}

// settledElsewhere records tag as settled by another path than Ack (after
// its broker call): the run it completes is sent.
func (l *ackLedger) settledElsewhere(tag uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.off || tag <= l.floor {
		return
	}
	if l.settled == nil {
		l.settled = map[uint64]struct{}{}
	}
	l.settled[tag] = struct{}{}
	_, _ = l.advance() // a failed send means the channel closed: the broker redelivers
	l.checkSize()
}

// advance moves the floor over the settled and pending tags above it and
// sends the pending ones it passed with one ack of the highest (multiple
// when there are several). It returns that tag and the send's error.
// l.mu is held.
func (l *ackLedger) advance() (top uint64, err error) {
	n := 0
	for {
		next := l.floor + 1
		if _, ok := l.pending[next]; ok {
			delete(l.pending, next)
			top, n = next, n+1
		} else if _, ok := l.settled[next]; ok {
			delete(l.settled, next)
		} else {
			break
		}
		l.floor = next
	}
	if n == 0 {
		return 0, nil
	}
	l.frames++
	return top, l.send(top, n > 1)
}

// flushLocked sends the pending acks made before cutoff (all of them
// when it is zero) one by one and records them as settled; the errors of
// those among tags are added to failed, which it returns. l.mu is held.
func (l *ackLedger) flushLocked(tags []uint64, failed map[uint64]error, cutoff time.Time) map[uint64]error {
	if len(l.pending) == 0 {
		return failed
	}
	ps := make([]uint64, 0, len(l.pending))
	for t, at := range l.pending {
		if cutoff.IsZero() || !at.After(cutoff) {
			ps = append(ps, t)
			delete(l.pending, t)
		}
	}
	slices.Sort(ps)
	if l.settled == nil {
		l.settled = map[uint64]struct{}{}
	}
	for _, t := range ps {
		l.settled[t] = struct{}{}
	}
	errs := l.sendEach(ps, nil)
	for t, err := range errs {
		if _, ok := slices.BinarySearch(tags, t); ok {
			if failed == nil {
				failed = map[uint64]error{}
			}
			failed[t] = err
		}
	}
	l.checkSize()
	return failed
}

// sendEach acks tags one by one, returning the errors by tag.
func (l *ackLedger) sendEach(tags []uint64, failed map[uint64]error) map[uint64]error {
	for _, t := range tags {
		l.frames++
		if err := l.send(t, false); err != nil {
			if failed == nil {
				failed = map[uint64]error{}
			}
			failed[t] = err
		}
	}
	return failed
}

// checkSize turns the ledger off when too many tags over a stuck floor
// are remembered. l.mu is held.
func (l *ackLedger) checkSize() {
	if len(l.settled) <= maxAbove {
		return
	}
	_ = l.flushLocked(nil, nil, time.Time{}) // pending acks go now: nothing lingers when off
	l.off, l.settled, l.pending = true, nil, nil
}

// fire is the timer's callback: the acks that lingered long enough go one
// by one, and the timer is armed again for the others.
func (l *ackLedger) fire() {
	defer l.timers.Done()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.timer = nil
	l.expireLocked()
}

// expireLocked sends the acks that lingered for l.linger one by one and
// arms the timer for the oldest of the others. l.mu is held.
func (l *ackLedger) expireLocked() {
	now := l.now()
	_ = l.flushLocked(nil, nil, now.Add(-l.linger)) // a failed send means the channel closed: the broker redelivers
	if len(l.pending) == 0 || l.done || l.timer != nil {
		return
	}
	oldest := now
	for _, at := range l.pending {
		if at.Before(oldest) {
			oldest = at
		}
	}
	l.timers.Add(1)
	l.timer = time.AfterFunc(max(oldest.Add(l.linger).Sub(now), time.Millisecond), l.fire)
}

// stopTimerLocked stops the timer; its callback will not run. l.mu is
// held.
func (l *ackLedger) stopTimerLocked() {
	if l.timer != nil && l.timer.Stop() {
		l.timers.Done()
	}
	l.timer = nil
}

// flush sends the lingering acks now, and every later ack at once: the
// channel is about to close (Close, before it requeues anything). It
// waits for a timer callback under way.
func (l *ackLedger) flush() {
	l.mu.Lock()
	l.done = true
	l.stopTimerLocked()
	_ = l.flushLocked(nil, nil, time.Time{})
	l.mu.Unlock()
	l.timers.Wait()
}

// drop forgets the lingering acks of a channel that closed (the broker
// redelivers those messages) and stops the timer. It does not wait for a
// callback under way (it may be blocked in a write to the dead
// connection): that callback finds nothing to send.
func (l *ackLedger) drop() {
	l.mu.Lock()
	l.done = true
	l.stopTimerLocked()
	clear(l.pending)
	l.mu.Unlock() // a callback under way finds nothing to send
}

// ledgerSettled tells e's session's ledger that e's tag was settled by
// another path than Ack (a nack, a reject, a copy's ack): the failure
// paths call it after their broker call, whether it succeeded or not (a
// failed call means the channel closed).
func (s *Source) ledgerSettled(e *entry) { e.sess.acks.settledElsewhere(e.tag) }

// flushAcks sends the acks lingering on the current session: Close calls
// it before it requeues anything.
func (s *Source) flushAcks() {
	s.mu.Lock()
	ss := s.sess
	s.mu.Unlock()
	if ss != nil {
		ss.acks.flush()
	}
}

// ackEntries acks the claimed entries of Ack, each session's oldest run
// with one multiple ack (see ackLedger); a failure is recorded in failed
// by receipt handle.
func (s *Source) ackEntries(es []*entry, failed map[string]error) {
	for len(es) > 0 {
		ss := es[0].sess
		group, rest := es, []*entry(nil)
		if slices.ContainsFunc(es, func(e *entry) bool { return e.sess != ss }) {
			group = group[:0:0]
			for _, e := range es {
				if e.sess == ss {
					group = append(group, e)
				} else {
					rest = append(rest, e)
				}
			}
		}
		es = rest
		tags := make([]uint64, len(group))
		for i, e := range group {
			tags[i] = e.tag
		}
		slices.Sort(tags)
		errs := ss.acks.ack(tags)
		if errs == nil {
			continue
		}
		for _, e := range group {
			if err, ok := errs[e.tag]; ok {
				failed[e.handle] = staleOr(err)
			}
		}
	}
}
