package pipe

import (
	"errors"
	"testing"
	"time"
)

func TestRecvBackoff(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	ms := time.Millisecond
	errDown := errors.New("connection refused")
	type receive struct {
		start, end time.Duration // from t0
		ok         bool
	}
	tests := []struct {
		name        string
		receives    []receive
		wantRounds  int
		wantFailing bool
		// the pause from the start of the round's first receive (from),
		// with equal jitter: in [min, max]
		from, min, max time.Duration
	}{
		{name: "a failure pauses about 200 ms", receives: []receive{{0, 10 * ms, false}},
			wantRounds: 1, min: 100 * ms, max: 200 * ms},
		{name: "rounds in a row double the pause", receives: []receive{
			{0, 10 * ms, false}, {300 * ms, 310 * ms, false}, {800 * ms, 810 * ms, false}},
			wantRounds: 3, wantFailing: true, from: 800 * ms, min: 400 * ms, max: 800 * ms},
		{name: "receives under way together are one round", receives: []receive{
			{0, 10 * ms, false}, {0, 11 * ms, false}, {5 * ms, 12 * ms, false}, {9 * ms, 13 * ms, false}},
			wantRounds: 1, from: 0, min: 100 * ms, max: 200 * ms},
		{name: "a receive that works ends the rounds", receives: []receive{
			{0, 10 * ms, false}, {300 * ms, 310 * ms, false}, {800 * ms, 810 * ms, false}, {2 * time.Second, 2*time.Second + 10*ms, true}},
			wantRounds: 0},
		{name: "the pause is capped at 20 s", receives: func() []receive {
			var rs []receive
			for i := range 12 {
				at := time.Duration(i) * time.Minute
				rs = append(rs, receive{at, at + ms, false})
			}
			return rs
		}(), wantRounds: 12, wantFailing: true, from: 11 * time.Minute, min: 10 * time.Second, max: 20 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b recvBackoff
			var last receive
			for _, r := range tt.receives {
				last = r
				if r.ok {
					b.succeeded()
					continue
				}
				b.failed(t0.Add(r.start), t0.Add(r.end), errDown)
			}
			if b.rounds != tt.wantRounds || b.failing() != tt.wantFailing {
				t.Fatalf("rounds %d, failing %v; want %d, %v", b.rounds, b.failing(), tt.wantRounds, tt.wantFailing)
			}
			if last.ok {
				if b.err != nil {
					t.Errorf("err = %v after a receive that worked, want nil", b.err)
				}
				return
			}
			if !errors.Is(b.err, errDown) {
				t.Errorf("err = %v, want the last receive's", b.err)
			}
			if d := b.wait(t0.Add(tt.from)); d < tt.min || d > tt.max {
				t.Errorf("pause %v from the round's start, want in [%v, %v]", d, tt.min, tt.max)
			}
		})
	}
}

func TestRecvBackoffSaysHowLongFromNow(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	var b recvBackoff
	d := b.failed(t0, t0.Add(time.Second), errors.New("down"))
	if d != 0 {
		t.Errorf("a receive that took longer than its pause: retry in %v, want 0", d)
	}
	if w := b.wait(t0.Add(time.Second)); w > 0 {
		t.Errorf("wait %v, want none", w)
	}
}
