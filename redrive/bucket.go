package redrive

import (
	"context"
	"math"
	"time"
)

// bucket is a token bucket: rate tokens a second, holding at most burst.
// It starts full. It is used by one goroutine.
type bucket struct {
	rate   float64 // tokens per second; 0 means no cap
	burst  float64
	tokens float64
	last   time.Time
	now    func() time.Time
	sleep  func(ctx context.Context, d time.Duration) error
}

// newBucket makes a bucket for rate messages a second (0: no cap) whose
// burst is the rate, between 1 and 10 (one SQS batch).
func newBucket(rate float64, now func() time.Time, sleep func(context.Context, time.Duration) error) *bucket {
	burst := math.Min(10, math.Max(1, math.Floor(rate)))
	return &bucket{rate: rate, burst: burst, tokens: burst, last: now(), now: now, sleep: sleep}
}

// size is the most tokens one wait may ask for.
func (b *bucket) size() int {
	if b.rate <= 0 {
		return 10
	}
	return int(b.burst)
}

// wait blocks until n tokens (at most size()) are there and takes them, or
// until ctx is done.
func (b *bucket) wait(ctx context.Context, n int) error {
	if b.rate <= 0 || n <= 0 {
		return nil
	}
	b.refill()
	if lack := float64(n) - b.tokens; lack > 0 {
		d := time.Duration(math.Ceil(lack / b.rate * float64(time.Second)))
		if err := b.sleep(ctx, d); err != nil {
			return err
		}
		b.refill()
	}
	b.tokens -= float64(n)
	return nil
}

func (b *bucket) refill() {
	now := b.now()
	b.tokens = math.Min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
}
