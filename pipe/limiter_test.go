package pipe

import (
	"testing"
	"time"
)

// TestLimiter drives the receive rate limit with a fixed clock. It also
// pins what the limiter relies on in x/time/rate: AllowN with a negative
// n credits the tokens back (golang/go#54082), capped at the burst.
func TestLimiter(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	type step struct {
		at       time.Duration // from t0
		take     int           // take up to take when need are there; 0: give back
		need     int
		back     int
		wantTook int
		wantWait time.Duration
	}
	tests := []struct {
		name   string
		perSec float64
		steps  []step
	}{
		{"a full bucket gives a whole receive at once", 20, []step{
			{take: 10, need: 10, wantTook: 10},
			{take: 10, need: 10, wantTook: 10},
		}},
		{"an empty bucket says how long until a receive's worth is there", 20, []step{
			{take: 10, need: 10, wantTook: 10},
			{take: 10, need: 10, wantTook: 10},
			{take: 10, need: 10, wantWait: 500 * time.Millisecond},
			{at: 250 * time.Millisecond, take: 10, need: 10, wantWait: 250 * time.Millisecond},
			{at: 500 * time.Millisecond, take: 10, need: 10, wantTook: 10},
		}},
		{"the burst is at least a receive: 2 a second still takes 10", 2, []step{
			{take: 10, need: 2, wantTook: 10},
			{take: 10, need: 2, wantWait: time.Second},
			{at: 1500 * time.Millisecond, take: 10, need: 2, wantTook: 3},
		}},
		{"tokens of messages not received are given back", 10, []step{
			{take: 10, need: 10, wantTook: 10},
			{back: 7},
			{take: 10, need: 7, wantTook: 7},
			{take: 10, need: 1, wantWait: 100 * time.Millisecond},
		}},
		{"what is given back is capped at the burst", 10, []step{
			{take: 4, need: 4, wantTook: 4},
			{back: 10},
			{take: 10, need: 10, wantTook: 10},
			{take: 10, need: 1, wantWait: 100 * time.Millisecond},
		}},
		{"idle time fills the bucket up to the burst only", 10, []step{
			{take: 10, need: 10, wantTook: 10},
			{at: time.Hour, take: 10, need: 10, wantTook: 10},
			{at: time.Hour, take: 10, need: 1, wantWait: 100 * time.Millisecond},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLimiter(tt.perSec)
			for i, s := range tt.steps {
				now := t0.Add(s.at)
				if s.back > 0 {
					l.giveBack(now, s.back)
					continue
				}
				took, wait := l.take(now, s.take, s.need)
				if took != s.wantTook || wait != s.wantWait {
					t.Fatalf("step %d: take(%d, need %d) = %d, %v; want %d, %v", i, s.take, s.need, took, wait, s.wantTook, s.wantWait)
				}
			}
		})
	}
}

func TestNoRateLimitIsANilLimiterThatTakesAll(t *testing.T) {
	l := newLimiter(0)
	if l != nil {
		t.Fatalf("newLimiter(0) = %v, want nil", l)
	}
	if got := l.need(7); got != 7 {
		t.Errorf("need(7) = %d, want 7", got)
	}
	if took, wait := l.take(time.Now(), 7, 7); took != 7 || wait != 0 {
		t.Errorf("take = %d, %v; want 7, 0", took, wait)
	}
	l.giveBack(time.Now(), 3) // no panic
}

func TestTheNeedOfAReceiveIsUpToOneSecondOfTokens(t *testing.T) {
	tests := []struct {
		perSec  float64
		n, want int
	}{
		{perSec: 30, n: 10, want: 10},
		{perSec: 5, n: 10, want: 5},
		{perSec: 0.5, n: 10, want: 1},
		{perSec: 30, n: 3, want: 3},
	}
	for _, tt := range tests {
		if got := newLimiter(tt.perSec).need(tt.n); got != tt.want {
			t.Errorf("at %v/s, need(%d) = %d, want %d", tt.perSec, tt.n, got, tt.want)
		}
	}
}
