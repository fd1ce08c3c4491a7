package rabbit_test

import (
	"testing"

	"github.com/pipesproject/pipes/internal/rabbittest"
	"github.com/pipesproject/pipes/redrive/rabbit"
)

// TestRedriveByIDs redrives a selection of the dead-letter queue, as the
// status page's DLQ browser does: the ids picked from a Peek move, the
// others are requeued in their places. Relies on: basic.get without ack,
// basic.ack of one delivery tag, and basic.nack requeue (multiple) putting
// classic-queue messages back in order.
func TestRedriveByIDs(t *testing.T) {
	cases := []struct {
		name      string
		ids       []string
		moved     string // bodies in the source queue
		left      string // bodies left in the DLQ, in order
		movedWant int
	}{
		{"one message from the middle", []string{"m-2"}, `{"n":2}`, `{"n":0} {"n":1} {"n":3} {"n":4}`, 1},
		{"the first and the last", []string{"m-0", "m-4"}, `{"n":0} {"n":4}`, `{"n":1} {"n":2} {"n":3}`, 2},
		{"an id not in the queue moves nothing", []string{"m-9"}, ``, `{"n":0} {"n":1} {"n":2} {"n":3} {"n":4}`, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			source, _, dlq := deadLetters(t, `{"n":0}`, `{"n":1}`, `{"n":2}`, `{"n":3}`, `{"n":4}`)
			b := dial(t)
			sum, err := b.Redrive(t.Context(), rabbit.Options{From: dlq, To: source, IDs: tc.ids})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Moved != tc.movedWant || sum.Failed != 0 {
				t.Fatalf("summary %+v, want %d moved", sum, tc.movedWant)
			}
			if got := bodies(rabbittest.Get(t, source)); got != tc.moved {
				t.Errorf("the source queue holds %q, want %q", got, tc.moved)
			}
			if got := bodies(rabbittest.Get(t, dlq)); got != tc.left {
				t.Errorf("the dead-letter queue holds %q, want %q in order", got, tc.left)
			}
		})
	}
}
