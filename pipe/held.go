package pipe

import "time"

// holds are the outage batches the pipe holds (leased by the heartbeat,
// unsettled) until they go again. It has no lock: the pipe's guards it.
type holds struct {
	batches []heldBatch
	n       int // messages in batches, rest included
}

// size is how many messages h holds, rest included.
func (h heldBatch) size() int { return len(h.ds) + len(h.rest) }

// add holds b.
func (hs *holds) add(b heldBatch) {
	hs.batches = append(hs.batches, b)
	hs.n += b.size()
}

// count is how many batches are held.
func (hs *holds) count() int { return len(hs.batches) }

// take takes held batch i.
func (hs *holds) take(i int) heldBatch {
	b := hs.batches[i]
	hs.batches = append(hs.batches[:i:i], hs.batches[i+1:]...)
	hs.n -= b.size()
	return b
}

// due is the index of the held batch due first at now, or -1; next is
// when the first one not due is (zero: none).
func (hs *holds) due(now time.Time) (due int, next time.Time) {
	due = -1
	for i, b := range hs.batches {
		if !b.at.After(now) {
			if due < 0 || b.at.Before(hs.batches[due].at) {
				due = i
			}
			continue
		}
		if next.IsZero() || b.at.Before(next) {
			next = b.at
		}
	}
	return due, next
}

// takeExpired takes the held batches whose limit (until) is reached at
// now, and returns them and when the next limit is (zero: none).
func (hs *holds) takeExpired(now time.Time) (expired []heldBatch, next time.Time) {
	for i := 0; i < len(hs.batches); {
		b := hs.batches[i]
		if b.until.IsZero() || now.Before(b.until) {
			if !b.until.IsZero() && (next.IsZero() || b.until.Before(next)) {
				next = b.until
			}
			i++
			continue
		}
		expired = append(expired, hs.take(i))
	}
	return expired, next
}

// goNow makes every held batch due at now (the target works again).
func (hs *holds) goNow(now time.Time) {
	for i := range hs.batches {
		hs.batches[i].at = now
	}
}

// release takes every held batch, and returns their deliveries.
func (hs *holds) release() []*delivery {
	var out []*delivery
	for _, b := range hs.batches {
		out = append(out, b.ds...)
		out = append(out, b.rest...)
	}
	hs.batches, hs.n = nil, 0
	return out
}
