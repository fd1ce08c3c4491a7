package rabbitmq_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/internal/rabbittest"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source/rabbitmq"
)

// cycleQueues declares queues a and b whose dead-letter exchanges route
// to each other: a's to b, b's (with a message TTL of ttl) back to a.
func cycleQueues(t *testing.T, ttl time.Duration) (a, b string) {
	t.Helper()
	a, b = rabbittest.Name(t, "-a"), rabbittest.Name(t, "-b")
	toA, toB := rabbittest.Name(t, "-to-a"), rabbittest.Name(t, "-to-b")
	ch := rabbittest.Channel(t)
	for _, x := range []string{toA, toB} {
		if err := ch.ExchangeDeclare(x, "fanout", true, false, false, false, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if conn, err := amqp.Dial(rabbittest.URL(t)); err == nil {
				if c, err := conn.Channel(); err == nil {
					_ = c.ExchangeDelete(x, false, false)
				}
				_ = conn.Close()
			}
		})
	}
	rabbittest.DeclareQueue(t, a, rabbittest.QueueOptions{DeadLetterExchange: toB})
	rabbittest.DeclareQueue(t, b, rabbittest.QueueOptions{DeadLetterExchange: toA, MessageTTL: ttl})
	for q, x := range map[string]string{a: toA, b: toB} {
		if err := ch.QueueBind(q, "", x, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

// deathCount is the x-death count of queue and reason in headers.
func deathCount(h amqp.Table, queue, reason string) int64 {
	list, _ := h["x-death"].([]any)
	for _, e := range list {
		if t, ok := e.(amqp.Table); ok && t["queue"] == queue && t["reason"] == reason {
			n, _ := t["count"].(int64)
			return n
		}
	}
	return 0
}

// A pipe on queue A whose target fails every message, where A dead-letters
// to B and B's expired messages go back to A: the broker lets this cycle
// spin (it drops only cycles without a rejection). The source sees the
// cycle in x-death once A's rejected count reaches the limit (10 without
// max_receive_count), logs it as an error naming both queues, and holds
// and requeues the message with the pipe's delay from then on: its count
// stops growing, and it is still retried, never dropped.
//
// Relies on: basic.nack without requeue dead-lettering (reason rejected),
// per-queue message TTL dead-lettering (reason expired) and x-death's one
// entry per {queue, reason} with its count.
func TestADeadLetterCycleIsReportedAndNotFedAnyMore(t *testing.T) {
	rabbittest.ManagementURL(t) // skips without it: the source reads the queues' dead-letter exchanges from the management API
	a, b := cycleQueues(t, 100*time.Millisecond)
	l := &logs{}
	src, err := rabbitmq.New(rabbitmq.Config{URL: rabbittest.URL(t), Queue: a, WaitTime: 500 * time.Millisecond, BatchSize: 1, MaxConcurrency: 1,
		Logger: slog.New(slog.NewJSONHandler(l, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	target := pipe.TargetFunc(func(_ context.Context, events []*pipe.Event) (pipe.Result, error) {
		calls.Add(int64(len(events)))
		var res pipe.Result
		for _, ev := range events {
			res.Failures = append(res.Failures, pipe.ItemFailure{ID: ev.ID(), Err: errors.New("503 always down")})
		}
		return res, nil
	})
	p, err := pipe.New(pipe.Options{
		Name: "cycle", Source: src, Target: target, BatchSize: 1, MaxConcurrency: 1,
		RetryBackoff:    &pipe.Backoff{Base: time.Second, Max: time.Second}, // whole seconds: shorter rounds to 0, a give-back
		ShutdownTimeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	rabbittest.Publish(t, a, `{"n":"cycling"}`)
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(l.String(), "a dead-letter cycle") {
		if time.Now().After(deadline) {
			t.Fatalf("no cycle reported after %d deliveries:\n%s", calls.Load(), l)
		}
		time.Sleep(50 * time.Millisecond)
	}
	atDetection := calls.Load()
	time.Sleep(2500 * time.Millisecond) // 10 laps' worth and more: the count would grow
	later := calls.Load()
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	if err := src.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	var got []amqp.Delivery
	deadline = time.Now().Add(10 * time.Second)
	for len(got) == 0 && time.Now().Before(deadline) {
		got = append(rabbittest.Get(t, a), rabbittest.Get(t, b)...)
		time.Sleep(50 * time.Millisecond)
	}
	if len(got) != 1 {
		t.Fatalf("%d messages in the two queues after the stop, want the one (never dropped)", len(got))
	}
	rejected, expired := deathCount(got[0].Headers, a, "rejected"), deathCount(got[0].Headers, b, "expired")
	if rejected != rabbitmq.DefaultCycleLimit || expired != rabbitmq.DefaultCycleLimit {
		t.Errorf("x-death counts: rejected from A %d, expired from B %d; want both to stop at %d", rejected, expired, rabbitmq.DefaultCycleLimit)
	}
	if later <= atDetection {
		t.Errorf("%d deliveries at the detection, %d 2.5 s later: the held message should still be retried", atDetection, later)
	}
	logText := l.String()
	for _, want := range []string{`"level":"ERROR"`, a + ` (rejected ×10) → ` + b + ` (expired ×10) → ` + a} {
		if !strings.Contains(logText, want) {
			t.Errorf("logs lack %q:\n%s", want, logText)
		}
	}
	t.Logf("%d deliveries in all, %d at the detection; x-death: %d rejected from A, %d expired from B", later, atDetection, rejected, expired)
}

// A retry_backoff under a second used to round to 0, which the pipe passes
// to Nak as a release: the source gave the failed message back (never
// counted, never dead-lettered) and it came back at once, a hot loop
// (129 145 deliveries in 30 s). Rounded up to a second, it is a failure:
// dead-lettered at once on a queue with a dead-letter exchange.
//
// Relies on: basic.nack without requeue dead-lettering (reason rejected).
func TestASubSecondRetryBackoffStillDeadLettersAFailure(t *testing.T) {
	rabbittest.ManagementURL(t) // skips without it: the source reads the queue's dead-letter exchange from the management API
	dlx, dlq := rabbittest.DeclareDLX(t)
	q := rabbittest.Name(t, "")
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{DeadLetterExchange: dlx})
	src, err := rabbitmq.New(rabbitmq.Config{URL: rabbittest.URL(t), Queue: q, WaitTime: 500 * time.Millisecond, BatchSize: 1, MaxConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	target := pipe.TargetFunc(func(_ context.Context, events []*pipe.Event) (pipe.Result, error) {
		calls.Add(int64(len(events)))
		var res pipe.Result
		for _, ev := range events {
			res.Failures = append(res.Failures, pipe.ItemFailure{ID: ev.ID(), Err: errors.New("503 always down")})
		}
		return res, nil
	})
	p, err := pipe.New(pipe.Options{
		Name: "sub-second", Source: src, Target: target, BatchSize: 1, MaxConcurrency: 1,
		RetryBackoff:    &pipe.Backoff{Base: 200 * time.Millisecond, Max: 200 * time.Millisecond},
		ShutdownTimeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	rabbittest.Publish(t, q, `{"n":"fails"}`)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	waitCount(t, dlq, 1)
	cancel()
	<-done
	if err := src.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the target got the message %d times, want once, then the dead-letter exchange", n)
	}
}
