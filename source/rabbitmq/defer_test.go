package rabbitmq_test

import (
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/rabbittest"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source/rabbitmq"
)

// Defer (an outage's give-back) counts nothing: on a quorum queue with
// x-delivery-limit 1 and a dead-letter exchange, a message deferred five
// times comes back each time with attempt 1, is never dead-lettered, and
// waits outside the prefetch window meanwhile (nothing unacked while it is
// in the delay queue). On a classic queue with max_receive_count 2, a
// message already redelivered once (attempt 2) is deferred and comes back
// still at attempt 2, and a failure then dead-letters it as its second.
//
// Relies on: the quorum queue's delivery limit, x-delivery-count starting
// at 0 for a published copy, delay queues' TTL dead-lettering back.
func TestDeferGivesBackWithoutCountingTheDelivery(t *testing.T) {
	t.Run("quorum", func(t *testing.T) {
		dlx, dlq := rabbittest.DeclareDLX(t)
		q := rabbittest.Name(t, "")
		rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{Quorum: true, DeliveryLimit: 1, DeadLetterExchange: dlx})
		src := open(t, rabbitmq.Config{Queue: q, ManagementURL: rabbitmq.ManagementOff, DeadLetterExchange: dlx, DeliveryLimit: 1,
			WaitTime: 300 * time.Millisecond})
		rabbittest.Publish(t, q, `{"outage":1}`)
		for i := range 5 {
			m := receive(t, src, 1, 20*time.Second)[0]
			if n := src.Attempts(m); n != 1 {
				t.Fatalf("delivery %d after %d deferrals: attempt %d, want 1", i+1, i, n)
			}
			kept, err := src.Defer(t.Context(), []*pipe.Message{m}, time.Second)
			if err != nil || len(kept) != 0 {
				t.Fatalf("Defer: kept %d, %v", len(kept), err)
			}
			if n, _ := src.Pending(t.Context()); n < 1 {
				t.Fatalf("Pending is %d while the message is in its delay queue, want 1", n)
			}
		}
		m := receive(t, src, 1, 20*time.Second)[0]
		if err := src.Ack(t.Context(), []*pipe.Message{m}); err != nil {
			t.Fatal(err)
		}
		if n := rabbittest.Count(t, dlq); n != 0 {
			t.Fatalf("%d messages dead-lettered by deferrals, want 0", n)
		}
	})
	t.Run("max_receive_count", func(t *testing.T) {
		dlx, dlq := rabbittest.DeclareDLX(t)
		q := rabbittest.Name(t, "")
		rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{DeadLetterExchange: dlx})
		src := open(t, rabbitmq.Config{Queue: q, ManagementURL: rabbitmq.ManagementOff, DeadLetterExchange: dlx, MaxReceiveCount: 2,
			WaitTime: 300 * time.Millisecond})
		rabbittest.Publish(t, q, `{"outage":2}`)
		m := receive(t, src, 1, 20*time.Second)[0]
		if err := src.Nak(t.Context(), []*pipe.Message{m}, 0); err != nil { // a give-back: redelivered
			t.Fatal(err)
		}
		m = receive(t, src, 1, 20*time.Second)[0]
		if n := src.Attempts(m); n != 2 {
			t.Fatalf("redelivered with attempt %d, want 2", n)
		}
		if kept, err := src.Defer(t.Context(), []*pipe.Message{m}, time.Second); err != nil || len(kept) != 0 {
			t.Fatalf("Defer: kept %d, %v", len(kept), err)
		}
		m = receive(t, src, 1, 20*time.Second)[0]
		if n := src.Attempts(m); n != 2 {
			t.Fatalf("deferred and back with attempt %d, want 2 (the deferral counted)", n)
		}
		if err := src.Nak(t.Context(), []*pipe.Message{m}, rabbitmq.VisibilityTimeout); err != nil { // its 2nd failure
			t.Fatal(err)
		}
		waitCount(t, dlq, 1)
	})
}
