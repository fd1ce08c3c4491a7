package pipe

import (
	"errors"
	"testing"
	"time"
)

func TestBreaker(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	errDown := errors.New("503")
	type batch struct {
		at    time.Duration // when it ended, from t0
		state targetState
		probe bool
		stop  bool
		want  breakerChange
	}
	down := func(at time.Duration, want breakerChange) batch { return batch{at: at, state: targetDown, want: want} }
	tests := []struct {
		name      string
		batches   []batch
		wantOpen  bool
		wantEvery time.Duration
	}{
		{name: "two outage batches keep it closed", batches: []batch{down(0, circuitKept), down(0, circuitKept)}},
		{name: "the third in a row opens it", batches: []batch{down(0, circuitKept), down(0, circuitKept), down(0, circuitOpened)},
			wantOpen: true, wantEvery: breakerProbeMin},
		{name: "an answer in between starts the count again", batches: []batch{
			down(0, circuitKept), down(0, circuitKept), {state: targetAnswered}, down(0, circuitKept), down(0, circuitKept)}},
		{name: "a batch with no call tells nothing", batches: []batch{
			down(0, circuitKept), down(0, circuitKept), {state: targetUnknown}, down(0, circuitOpened)}, wantOpen: true, wantEvery: breakerProbeMin},
		{name: "no opening while stopping", batches: []batch{
			down(0, circuitKept), down(0, circuitKept), {state: targetDown, stop: true}}},
		{name: "a failed probe doubles the interval", batches: []batch{
			down(0, circuitKept), down(0, circuitKept), down(0, circuitOpened),
			{at: time.Second, state: targetDown, probe: true, want: circuitProbeFailed},
			{at: 3 * time.Second, state: targetDown, probe: true, want: circuitProbeFailed}},
			wantOpen: true, wantEvery: 4 * time.Second},
		{name: "the interval is capped", batches: func() []batch {
			bs := []batch{down(0, circuitKept), down(0, circuitKept), down(0, circuitOpened)}
			for i := range 10 {
				bs = append(bs, batch{at: time.Duration(i+1) * time.Minute, state: targetDown, probe: true, want: circuitProbeFailed})
			}
			return bs
		}(), wantOpen: true, wantEvery: breakerProbeMax},
		{name: "a batch from before that succeeds does not close it", batches: []batch{
			down(0, circuitKept), down(0, circuitKept), down(0, circuitOpened), {state: targetAnswered}},
			wantOpen: true, wantEvery: breakerProbeMin},
		{name: "a probe the target answered closes it", batches: []batch{
			down(0, circuitKept), down(0, circuitKept), down(0, circuitOpened),
			{at: time.Second, state: targetAnswered, probe: true, want: circuitClosed}},
			wantEvery: breakerProbeMin},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c breaker
			for i, b := range tt.batches {
				if b.probe && !c.probeDue(t0.Add(b.at)) {
					t.Fatalf("batch %d: a probe at %v is not due (next at %v)", i, b.at, c.probeAt.Sub(t0))
				}
				if b.probe {
					c.probing = true
				}
				if got := c.record(b.state, b.probe, t0, t0.Add(b.at), b.stop, errDown); got != b.want {
					t.Fatalf("batch %d: record = %d, want %d", i, got, b.want)
				}
			}
			if c.open != tt.wantOpen || c.every != tt.wantEvery || c.probing {
				t.Fatalf("open %v every %v probing %v; want %v, %v, false", c.open, c.every, c.probing, tt.wantOpen, tt.wantEvery)
			}
			if c.open != (c.err != nil) {
				t.Errorf("err = %v while open = %v: the reason is kept while open only", c.err, c.open)
			}
		})
	}
}

func TestBreakerProbeTimes(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	var c breaker
	if c.probeDue(t0) || c.probeWait(t0) != 0 {
		t.Fatal("a closed circuit has no probe")
	}
	if got := c.deferFor(t0, 3*time.Second); got != 3*time.Second {
		t.Errorf("closed: defer for %v, want the backoff, 3s", got)
	}
	for range breakerTrips {
		c.record(targetDown, false, t0, t0, false, errors.New("down"))
	}
	tests := []struct {
		at       time.Duration
		probing  bool
		due      bool
		wait     time.Duration
		deferFor time.Duration
	}{
		{at: 0, wait: time.Second, deferFor: time.Second},
		{at: 400 * time.Millisecond, wait: 600 * time.Millisecond, deferFor: breakerProbeMin},
		{at: time.Second, due: true, deferFor: breakerProbeMin},
		{at: time.Second, probing: true, deferFor: breakerProbeMin},
	}
	for _, tt := range tests {
		c.probing = tt.probing
		now := t0.Add(tt.at)
		if c.probeDue(now) != tt.due || c.probeWait(now) != tt.wait || c.deferFor(now, 3*time.Second) != tt.deferFor {
			t.Errorf("at %v probing %v: due %v wait %v defer %v; want %v, %v, %v", tt.at, tt.probing,
				c.probeDue(now), c.probeWait(now), c.deferFor(now, 3*time.Second), tt.due, tt.wait, tt.deferFor)
		}
	}
}
