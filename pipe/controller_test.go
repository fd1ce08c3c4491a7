package pipe

import (
	"testing"
	"time"

	"github.com/pipesproject/pipes/source"
)

func TestControllerScaling(t *testing.T) {
	t0 := time.Unix(0, 0)
	type step struct {
		full, empty, failed, throttled bool
		after                          time.Duration
	}
	tests := []struct {
		name               string
		initial, max, rate int
		steps              []step
		want               int
	}{
		{name: "starts at the initial concurrency", initial: 5, max: 1000, rate: 300, want: 5},
		{name: "adds 300 per minute while receives come back full", initial: 5, max: 1000, rate: 300,
			steps: repeat(step{full: true, after: time.Second}, 60), want: 305},
		{name: "never passes max_concurrency", initial: 5, max: 20, rate: 300,
			steps: repeat(step{full: true, after: time.Second}, 60), want: 20},
		{name: "does not grow when receives are mixed full and empty", initial: 5, max: 1000, rate: 300,
			steps: repeat(step{full: true, empty: true, after: time.Second}, 10), want: 5},
		{name: "falls back towards 5 on empty receives", initial: 5, max: 1000, rate: 300,
			steps: append(repeat(step{full: true, after: time.Second}, 20), repeat(step{empty: true, after: time.Second}, 100)...), want: 5},
		{name: "halves when the target throttles, never below 2", initial: 5, max: 1000, rate: 300,
			steps: repeat(step{throttled: true, after: time.Second}, 5), want: 2},
		{name: "shrinks by a quarter when the target fails", initial: 5, max: 1000, rate: 300,
			steps: append(repeat(step{full: true, after: time.Second}, 19), step{failed: true, after: time.Second}), want: 75},
		{name: "waits out a cool-down after failures before growing again", initial: 5, max: 1000, rate: 300,
			steps: []step{{failed: true, after: time.Second}, {full: true, after: time.Second}, {full: true, after: time.Second}}, want: 3},
		{name: "a slow rate adds whole batches only", initial: 5, max: 1000, rate: 30,
			steps: repeat(step{full: true, after: time.Second}, 3), want: 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newController(tt.initial, tt.max, tt.rate, t0)
			now := t0
			got := c.cur
			for _, s := range tt.steps {
				if s.full {
					c.received(10, 10)
				}
				if s.empty {
					c.received(0, 10)
				}
				c.batchDone(s.failed, s.throttled)
				now = now.Add(s.after)
				got, _ = c.tick(now)
			}
			if got != tt.want {
				t.Fatalf("concurrency = %d, want %d", got, tt.want)
			}
		})
	}
}

func repeat[T any](v T, n int) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = v
	}
	return s
}

func TestControllerScaleUpToOneThousandTakesAboutThreeMinutes(t *testing.T) {
	c := newController(5, 1000, 300, time.Unix(0, 0))
	now := time.Unix(0, 0)
	secs := 0
	for c.cur < 1000 && secs < 600 {
		c.received(10, 10)
		now = now.Add(time.Second)
		c.tick(now)
		secs++
	}
	if secs < 195 || secs > 205 {
		t.Fatalf("reached 1000 after %d s, want about 199 s at +300/min", secs)
	}
}

func TestBackoffDelay(t *testing.T) {
	tests := []struct {
		name  string
		b     Backoff
		count int
		want  time.Duration
	}{
		{"first receive gets the base", Backoff{Base: 10 * time.Second, Factor: 2, Max: time.Hour}, 1, 10 * time.Second},
		{"third receive doubles twice", Backoff{Base: 10 * time.Second, Factor: 2, Max: time.Hour}, 3, 40 * time.Second},
		{"capped at max", Backoff{Base: 10 * time.Second, Factor: 2, Max: time.Minute}, 10, time.Minute},
		{"capped under SQS's 12 hours", Backoff{Base: time.Hour, Factor: 10, Max: 48 * time.Hour}, 5, 12*time.Hour - time.Minute},
		{"zero base releases at once", Backoff{Factor: 2, Max: time.Minute}, 4, 0},
		{"a base under a second is rounded up, not to a release", Backoff{Base: 200 * time.Millisecond, Factor: 1, Max: 200 * time.Millisecond}, 1, time.Second},
		{"a delay is rounded up to whole seconds", Backoff{Base: 1500 * time.Millisecond, Factor: 2, Max: time.Minute}, 2, 3 * time.Second},
		{"a fraction of a second more is a second more", Backoff{Base: 2100 * time.Millisecond, Factor: 1, Max: time.Minute}, 1, 3 * time.Second},
		{"a max of zero grows up to SQS's cap (defect 11)", Backoff{Base: time.Second, Factor: 2}, 4, 8 * time.Second},
		{"a max of zero stops under 12 h", Backoff{Base: time.Hour, Factor: 10}, 5, 12*time.Hour - time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.b.Delay(tt.count); got != tt.want {
				t.Fatalf("Delay(%d) = %v, want %v", tt.count, got, tt.want)
			}
		})
	}
	b := Backoff{Base: 10 * time.Second, Factor: 2, Max: time.Hour, Jitter: true}
	for range 100 {
		if d := b.Delay(3); d < 0 || d > 40*time.Second {
			t.Fatalf("jittered delay %v outside [0, 40s]", d)
		}
	}
}

func TestApplyFIFOFailsTheRestOfAGroupAfterItsFirstFailure(t *testing.T) {
	mk := func(id, group string) *delivery {
		return &delivery{Message: &source.Message{MessageID: id, Attributes: map[string]string{source.AttrMessageGroupID: group}}}
	}
	items := []*delivery{mk("a1", "a"), mk("b1", "b"), mk("a2", "a"), mk("b2", "b"), mk("a3", "a")}
	v := []verdict{{outcome: outSucceeded}, {outcome: outSucceeded}, {outcome: outFailedRetry}, {outcome: outSucceeded}, {outcome: outFiltered}}
	if g := applyFIFO(items, v); len(g) != 1 || !g["a"] {
		t.Errorf("failed groups %v, want only a", g)
	}
	want := []outcome{outSucceeded, outSucceeded, outFailedRetry, outSucceeded, outFailedRetry}
	for i := range want {
		if v[i].outcome != want[i] {
			t.Errorf("%s: outcome %v, want %v", items[i].Message.MessageID, v[i].outcome, want[i])
		}
	}
}
