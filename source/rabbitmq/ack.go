package rabbitmq

import (
	"slices"
	"sync"
)

// ackLedger lets Ack settle a session's oldest deliveries with one
// basic.ack multiple instead of a frame (and a write) per message. A
// multiple ack of tag T settles every delivery of the channel up to T that
// is still unsettled, so it is sent only when each tag up to T was acked:
// by this call or an earlier one. Tags settled any other way (a nack, a
// reject, a copy's ack) are not known here: they stop the floor, and the
// acks above them go one by one, as before. Delivery tags of the
// consuming channel count 1, 2, 3… (nothing else is delivered on it).
//
// Acks are decided and sent under mu, in order: the broker closes the
// channel on a multiple ack whose tag was settled already, so a later
// decision must never reach it first.
type ackLedger struct {
	mu sync.Mutex
	// floor is the highest tag such that every tag up to it was acked
	// through the ledger.
	floor uint64
	// above are the tags over floor+1 acked one by one.
	above map[uint64]struct{}
	// off is set once above grew past maxAbove (the floor is stuck below a
	// message settled another way): then every ack goes one by one.
	off bool
}

// maxAbove bounds the tags an ackLedger remembers over a stuck floor.
const maxAbove = 4 * MaxPrefetch

// plan decides the acks of tags (sorted, ascending, each unsettled):
// tags[:n] are settled by one ack of tags[n-1] with multiple (n ≥ 2), the
// rest one by one. It records them as acked; l.mu is held, and the caller
// sends the acks before releasing it.
func (l *ackLedger) plan(tags []uint64) (n int) {
	if l.off {
		return 0
	}
	for n < len(tags) {
		next := l.floor + 1
		if _, ok := l.above[next]; ok {
			delete(l.above, next)
			l.floor = next
			continue
		}
		if tags[n] != next {
			break
		}
		l.floor = next
		n++
	}
	// Tags acked one by one before may continue the run.
	for {
		if _, ok := l.above[l.floor+1]; !ok {
			break
		}
		delete(l.above, l.floor+1)
		l.floor++
	}
	if n < len(tags) {
		if l.above == nil {
			l.above = map[uint64]struct{}{}
		}
		for _, t := range tags[n:] {
			l.above[t] = struct{}{}
		}
		if len(l.above) > maxAbove {
			l.off, l.above = true, nil
		}
	}
	if n < 2 {
		return 0 // one tag alone goes as a single ack
	}
	return n
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
		slices.SortFunc(group, func(a, b *entry) int {
			switch {
			case a.tag < b.tag:
				return -1
			case a.tag > b.tag:
				return 1
			}
			return 0
		})
		tags := make([]uint64, len(group))
		for i, e := range group {
			tags[i] = e.tag
		}
		l := &ss.acks
		l.mu.Lock()
		n := l.plan(tags)
		if n > 0 {
			if err := ss.ch.Ack(tags[n-1], true); err != nil {
				for _, e := range group[:n] {
					failed[e.handle] = staleOr(err)
				}
			}
		}
		for _, e := range group[n:] {
			if err := ss.ch.Ack(e.tag, false); err != nil {
				failed[e.handle] = staleOr(err)
			}
		}
		l.mu.Unlock()
	}
}
