package ui

import (
	"testing"
	"time"
)

func TestTheDLQGrowsWhenItsDepthRises(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 12, 0, 0, 0, time.UTC)
	const every = 10 * time.Second
	cases := []struct {
		name  string
		depth []int64 // the DLQ's depth at each sample, every 10 s; -1: not read
		word  string
		since int // the sample that began it; -1: none
	}{
		{"a depth never read says nothing", []int64{-1, -1, -1, -1}, "healthy", -1},
		{"a steady depth is not growing", []int64{3, -1, 3, -1, 3}, "healthy", -1},
		{"a falling depth is not growing", []int64{3, 2, -1, 0}, "healthy", -1},
		{"a depth that rose is growing, since the first reading above the lowest", []int64{3, -1, 3, 4, -1, 6}, "DLQ growing", 3},
		{"emptied by a redrive, then filling again, is growing", []int64{3, 0, -1, 1}, "DLQ growing", 3},
		{"risen and fallen back is not growing", []int64{3, 5, 3}, "healthy", -1},
		{"a rise older than 5 minutes is not growing", append([]int64{1, 2}, repeat(-1, 31)...), "healthy", -1},
		{"a rise in the last 5 minutes is, though older readings were higher", append([]int64{9}, append(repeat(-1, 31), 1, 2)...), "DLQ growing", 33},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRecorder(every, nil)
			var now time.Time
			for i, d := range tc.depth {
				g := unknownGauges()
				g.dlq = d
				now = t0.Add(time.Duration(i) * every)
				r.sample(now, g, nil)
			}
			h := healthOf(PipeView{State: "running"}, r, r.stats(), every, now)
			if h.Word != tc.word {
				t.Fatalf("health %+v, want %q", h, tc.word)
			}
			checkSince(t, h, t0, every, tc.since)
			if tc.word != "healthy" && h.Level != "warn" {
				t.Errorf("level %q, want warn", h.Level)
			}
		})
	}
}

// checkSince checks that h dates its trouble from sample since of samples
// taken every every from t0 (none when since < 0).
func checkSince(t *testing.T, h Health, t0 time.Time, every time.Duration, since int) {
	t.Helper()
	want := t0.Add(time.Duration(since) * every)
	switch {
	case since < 0 && h.Since != nil:
		t.Errorf("since %v, want none", h.Since)
	case since >= 0 && (h.Since == nil || !h.Since.Equal(want)):
		t.Errorf("since %v, want sample %d (%v)", h.Since, since, want)
	}
}

func repeat(v int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// A pipe whose trouble is its state (circuit open, not ready, paused…)
// dates it from the first sample that saw that state; a state that changes
// dates anew, and a return to running says no since.
func TestATroubledStateIsDatedFromTheSampleThatFirstSawIt(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 12, 0, 0, 0, time.UTC)
	const every = 10 * time.Second
	cases := []struct {
		name   string
		states []State // at each sample, every 10 s
		word   string
		since  int // the sample that began it; -1: none
	}{
		{"not ready from the start", []State{NotReady, NotReady, NotReady}, "not ready", 0},
		{"the circuit opened at the third sample", []State{Running, Running, CircuitOpen, CircuitOpen}, "circuit open", 2},
		{"not ready, then the circuit open: dated by the open circuit", []State{NotReady, NotReady, CircuitOpen}, "circuit open", 2},
		{"paused a while", []State{Running, Paused, Paused}, "paused", 1},
		{"running again", []State{CircuitOpen, Running}, "healthy", -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRecorder(every, nil)
			var now time.Time
			for i, st := range tc.states {
				now = t0.Add(time.Duration(i) * every)
				r.noteState(now, st)
				r.sample(now, unknownGauges(), nil)
			}
			last := tc.states[len(tc.states)-1]
			h := healthOf(PipeView{State: last.String()}, r, r.stats(), every, now)
			if h.Word != tc.word {
				t.Fatalf("health %+v, want %q", h, tc.word)
			}
			checkSince(t, h, t0, every, tc.since)
		})
	}
}
