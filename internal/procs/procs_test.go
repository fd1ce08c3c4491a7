package procs

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"
)

// TestSizer walks the sizer through loads given as cores kept busy per
// one-second interval.
func TestSizer(t *testing.T) {
	cases := []struct {
		name string
		max  int
		load []float64 // cores busy in each interval
		want []int     // processors after each
	}{
		{"an idle pipe stays at one", 4,
			[]float64{0.1, 0.2, 0.05, 0.55, 0.3},
			[]int{1, 1, 1, 1, 1}},
		{"a load comes: as many as it needs at once", 4,
			[]float64{0.05, 0.9, 2.5, 2.5},
			[]int{1, 2, 4, 4}},
		{"then goes: one step down per five quiet seconds", 4,
			append([]float64{3}, repeat(0.1, 15)...),
			append([]int{4}, append(repeat(4, 4), append(repeat(3, 5), append(repeat(2, 5), 1)...)...)...)},
		{"a load near the threshold does not flap", 2,
			append([]float64{1.5}, append(repeat(0.3, 10), repeat(0.55, 10)...)...),
			append([]int{2}, append(append(repeat(2, 4), repeat(1, 6)...), repeat(1, 10)...)...)},
		{"never above the runtime's value", 2,
			[]float64{1.9, 1.9}, []int{2, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.load) != len(tc.want) {
				t.Fatalf("bad case: %d loads, %d wants", len(tc.load), len(tc.want))
			}
			cpu := time.Duration(0)
			s := NewSizer(tc.max, cpu)
			for i, l := range tc.load {
				cpu += time.Duration(l * float64(time.Second))
				if got := s.Next(cpu, time.Second); got != tc.want[i] {
					t.Fatalf("interval %d (load %.2f): %d processors, want %d (all: %v)", i, l, got, tc.want[i], tc.want)
				}
			}
		})
	}
}

func repeat[T any](v T, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// TestRunLeavesAnExplicitGOMAXPROCS: with GOMAXPROCS set, Run returns at
// once and changes nothing; without, it gives the runtime's value back at
// the end.
func TestRunLeavesAnExplicitGOMAXPROCS(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	done := make(chan struct{})
	go func() {
		Run(context.Background(), func(k string) string {
			if k == "GOMAXPROCS" {
				return "2"
			}
			return ""
		}, log)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return with GOMAXPROCS set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	Run(ctx, func(string) string { return "" }, log)
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Fatalf("GOMAXPROCS %d after Run, want %d back", got, before)
	}
}
