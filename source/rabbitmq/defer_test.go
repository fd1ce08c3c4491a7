package rabbitmq_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/rabbittest"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
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
			kept, err := src.Defer(t.Context(), []*source.Message{m}, time.Second)
			if err != nil || len(kept) != 0 {
				t.Fatalf("Defer: kept %d, %v", len(kept), err)
			}
			if n, _ := src.Pending(t.Context()); n < 1 {
				t.Fatalf("Pending is %d while the message is in its delay queue, want 1", n)
			}
		}
		m := receive(t, src, 1, 20*time.Second)[0]
		if err := src.Ack(t.Context(), []*source.Message{m}); err != nil {
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
		if err := src.Nak(t.Context(), []*source.Message{m}, 0); err != nil { // a give-back: redelivered
			t.Fatal(err)
		}
		m = receive(t, src, 1, 20*time.Second)[0]
		if n := src.Attempts(m); n != 2 {
			t.Fatalf("redelivered with attempt %d, want 2", n)
		}
		if kept, err := src.Defer(t.Context(), []*source.Message{m}, time.Second); err != nil || len(kept) != 0 {
			t.Fatalf("Defer: kept %d, %v", len(kept), err)
		}
		m = receive(t, src, 1, 20*time.Second)[0]
		if n := src.Attempts(m); n != 2 {
			t.Fatalf("deferred and back with attempt %d, want 2 (the deferral counted)", n)
		}
		if err := src.Nak(t.Context(), []*source.Message{m}, rabbitmq.VisibilityTimeout); err != nil { // its 2nd failure
			t.Fatal(err)
		}
		waitCount(t, dlq, 1)
	})
}

// Where the copy cannot be placed (here every delay queue name is taken
// by a queue with other arguments, so each declare is refused), an
// outage's messages stay unacked and the pipe holds them and sends them
// again itself: a 2 s outage over 100 messages on a classic queue with a
// dead-letter exchange still dead-letters nothing, and every message
// succeeds on its first delivery.
//
// Relies on: a queue declare with other arguments than the queue's being
// refused (PRECONDITION_FAILED), basic.nack without requeue dead-lettering.
func TestAnOutageWhoseCopiesCannotBePlacedIsHeldByThePipe(t *testing.T) {
	dlx, dlq := rabbittest.DeclareDLX(t)
	q := rabbittest.Name(t, "")
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{DeadLetterExchange: dlx})
	for _, ttl := range []time.Duration{500 * time.Millisecond, 750 * time.Millisecond, time.Second, 1500 * time.Millisecond,
		2 * time.Second, 3 * time.Second, 5 * time.Second, 8 * time.Second, 13 * time.Second, 20 * time.Second, 30 * time.Second,
		45 * time.Second, time.Minute} {
		rabbittest.DeclareQueue(t, q+rabbitmq.DelayQueueInfix+ttl.String(), rabbittest.QueueOptions{})
	}
	l := &logs{}
	src, err := rabbitmq.New(rabbitmq.Config{URL: rabbittest.URL(t), Queue: q, WaitTime: 500 * time.Millisecond, BatchSize: 10, MaxConcurrency: 5,
		ManagementURL: rabbitmq.ManagementOff, DeadLetterExchange: dlx})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var first time.Time
	attempts := map[string]int{}
	target := pipe.TargetFunc(func(_ context.Context, events []*pipe.Event) (pipe.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		if first.IsZero() {
			first = time.Now()
		}
		if time.Since(first) < 2*time.Second {
			return pipe.Result{}, errors.New("503 Service Unavailable")
		}
		for _, ev := range events {
			if _, ok := attempts[ev.Message.Body]; !ok {
				attempts[ev.Message.Body] = ev.Message.ReceiveCount()
			}
		}
		return pipe.Result{}, nil
	})
	p, err := pipe.New(pipe.Options{Name: "held", Source: src, Target: target, BatchSize: 10, MaxConcurrency: 5,
		Drain: true, ShutdownTimeout: 10 * time.Second, Logger: slog.New(slog.NewJSONHandler(l, nil))})
	if err != nil {
		t.Fatal(err)
	}
	bodies := make([]string, 100)
	for i := range bodies {
		bodies[i] = fmt.Sprintf(`{"n":%d}`, i)
	}
	rabbittest.Publish(t, q, bodies...)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	if err := p.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := src.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := rabbittest.Count(t, dlq); n != 0 {
		t.Errorf("%d messages dead-lettered by the outage, want 0", n)
	}
	if n := rabbittest.Count(t, q); n != 0 {
		t.Errorf("%d messages left in the queue, want 0", n)
	}
	if !strings.Contains(l.String(), "the pipe holds those the source kept") {
		t.Errorf("no warning that the copies could not be placed; the test proves nothing:\n%.2000s", l.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(attempts) != len(bodies) {
		t.Fatalf("%d of %d messages delivered", len(attempts), len(bodies))
	}
	for b, n := range attempts {
		if n != 1 {
			t.Errorf("%s succeeded on attempt %d, want 1", b, n)
		}
	}
}
