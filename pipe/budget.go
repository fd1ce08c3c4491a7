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

// Available reports whether a poller may receive now, and otherwise a
// channel closed when bytes are given back.
func (b *Budget) Available() (bool, <-chan struct{}) {
	if b == nil || b.limit <= 0 {
		return true, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used < b.limit, b.changed
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
