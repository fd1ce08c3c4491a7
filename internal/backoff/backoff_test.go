package backoff

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"
)

func TestDelayGrowsByFactorUpToTheCap(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name    string
		backoff Exponential
		want    []time.Duration // Delay(1), Delay(2), …
	}{
		{"a zero factor doubles", Exponential{Base: 50 * ms, Max: 2 * time.Second},
			[]time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 2 * time.Second, 2 * time.Second}},
		{"a factor of three triples", Exponential{Base: ms, Max: time.Second, Factor: 3},
			[]time.Duration{ms, 3 * ms, 9 * ms, 27 * ms}},
		{"a factor of one keeps the base", Exponential{Base: time.Second, Factor: 1},
			[]time.Duration{time.Second, time.Second, time.Second}},
		{"a factor below one keeps the base", Exponential{Base: time.Second, Factor: 0.5},
			[]time.Duration{time.Second, time.Second}},
		{"a max of zero still grows, up to 12 h", Exponential{Base: time.Hour},
			[]time.Duration{time.Hour, 2 * time.Hour, 4 * time.Hour, 8 * time.Hour, 12 * time.Hour, 12 * time.Hour}},
		{"a base above the max is the max", Exponential{Base: time.Minute, Max: time.Second},
			[]time.Duration{time.Second, time.Second}},
		{"a negative base is 0", Exponential{Base: -time.Second, Max: time.Second},
			[]time.Duration{0, 0}},
		{"the zero value waits 0", Exponential{},
			[]time.Duration{0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []time.Duration
			for a := 1; a <= len(tt.want); a++ {
				got = append(got, tt.backoff.Delay(a))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("delays = %v, want %v", got, tt.want)
			}
			if d0, d1 := tt.backoff.Delay(0), tt.backoff.Delay(1); d0 != d1 {
				t.Errorf("Delay(0) = %v, want Delay(1) = %v", d0, d1)
			}
		})
	}
}

func TestDelayOfHugeAttemptsIsTheCap(t *testing.T) {
	for _, a := range []int{64, 1000, math.MaxInt} {
		if d := (Exponential{Base: time.Nanosecond, Max: time.Minute}).Delay(a); d != time.Minute {
			t.Errorf("Delay(%d) = %v, want 1m", a, d)
		}
	}
}

func TestJitterStaysInItsRange(t *testing.T) {
	tests := []struct {
		name   string
		jitter Jitter
		lo     func(d time.Duration) time.Duration
	}{
		{"full jitter draws in [0, d]", Full, func(time.Duration) time.Duration { return 0 }},
		{"equal jitter draws in [d/2, d]", Equal, func(d time.Duration) time.Duration { return d - d/2 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := Exponential{Base: 100 * time.Millisecond, Max: 2 * time.Second, Jitter: tt.jitter}
			plain := b
			plain.Jitter = None
			spread := false
			for a := 1; a <= 8; a++ {
				full := plain.Delay(a)
				first := b.Delay(a)
				for range 50 {
					d := b.Delay(a)
					if d < tt.lo(full) || d > full {
						t.Fatalf("Delay(%d) = %v, want in [%v, %v]", a, d, tt.lo(full), full)
					}
					spread = spread || d != first
				}
			}
			if !spread {
				t.Error("every draw was the same: no jitter")
			}
		})
	}
}

func TestSleep(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		d    time.Duration
		want error
	}{
		{"a full wait returns nil", context.Background(), time.Millisecond, nil},
		{"no wait returns nil", context.Background(), 0, nil},
		{"a negative wait returns nil", context.Background(), -time.Second, nil},
		{"a done context cuts the wait", cancelled, time.Hour, context.Canceled},
		{"a done context fails even no wait", cancelled, 0, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := Sleep(tt.ctx, tt.d); !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
				t.Errorf("Sleep = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestSleepStopsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Sleep = %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Sleep took %v after its context ended", took)
	}
}

func FuzzDelay(f *testing.F) {
	f.Add(int64(50*time.Millisecond), int64(2*time.Second), 2.0, uint8(0), 3)
	f.Add(int64(time.Hour), int64(0), 0.0, uint8(1), 40)
	f.Add(int64(-1), int64(-1), -3.0, uint8(2), -5)
	f.Add(int64(1), int64(math.MaxInt64), 1e300, uint8(0), math.MaxInt)
	f.Add(int64(time.Second), int64(time.Minute), math.NaN(), uint8(0), 2)
	f.Fuzz(func(t *testing.T, base, maxDelay int64, factor float64, jitter uint8, attempt int) {
		b := Exponential{Base: time.Duration(base), Max: time.Duration(maxDelay), Factor: factor, Jitter: Jitter(jitter % 3)}
		limit := b.Max
		if limit <= 0 {
			limit = DefaultMax
		}
		d := b.Delay(attempt)
		if d < 0 {
			t.Fatalf("%+v.Delay(%d) = %v: negative", b, attempt, d)
		}
		if d > limit {
			t.Fatalf("%+v.Delay(%d) = %v: above the cap %v", b, attempt, d, limit)
		}
		if b.Jitter != None || attempt == math.MaxInt {
			return
		}
		if next := b.Delay(attempt + 1); next < d {
			t.Fatalf("%+v: Delay(%d) = %v > Delay(%d) = %v", b, attempt, d, attempt+1, next)
		}
	})
}

func BenchmarkDelay(b *testing.B) {
	e := Exponential{Base: 50 * time.Millisecond, Max: 20 * time.Second, Jitter: Equal}
	b.ReportAllocs()
	var sum time.Duration
	for i := 0; b.Loop(); i++ {
		sum += e.Delay(i%12 + 1)
	}
	if sum < 0 {
		b.Fatal(sum)
	}
}
