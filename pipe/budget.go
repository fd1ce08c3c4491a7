package pipe

import (
	"sync"
)

// Budget bounds the bytes of messages held in flight by all the pipes of a
// process (max_inflight_bytes). Pollers wait while it is spent; settling
// gives bytes back. It is safe for concurrent use.
type Budget struct {
	limit int64

	mu      sync.Mutex
	used    int64
	changed chan struct{}
}

// NewBudget makes a budget of limit bytes; limit <= 0 means no limit.
func NewBudget(limit int64) *Budget {
	return &Budget{limit: limit, changed: make(chan struct{})}
}

// Limit is the budget in bytes (0: unlimited).
func (b *Budget) Limit() int64 {
	if b == nil || b.limit <= 0 {
		return 0
	}
	return b.limit
}

// Used is the bytes held now.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Reserve sets n bytes aside for a receive about to be made, when they fit
// (or when nothing is held, so that one message larger than the budget still
// goes through). Otherwise it returns false and a channel closed when bytes
// are given back. A receive gives its reservation back and takes what it got.
func (b *Budget) Reserve(n int64) (bool, <-chan struct{}) {
	if b == nil || b.limit <= 0 {
		return true, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used > 0 && b.used+n > b.limit {
		return false, b.changed
	}
	b.used += n
	return true, nil
}

// Take records n bytes received. It never blocks: a receive may overshoot
// the budget by what one call returns.
func (b *Budget) Take(n int64) {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.used += n
	b.mu.Unlock()
}

// Settle replaces a reservation of reserved bytes by the actual bytes a
// receive got, in one step.
func (b *Budget) Settle(reserved, actual int64) {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.used += actual - reserved
	if actual < reserved {
		close(b.changed)
		b.changed = make(chan struct{})
	}
	b.mu.Unlock()
}

// Give returns n bytes and wakes the pollers waiting for them.
func (b *Budget) Give(n int64) {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.used -= n
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}
