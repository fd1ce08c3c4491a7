// Package backoff is pipes' one exponential backoff with jitter and its
// context-aware sleep, for the loops that retry AWS calls, settles and
// deliveries.
package backoff

import (
	"context"
	"math"
	"math/rand/v2"
	"time"
)

// DefaultMax is the cap of a backoff whose Max is 0: 12 h, SQS's longest
// visibility timeout.
const DefaultMax = 12 * time.Hour

// Jitter says how a delay is drawn at random below its exponential value d.
type Jitter int

const (
	// None uses d as it is.
	None Jitter = iota
	// Full draws the delay in [0, d] (AWS's "full jitter").
	Full
	// Equal draws the delay in [d/2, d] (AWS's "equal jitter"): never less
	// than half the wait, and still spread.
	Equal
)

// Exponential is a delay growing by Factor at each attempt from Base up to
// Max: Base·Factor^(attempt-1), capped, then jittered. The zero value waits
// 0 every time. It is a plain value, safe to copy and to use from many
// goroutines.
type Exponential struct {
	// Base is the delay of attempt 1 (negative counts as 0).
	Base time.Duration
	// Max caps every delay, jitter included; growth stops there. 0 (or
	// less) means no cap but DefaultMax (12 h).
	Max time.Duration
	// Factor is the growth per attempt: 0 means 2 (doubling); a Factor in
	// (0, 1] keeps the delay at Base.
	Factor float64
	// Jitter draws the delay at random below the exponential value.
	Jitter Jitter
}

// Delay is the wait before attempt (1 is the first retry, or the first
// receive; below 1 counts as 1). It never blocks and never allocates. The
// result is in [0, cap] where cap is Max (DefaultMax when Max is 0), and,
// without Jitter, it never decreases as attempt grows.
func (e Exponential) Delay(attempt int) time.Duration {
	limit := e.Max
	if limit <= 0 {
		limit = DefaultMax
	}
	base := min(max(e.Base, 0), limit)
	factor := e.Factor
	switch {
	case factor == 0 || math.IsNaN(factor):
		factor = 2
	case factor < 1:
		factor = 1
	}
	d := limit
	if f := float64(base) * math.Pow(factor, float64(max(attempt, 1)-1)); f < float64(limit) {
		d = time.Duration(f)
	}
	switch e.Jitter {
	case Full:
		switch {
		case d == math.MaxInt64:
			d = rand.N(d)
		case d > 0:
			d = rand.N(d + 1)
		}
	case Equal:
		if d > 1 {
			half := d / 2
			d = d - half + rand.N(half+1)
		}
	}
	return d
}

// Sleep waits d or until ctx is done, whichever comes first. It returns nil
// after a full wait and ctx's error when ctx is done first; a d of 0 or
// less returns ctx.Err() at once.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
