package procs

import (
	"context"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"testing"
	"time"
)

// TestSizer walks the sizer through sequences of samples, one per
// Interval.
func TestSizer(t *testing.T) {
	idle := Sample{Ceiling: 4, Waiting: 0.01, Busy: 0.05}
	at := func(s Sample, ceiling int) Sample { s.Ceiling = ceiling; return s }
	cases := []struct {
		name string
		in   []Sample
		want []int // processors after each sample
	}{
		{"an idle pipe stays at one",
			[]Sample{idle, {Ceiling: 4, Waiting: 0.3, Busy: 0.55}, idle},
			[]int{1, 1, 1}},
		{"goroutines queueing as they do at the CPU used get no processor more",
			// rabbitjob at c16 sharing two cores with the broker
			[]Sample{{Ceiling: 2, Waiting: 0.59, Busy: 0.51}, {Ceiling: 2, Waiting: 0.72, Busy: 0.44}, {Ceiling: 2, Waiting: 0.47, Busy: 0.55}},
			[]int{1, 1, 1}},
		{"a moment's stall (goroutines waiting, little CPU used) is no work waiting; two in a row are",
			[]Sample{{Ceiling: 2, Waiting: 0.52, Busy: 0.19}, {Ceiling: 2, Waiting: 0.3, Busy: 0.5},
				{Ceiling: 2, Waiting: 0.8, Busy: 0.2}, {Ceiling: 2, Waiting: 0.9, Busy: 0.2}},
			[]int{1, 1, 1, 2}},
		{"a processor two thirds busy is enough",
			[]Sample{{Ceiling: 2, Waiting: 0.34, Busy: 0.64}, {Ceiling: 2, Waiting: 0.2, Busy: 0.7}},
			[]int{1, 1}},
		{"goroutines waiting get as many processors as are waiting, at once",
			[]Sample{idle, {Ceiling: 4, Waiting: 2.6, Busy: 0.5}},
			[]int{1, 4}},
		{"a process held back by a neighbour grows although it used little CPU",
			[]Sample{{Ceiling: 2, Waiting: 40, Busy: 0.3}},
			[]int{2}},
		{"a late ticker while goroutines wait is work waiting",
			[]Sample{{Ceiling: 4, Waiting: 0.1, Late: 50 * time.Millisecond}},
			[]int{2}},
		{"a late ticker in an idle process is the machine's load, not work",
			[]Sample{{Ceiling: 4, Waiting: 0.01, Late: 50 * time.Millisecond}},
			[]int{1}},
		{"a busy processor is one too few",
			[]Sample{{Ceiling: 4, Busy: 0.9}, {Ceiling: 4, Busy: 2.3}},
			[]int{2, 4}},
		{"never above the runtime's value",
			[]Sample{{Ceiling: 2, Waiting: 100, Busy: 1.9}, {Ceiling: 2, Waiting: 100, Busy: 1.9}},
			[]int{2, 2}},
		{"the runtime's value shrinks: at once below it",
			[]Sample{{Ceiling: 4, Waiting: 100}, {Ceiling: 2, Waiting: 100}, at(idle, 1)},
			[]int{4, 2, 1}},
		{"then goes: one step down per five quiet seconds",
			append([]Sample{{Ceiling: 4, Waiting: 3}}, repeat(idle, 3*downAfter)...),
			append([]int{4}, slices.Concat(repeat(4, downAfter-1), repeat(3, downAfter), repeat(2, downAfter), []int{1})...)},
		{"work still waiting, though little: no step down",
			append([]Sample{{Ceiling: 2, Waiting: 3}}, repeat(Sample{Ceiling: 2, Waiting: 0.3, Busy: 0.3}, 3*downAfter)...),
			append([]int{2}, repeat(2, 3*downAfter)...)},
		{"a step down undone at once: the next one waits twice as long",
			slices.Concat([]Sample{{Ceiling: 2, Waiting: 3}}, repeat(at(idle, 2), downAfter),
				[]Sample{{Ceiling: 2, Waiting: 1}}, repeat(at(idle, 2), 2*downAfter)),
			slices.Concat([]int{2}, repeat(2, downAfter-1), []int{1},
				[]int{2}, repeat(2, 2*downAfter-1), []int{1})},
		{"a step down that holds: the next one needs the short wait again",
			slices.Concat([]Sample{{Ceiling: 2, Waiting: 3}}, repeat(at(idle, 2), downAfter),
				[]Sample{{Ceiling: 2, Waiting: 1}}, repeat(at(idle, 2), 2*downAfter),
				repeat(at(idle, 2), maxHold), []Sample{{Ceiling: 2, Waiting: 1}}, repeat(at(idle, 2), downAfter)),
			slices.Concat([]int{2}, repeat(2, downAfter-1), []int{1},
				[]int{2}, repeat(2, 2*downAfter-1), []int{1},
				repeat(1, maxHold), []int{2}, repeat(2, downAfter-1), []int{1})},
		{"a load on the edge does not flap",
			slices.Concat([]Sample{{Ceiling: 2, Waiting: 3}}, repeat(Sample{Ceiling: 2, Waiting: 0.2, Busy: 0.5}, 4*downAfter)),
			slices.Concat([]int{2}, repeat(2, 4*downAfter))},
		{"a runtime value of zero or less counts as one",
			[]Sample{{Ceiling: 0, Waiting: 5}},
			[]int{1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.in) != len(tc.want) {
				t.Fatalf("bad case: %d samples, %d wants", len(tc.in), len(tc.want))
			}
			s := NewSizer()
			for i, in := range tc.in {
				if got := s.Next(in); got != tc.want[i] {
					t.Fatalf("sample %d (%+v): %d processors, want %d", i, in, got, tc.want[i])
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

// TestBucketMid: a latency bucket counts as its middle, or as its finite
// bound.
func TestBucketMid(t *testing.T) {
	cases := []struct {
		name   string
		lo, hi float64
		want   float64
	}{
		{"a finite bucket: its middle", 1e-3, 3e-3, 2e-3},
		{"the last bucket: its lower bound", 2, math.Inf(1), 2},
		{"the first bucket: half its upper bound", math.Inf(-1), 1e-9, 0.5e-9},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := bucketMid(tc.lo, tc.hi); got != tc.want {
				t.Fatalf("bucketMid(%g, %g) = %g, want %g", tc.lo, tc.hi, got, tc.want)
			}
		})
	}
}

// TestRunLeavesAnExplicitGOMAXPROCS: with GOMAXPROCS set, Run returns at
// once and changes nothing; without, it gives the runtime its own value
// back at the end.
func TestRunLeavesAnExplicitGOMAXPROCS(t *testing.T) {
	runtime.SetDefaultGOMAXPROCS()
	before := runtime.GOMAXPROCS(0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(context.Background(), func(k string) string {
			if k == "GOMAXPROCS" {
				return "2"
			}
			return ""
		}, slog.New(slog.DiscardHandler))
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return with GOMAXPROCS set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	Run(ctx, func(string) string { return "" }, slog.New(slog.DiscardHandler))
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Fatalf("GOMAXPROCS %d after Run, want %d back", got, before)
	}
}

// BenchmarkWaitMeter is the cost of one sample (every Interval): the
// scheduler latency histogram and the process's CPU time.
func BenchmarkWaitMeter(b *testing.B) {
	w := newWaitMeter()
	for b.Loop() {
		w.read(Interval)
	}
}

// BenchmarkCeilingRead is the cost of reading the runtime's own value
// below it (every CeilingEvery): handing GOMAXPROCS back to the runtime
// and taking it again, two stops of the world.
func BenchmarkCeilingRead(b *testing.B) {
	defer runtime.SetDefaultGOMAXPROCS()
	if runtime.GOMAXPROCS(0) < 2 {
		b.Skip("needs 2 processors")
	}
	for b.Loop() {
		runtime.SetDefaultGOMAXPROCS()
		_ = runtime.GOMAXPROCS(0)
		runtime.GOMAXPROCS(1)
	}
}
