package pipe

import (
	"slices"
	"testing"
	"time"

	"github.com/pipesproject/pipes/source"
)

func TestHolds(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	ds := func(ids ...string) []*delivery {
		out := make([]*delivery, len(ids))
		for i, id := range ids {
			out[i] = &delivery{Message: &source.Message{MessageID: id}}
		}
		return out
	}
	ids := func(ds []*delivery) []string {
		out := make([]string, len(ds))
		for i, d := range ds {
			out[i] = d.Message.MessageID
		}
		return out
	}
	sec := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	newHolds := func() *holds {
		var hs holds
		hs.add(heldBatch{ds: ds("a1", "a2"), at: sec(3)})
		hs.add(heldBatch{ds: ds("b1"), rest: ds("b2", "b3"), at: sec(1), until: sec(10)})
		hs.add(heldBatch{ds: ds("c1"), at: sec(2), until: sec(5)})
		return &hs
	}
	tests := []struct {
		name string
		do   func(t *testing.T, hs *holds)
	}{
		{"counts batches and messages, rest included", func(t *testing.T, hs *holds) {
			if hs.count() != 3 || hs.n != 6 {
				t.Errorf("count %d n %d, want 3, 6", hs.count(), hs.n)
			}
		}},
		{"the one due first, and when the next is", func(t *testing.T, hs *holds) {
			tests := []struct {
				at       time.Time
				due      int
				nextWant time.Time
			}{
				{t0, -1, sec(1)},
				{sec(1), 1, sec(2)},
				{sec(2), 1, sec(3)},
				{sec(3), 1, time.Time{}},
			}
			for _, tt := range tests {
				if due, next := hs.due(tt.at); due != tt.due || !next.Equal(tt.nextWant) {
					t.Errorf("due(%v) = %d, %v; want %d, %v", tt.at.Sub(t0), due, next, tt.due, tt.nextWant)
				}
			}
		}},
		{"take keeps the count", func(t *testing.T, hs *holds) {
			b := hs.take(1)
			if got := ids(b.ds); !slices.Equal(got, []string{"b1"}) || hs.count() != 2 || hs.n != 3 {
				t.Errorf("took %v; left %d batches, %d messages; want [b1], 2, 3", got, hs.count(), hs.n)
			}
		}},
		{"expired batches are taken at their limit", func(t *testing.T, hs *holds) {
			exp, next := hs.takeExpired(sec(4))
			if len(exp) != 0 || !next.Equal(sec(5)) {
				t.Fatalf("at 4 s: %d expired, next %v; want 0, 5s", len(exp), next.Sub(t0))
			}
			exp, next = hs.takeExpired(sec(5))
			if len(exp) != 1 || ids(exp[0].ds)[0] != "c1" || !next.Equal(sec(10)) || hs.n != 5 {
				t.Fatalf("at 5 s: %d expired, next %v, %d held; want c1, 10s, 5", len(exp), next.Sub(t0), hs.n)
			}
			exp, next = hs.takeExpired(sec(60))
			if len(exp) != 1 || !next.IsZero() || hs.count() != 1 {
				t.Fatalf("at 60 s: %d expired, next %v, %d left; want 1, none, 1", len(exp), next, hs.count())
			}
		}},
		{"goNow makes all due", func(t *testing.T, hs *holds) {
			hs.goNow(t0)
			if due, next := hs.due(t0); due < 0 || !next.IsZero() {
				t.Errorf("due %d next %v; want one due and none later", due, next)
			}
		}},
		{"release gives every delivery back", func(t *testing.T, hs *holds) {
			got := ids(hs.release())
			slices.Sort(got)
			if !slices.Equal(got, []string{"a1", "a2", "b1", "b2", "b3", "c1"}) || hs.count() != 0 || hs.n != 0 {
				t.Errorf("released %v, left %d/%d", got, hs.count(), hs.n)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.do(t, newHolds()) })
	}
}
