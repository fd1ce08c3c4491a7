package pipe

// batcher forms batches from deliveries as they are received. A batch
// holds at most size deliveries and, counted in record JSON (what a target
// is sent, with the commas and brackets of an array), at most
// maxBatchBytes, unless a single record is larger. The pipe calls it under
// its lock, so implementations need no locking of their own.
type batcher interface {
	// add takes a received delivery. It reports whether an open batch
	// has just started, and which, so the pipe starts its batch window.
	add(d *delivery) (started bool, gen uint64)
	// closeOpen hands on the open batch: the receive that filled it
	// returned (window 0), or the pipe is stopping.
	closeOpen()
	// closeOpenIf hands on the open batch if it is still batch gen (its
	// window passed).
	closeOpenIf(gen uint64)
	// next takes the next batch to run, or nil.
	next() []*delivery
	// done tells that a batch ended; failedGroups are the FIFO groups
	// whose messages failed in it. It returns deliveries held back that
	// must be given back now (FIFO: the later messages of a failed group).
	done(batch []*delivery, failedGroups map[string]bool) (giveBack []*delivery)
	// pending is how many deliveries wait for a batch to run.
	pending() int
	// drain takes every delivery not in a running batch.
	drain() []*delivery
}

// batchOverhead is the bytes of a JSON array around n records.
func batchOverhead(n int) int { return n + 1 }

// standardBatcher fills batches in order of arrival.
type standardBatcher struct {
	size      int
	open      []*delivery
	openBytes int
	ready     [][]*delivery
	waiting   int
	gen       uint64 // counts closed open batches
}

func newBatcher(fifo bool, size int) batcher {
	if fifo {
		return &fifoBatcher{size: size, groups: map[string][]*delivery{}, busy: map[string]bool{}}
	}
	return &standardBatcher{size: size}
}

func (b *standardBatcher) add(d *delivery) (bool, uint64) {
	if len(b.open) > 0 && b.openBytes+d.recordSize+batchOverhead(len(b.open)+1) > maxBatchBytes {
		b.closeOpen()
	}
	b.open = append(b.open, d)
	b.openBytes += d.recordSize
	b.waiting++
	if len(b.open) >= b.size {
		b.closeOpen()
		return false, 0
	}
	return len(b.open) == 1, b.gen
}

func (b *standardBatcher) closeOpen() {
	if len(b.open) == 0 {
		return
	}
	b.ready = append(b.ready, b.open)
	b.open, b.openBytes = nil, 0
	b.gen++
}

func (b *standardBatcher) closeOpenIf(gen uint64) {
	if gen == b.gen {
		b.closeOpen()
	}
}

func (b *standardBatcher) next() []*delivery {
	if len(b.ready) == 0 {
		return nil
	}
	batch := b.ready[0]
	b.ready[0] = nil
	b.ready = b.ready[1:]
	b.waiting -= len(batch)
	return batch
}

func (b *standardBatcher) done([]*delivery, map[string]bool) []*delivery { return nil }

func (b *standardBatcher) pending() int { return b.waiting }

func (b *standardBatcher) drain() []*delivery {
	b.closeOpen()
	var out []*delivery
	for _, batch := range b.ready {
		out = append(out, batch...)
	}
	b.ready, b.waiting = nil, 0
	return out
}

// fifoBatcher keeps each message group's order and at most one batch per
// group in flight (Pipes' and Lambda's FIFO rule). A batch takes groups in
// order of arrival, a group's waiting messages together.
type fifoBatcher struct {
	size    int
	groups  map[string][]*delivery // waiting deliveries by group
	order   []string               // groups in order of arrival
	busy    map[string]bool        // groups with a batch in flight
	waiting int
}

func (b *fifoBatcher) add(d *delivery) (bool, uint64) {
	g := d.Message.GroupID()
	if _, ok := b.groups[g]; !ok {
		b.order = append(b.order, g)
	}
	b.groups[g] = append(b.groups[g], d)
	b.waiting++
	return false, 0 // FIFO batches form as slots free; no window
}

func (b *fifoBatcher) closeOpen()         {}
func (b *fifoBatcher) closeOpenIf(uint64) {}

func (b *fifoBatcher) next() []*delivery {
	var batch []*delivery
	bytes := 0
	kept := b.order[:0]
	for _, g := range b.order {
		q := b.groups[g]
		if len(q) == 0 {
			delete(b.groups, g)
			continue
		}
		kept = append(kept, g)
		if b.busy[g] || len(batch) >= b.size {
			continue
		}
		took := 0
		for _, d := range q {
			if len(batch) >= b.size || len(batch) > 0 && bytes+d.recordSize+batchOverhead(len(batch)+1) > maxBatchBytes {
				break
			}
			batch = append(batch, d)
			bytes += d.recordSize
			took++
		}
		if took > 0 {
			b.groups[g] = q[took:]
			b.busy[g] = true
		}
	}
	b.order = kept
	b.waiting -= len(batch)
	return batch
}

func (b *fifoBatcher) done(batch []*delivery, failedGroups map[string]bool) []*delivery {
	for _, d := range batch {
		delete(b.busy, d.Message.GroupID())
	}
	// Messages of a failed group received meanwhile must not overtake the
	// failed one: they are given back too.
	var back []*delivery
	for g := range failedGroups {
		if q := b.groups[g]; len(q) > 0 {
			back = append(back, q...)
			b.waiting -= len(q)
			b.groups[g] = nil
		}
	}
	return back
}

func (b *fifoBatcher) pending() int { return b.waiting }

func (b *fifoBatcher) drain() []*delivery {
	var out []*delivery
	for _, g := range b.order {
		out = append(out, b.groups[g]...)
	}
	b.groups, b.order, b.waiting = map[string][]*delivery{}, nil, 0
	return out
}
