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

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/internal/rabbittest"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/source/rabbitmq"
)

// Without retry_backoff the pipe passes VisibilityTimeout (30 s) to Nak;
// the source retries after about a second instead (it held the message
// 30 s before).
//
// Relies on: a delay queue's per-queue TTL dead-lettering its messages
// back through the default exchange.
func TestAFailureWithoutRetryBackoffIsRetriedWithinAboutASecond(t *testing.T) {
	q := rabbittest.Name(t, "")
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{})
	src := open(t, rabbitmq.Config{Queue: q, ManagementURL: rabbitmq.ManagementOff, WaitTime: 300 * time.Millisecond})
	rabbittest.Publish(t, q, "failing")
	m := receive(t, src, 1, 10*time.Second)[0]
	failedAt := time.Now()
	if err := src.Nak(t.Context(), []*source.Message{m}, rabbitmq.VisibilityTimeout); err != nil {
		t.Fatal(err)
	}
	again := receive(t, src, 1, 40*time.Second)[0]
	waited := time.Since(failedAt)
	t.Logf("first retry %s after the failure", waited.Round(time.Millisecond))
	if waited > 2500*time.Millisecond || waited < 400*time.Millisecond {
		t.Errorf("retried %s after the failure, want about 1 s", waited.Round(time.Millisecond))
	}
	if again.Body != "failing" || src.Attempts(again) != 2 {
		t.Errorf("retried %q with attempts %d, want the message with 2", again.Body, src.Attempts(again))
	}
	if err := src.Ack(t.Context(), []*source.Message{again}); err != nil {
		t.Fatal(err)
	}
}

// drainRun is one run of a pipe over a queue until it is drained.
type drainRun struct {
	took      time.Duration
	delivered map[string]int // successes by body
	dead      []amqp.Delivery
	left      int
}

// drain publishes n messages (every tenth poison when failing) to a fresh
// queue of kind, runs a pipe without retry_backoff whose target takes
// latency a batch and fails the poison ones, until the source is drained.
func drain(t *testing.T, kind string, n int, failing bool, latency time.Duration) drainRun {
	t.Helper()
	dlx, dlq := rabbittest.DeclareDLX(t)
	q := rabbittest.Name(t, "")
	opts := rabbittest.QueueOptions{DeadLetterExchange: dlx}
	cfg := rabbitmq.Config{URL: rabbittest.URL(t), Queue: q, WaitTime: 500 * time.Millisecond, BatchSize: 10, MaxConcurrency: 5,
		ManagementURL: rabbitmq.ManagementOff, DeadLetterExchange: dlx}
	switch kind {
	case "quorum":
		opts.Quorum, opts.DeliveryLimit = true, 3
		cfg.DeliveryLimit = 3
	case "classic":
		cfg.MaxReceiveCount = 3
	}
	rabbittest.DeclareQueue(t, q, opts)
	src, err := rabbitmq.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	run := drainRun{delivered: map[string]int{}}
	target := pipe.TargetFunc(func(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
		time.Sleep(latency)
		var res pipe.Result
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range events {
			if strings.Contains(ev.Message.Body, "poison") {
				res.Failures = append(res.Failures, pipe.ItemFailure{ID: ev.ID(), Err: errors.New("503 try again")})
				continue
			}
			run.delivered[ev.Message.Body]++
		}
		return res, nil
	})
	p, err := pipe.New(pipe.Options{
		Name: "drain-" + kind, Source: src, Target: target, BatchSize: 10, MaxConcurrency: 5,
		Drain: true, ShutdownTimeout: 10 * time.Second, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	bodies := make([]string, n)
	for i := range bodies {
		kind := "good"
		if failing && i%10 == 0 {
			kind = "poison"
		}
		bodies[i] = fmt.Sprintf(`{"%s":%d}`, kind, i)
	}
	rabbittest.Publish(t, q, bodies...)
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	start := time.Now()
	if err := p.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	run.took = time.Since(start)
	if err := src.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if failing {
		deadline := time.Now().Add(10 * time.Second)
		for rabbittest.Count(t, dlq) < n/10 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	}
	run.dead = rabbittest.Get(t, dlq)
	run.left = rabbittest.Count(t, q)
	return run
}

// 600 messages, every tenth failing for good, on a quorum queue with
// x-delivery-limit 3 and on a classic queue with max_receive_count 3,
// without retry_backoff: the failing ones wait in delay queues, out of
// the prefetch window, so the queue drains in at most twice the time it
// takes with none failing (137 s and 77 s against 16 s when failures were
// held 30 s inside the window); every poison message ends in the
// dead-letter queue after the limit, and every good one is delivered.
//
// Relies on: basic.nack without requeue dead-lettering, the quorum
// queue's delivery limit, delay queues' TTL dead-lettering back.
func TestFailuresDoNotSlowTheDrainOfAQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("a drain of 600 messages, four times")
	}
	const n = 600
	// A target taking 700 ms a batch (an HTTP endpoint's latency): the
	// healthy drain takes about 15 s, as in the measurement (16 s),
	// so the poison messages' retries (about 1 + 2 + 4 s, jittered) that
	// the last batches leave behind fit in it. At 400 ms the clean drain
	// took 8.7 s and that tail alone put a loaded CI run at 2.07×.
	const latency = 700 * time.Millisecond
	for _, kind := range []string{"quorum", "classic"} {
		t.Run(kind, func(t *testing.T) {
			clean := drain(t, kind, n, false, latency)
			dirty := drain(t, kind, n, true, latency)
			t.Logf("%s: %d messages drained in %s with none failing, %s with 10%% failing",
				kind, n, clean.took.Round(100*time.Millisecond), dirty.took.Round(100*time.Millisecond))
			if dirty.took > 2*clean.took {
				t.Errorf("with 10%% failing the drain took %s, more than twice the %s with none", dirty.took, clean.took)
			}
			if len(clean.delivered) != n || len(clean.dead) != 0 || clean.left != 0 {
				t.Errorf("none failing: %d delivered, %d dead-lettered, %d left; want %d, 0, 0", len(clean.delivered), len(clean.dead), clean.left, n)
			}
			if len(dirty.delivered) != n-n/10 || dirty.left != 0 {
				t.Errorf("10%% failing: %d good delivered, %d left; want %d, 0", len(dirty.delivered), dirty.left, n-n/10)
			}
			poison := map[string]bool{}
			for _, d := range dirty.dead {
				if !strings.Contains(string(d.Body), "poison") {
					t.Errorf("a good message was dead-lettered: %s", d.Body)
				}
				poison[string(d.Body)] = true
			}
			if len(poison) != n/10 {
				t.Errorf("%d distinct poison messages dead-lettered (%d in all), want %d", len(poison), len(dirty.dead), n/10)
			}
		})
	}
}
