package redrive

import (
	"context"
	"testing"
	"time"
)

func TestBucket(t *testing.T) {
	tests := []struct {
		name      string
		rate      float64
		takes     []int
		wantSize  int
		wantSlept time.Duration
	}{
		{"no rate never waits", 0, []int{10, 10, 10}, 10, 0},
		{"a full bucket gives its burst at once", 50, []int{10}, 10, 0},
		{"after the burst each batch waits for its tokens", 50, []int{10, 10, 10}, 10, 400 * time.Millisecond},
		{"a rate under one a second gives batches of one", 0.5, []int{1, 1, 1}, 1, 4 * time.Second},
		{"a rate of five gives batches of five", 5, []int{5, 5}, 5, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Unix(0, 0)
			var slept time.Duration
			b := newBucket(tt.rate, func() time.Time { return now }, func(_ context.Context, d time.Duration) error {
				slept += d
				now = now.Add(d)
				return nil
			})
			if b.size() != tt.wantSize {
				t.Errorf("size %d, want %d", b.size(), tt.wantSize)
			}
			for _, n := range tt.takes {
				if err := b.wait(context.Background(), n); err != nil {
					t.Fatal(err)
				}
			}
			if slept != tt.wantSlept {
				t.Errorf("slept %v in all, want %v", slept, tt.wantSlept)
			}
		})
	}
}
