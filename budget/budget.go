// Package budget bounds the bytes of messages that the pipes of one
// process hold in flight (pipes run --max-inflight-bytes): give the same
// *Budget to every pipe's pipe.Options.Budget and pollers wait while it
// is spent. ApplyMemoryLimit sizes the Go runtime's soft memory limit to
// match it.
package budget

import (
	"math"
	"runtime/debug"
	"sync"
)

// Budget bounds the bytes of messages held in flight by all the pipes of a
// process (--max-inflight-bytes). Pollers wait while it is spent; settling
// gives bytes back. It is safe for concurrent use.
type Budget struct {
	limit int64

	mu      sync.Mutex
	used    int64
	changed chan struct{}
}

// NewBudget makes a budget of limit bytes; limit <= 0 means no limit.
func New(limit int64) *Budget {
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

// memoryBase is the memory limit's room for the process itself (code,
// SDK clients, connection buffers, metrics) beside the messages held.
const memoryBase = 128 << 20

// MemoryLimit is the Go memory limit (runtime/debug.SetMemoryLimit) that
// follows an in-flight budget of budget bytes: three times the budget
// (each message's body, the buffers and the requests that carry it; the
// bench measures about 1.1 to 1.8 times the body for 4 KB to 100 KB
// bodies, more for small ones) and 128 MiB for the process itself. 0 when
// there is no budget. The garbage collector works harder as the heap nears
// the limit instead of letting it double past what the budget allows.
func MemoryLimit(budget int64) int64 {
	if budget <= 0 {
		return 0
	}
	if budget > (math.MaxInt64-memoryBase)/3 {
		return math.MaxInt64
	}
	return 3*budget + memoryBase
}

// gcPercentUnderLimit is the GC target (GOGC) a process with a memory
// limit runs with: garbage may grow to four times the live heap before a
// collection, since the limit caps the heap anyway; a drain spends about a
// tenth of its CPU in the collector at Go's default of 100.
const gcPercentUnderLimit = 400

// ApplyMemoryLimit ties the process's garbage collector to an in-flight
// budget of budget bytes: unless the user set GOMEMLIMIT (getenv reads the
// environment) or there is no budget, it sets the Go memory limit to
// MemoryLimit(budget) and, unless GOGC is set, the GC target to 400 (the
// limit, not the target, then bounds the heap). It returns the limit and
// the GC target it set, 0 for what it left alone. It is meant for a
// program's start (both are the process's).
func ApplyMemoryLimit(budget int64, getenv func(string) string) (limit int64, gcPercent int) {
	if getenv("GOMEMLIMIT") != "" {
		return 0, 0
	}
	limit = MemoryLimit(budget)
	if limit <= 0 {
		return 0, 0
	}
	debug.SetMemoryLimit(limit)
	if getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercentUnderLimit)
		gcPercent = gcPercentUnderLimit
	}
	return limit, gcPercent
}
