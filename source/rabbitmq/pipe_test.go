package rabbitmq_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/rabbittest"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source/rabbitmq"
)

// A pipe on the source, end to end: successes and filtered messages are
// acked, an item the target fails with a client error is dead-lettered by
// the queue's exchange (the pipe has no dead_letter target), a retryable
// failure is retried until it succeeds, and with Drain the pipe stops once
// the queue is empty (Pending).
//
// Relies on: basic.nack without requeue dead-lettering (reason rejected),
// and a quorum queue's x-delivery-count on redeliveries.
func TestAPipeOnTheSourceSettlesEveryMessageByItsOutcome(t *testing.T) {
	rabbittest.ManagementURL(t) // skips without it: the source reads the queue's dead-letter exchange from the management API
	dlx, dlq := rabbittest.DeclareDLX(t)
	q := rabbittest.Name(t, "")
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{Quorum: true, DeliveryLimit: 10, DeadLetterExchange: dlx})
	src, err := rabbitmq.New(rabbitmq.Config{URL: rabbittest.URL(t), Queue: q, WaitTime: 500 * time.Millisecond, BatchSize: 5, MaxConcurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	delivered := map[string]int{}
	target := pipe.TargetFunc(func(_ context.Context, events []*pipe.Event) (pipe.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		var res pipe.Result
		for _, ev := range events {
			body := ev.Message.Body
			delivered[body]++
			switch {
			case body == `{"n":"bad"}`:
				res.Failures = append(res.Failures, pipe.ItemFailure{ID: ev.ID(), Err: pipe.Permanent(errors.New("400 bad request"))})
			case body == `{"n":"flaky"}` && delivered[body] < 3:
				res.Failures = append(res.Failures, pipe.ItemFailure{ID: ev.ID(), Err: errors.New("503 try again")})
			}
		}
		return res, nil
	})
	p, err := pipe.New(pipe.Options{
		Name: "rabbit-e2e", Source: src, Target: target, BatchSize: 5, MaxConcurrency: 2,
		RetryBackoff: &pipe.Backoff{Base: 100 * time.Millisecond, Max: 200 * time.Millisecond},
		Drain:        true, ShutdownTimeout: 10 * time.Second,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	bodies := []string{`{"n":"bad"}`, `{"n":"flaky"}`}
	for i := range 10 {
		bodies = append(bodies, `{"n":`+string(rune('0'+i))+`}`)
	}
	rabbittest.Publish(t, q, bodies...)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := p.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := src.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitCount(t, dlq, 1)
	if d := rabbittest.Get(t, dlq); string(d[0].Body) != `{"n":"bad"}` || xDeath(t, d[0])["reason"] != "rejected" {
		t.Errorf("dead-lettered %q", d[0].Body)
	}
	if n := rabbittest.Count(t, q); n != 0 {
		t.Errorf("%d messages left in the queue", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if delivered[`{"n":"flaky"}`] != 3 || delivered[`{"n":"bad"}`] != 1 {
		t.Errorf("deliveries %v: want flaky 3 times, bad once", delivered)
	}
}
