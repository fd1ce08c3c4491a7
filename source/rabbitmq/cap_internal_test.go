package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/rabbittest"
	"github.com/pipesproject/pipes/internal/syncbuf"
	"github.com/pipesproject/pipes/pipe"
)

// oldestUnacked samples, until stop, the age of the oldest delivery s has
// handed out and nobody settled, and returns the largest seen.
func oldestUnacked(s *Source, stop <-chan struct{}) <-chan time.Duration {
	out := make(chan time.Duration, 1)
	go func() {
		var worst time.Duration
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				out <- worst
				return
			case <-tick.C:
			}
			now := time.Now()
			s.mu.Lock()
			for _, e := range s.inflight {
				worst = max(worst, now.Sub(e.received))
			}
			s.mu.Unlock()
		}
	}()
	return out
}

// takeDelayQueues declares every delay queue name of q with other
// arguments than the source's, so that its declares are refused and no
// copy can be placed.
func takeDelayQueues(t *testing.T, q string) {
	for _, ttl := range delayLadder {
		rabbittest.DeclareQueue(t, q+DelayQueueInfix+ttl.String(), rabbittest.QueueOptions{})
	}
}

// The pipe's own hold of an outage (where Defer cannot place a copy) is
// capped by the consumer timeout: with a consumer timeout of 3 s (the
// source's test override: the broker's is a server setting) and a target
// down for 6 s, no delivery stays unacked past 2.7 s (the timeout less its
// margin); the pipe gives the held messages back before — Defer again,
// which fails, then basic.nack requeue — and they come back and are
// delivered once the target works. Nothing is dead-lettered or lost.
// Before, the pipe held them for the whole outage (6 s here; on a real
// broker past 30 min the channel is closed and they are redelivered,
// counted).
//
// Relies on: a queue declare with other arguments than the queue's being
// refused (PRECONDITION_FAILED).
func TestThePipesHoldIsCappedByTheConsumerTimeout(t *testing.T) {
	dlx, dlq := rabbittest.DeclareDLX(t)
	q := rabbittest.Name(t, "")
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{DeadLetterExchange: dlx})
	takeDelayQueues(t, q)
	logs := &syncbuf.Buffer{}
	src, err := New(Config{URL: rabbittest.URL(t), Queue: q, WaitTime: 300 * time.Millisecond, BatchSize: 10, MaxConcurrency: 2,
		ManagementURL: ManagementOff, DeadLetterExchange: dlx})
	if err != nil {
		t.Fatal(err)
	}
	src.consumerTimeoutForTest = 3 * time.Second
	var mu sync.Mutex
	var first time.Time
	delivered := map[string]bool{}
	target := pipe.TargetFunc(func(_ context.Context, events []*pipe.Event) (pipe.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		if first.IsZero() {
			first = time.Now()
		}
		if time.Since(first) < 6*time.Second {
			return pipe.Result{}, errors.New("503 Service Unavailable")
		}
		for _, ev := range events {
			delivered[ev.Message.Body] = true
		}
		return pipe.Result{}, nil
	})
	p, err := pipe.New(pipe.Options{Name: "capped", Source: src, Target: target, BatchSize: 10, MaxConcurrency: 2,
		Drain: true, ShutdownTimeout: 10 * time.Second, Logger: slog.New(slog.NewJSONHandler(io.MultiWriter(logs), nil))})
	if err != nil {
		t.Fatal(err)
	}
	bodies := make([]string, 20)
	for i := range bodies {
		bodies[i] = fmt.Sprintf(`{"n":%d}`, i)
	}
	rabbittest.Publish(t, q, bodies...)
	stop := make(chan struct{})
	worst := oldestUnacked(src, stop)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	if err := p.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	close(stop)
	if err := src.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w := <-worst; w > src.maxUnacked()+500*time.Millisecond {
		t.Errorf("a delivery stayed unacked %v, past the cap %v (consumer timeout %v)", w.Round(time.Millisecond), src.maxUnacked(), src.consumerTimeout())
	} else {
		t.Logf("the oldest unacked delivery was %v old (cap %v)", w.Round(time.Millisecond), src.maxUnacked())
	}
	if !strings.Contains(logs.String(), "reached the source's limit") {
		t.Errorf("the pipe gave nothing back at the cap; the test proves nothing:\n%.2000s", logs.String())
	}
	if n := rabbittest.Count(t, dlq); n != 0 {
		t.Errorf("%d messages dead-lettered, want 0", n)
	}
	if n := rabbittest.Count(t, q); n != 0 {
		t.Errorf("%d messages left in the queue, want 0", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(delivered) != len(bodies) {
		t.Errorf("%d of %d messages delivered", len(delivered), len(bodies))
	}
}

// Deliveries the broker prefetched while the pipe takes none (its circuit
// open) wait in the consumer's buffer, at most the prefetch of them, and
// age towards the consumer timeout there too: the source gives them back
// before it, uncounted (a copy in a delay queue with the attempts before
// it), and they come again with a fresh age, at attempt 1. Nothing is
// lost.
func TestBufferedDeliveriesAreGivenBackBeforeTheConsumerTimeout(t *testing.T) {
	q := rabbittest.Name(t, "")
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{Quorum: true, DeliveryLimit: 1})
	logs := &syncbuf.Buffer{}
	src, err := New(Config{URL: rabbittest.URL(t), Queue: q, WaitTime: 300 * time.Millisecond, Prefetch: 5,
		ManagementURL: ManagementOff, DeliveryLimit: 1, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	src.consumerTimeoutForTest = 2 * time.Second
	if _, err := src.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = src.Close(context.Background()) }()
	rabbittest.Publish(t, q, "a", "b", "c", "d", "e", "f", "g", "h")
	ss, err := src.current(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(ss.buf) < 5 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(ss.buf); n != 5 {
		t.Fatalf("%d deliveries in the buffer, want the prefetch (5)", n)
	}
	time.Sleep(3 * time.Second) // past the cap: the reaper gave them back
	if !strings.Contains(logs.String(), "close to the broker's consumer_timeout") {
		t.Fatalf("nothing was given back from the buffer:\n%.2000s", logs.String())
	}
	seen := map[string]bool{}
	deadline = time.Now().Add(20 * time.Second)
	for len(seen) < 8 && time.Now().Before(deadline) {
		msgs, err := src.Receive(t.Context(), 10)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		for _, m := range msgs {
			s := m.Body
			src.mu.Lock()
			e := src.inflight[m.ReceiptHandle]
			src.mu.Unlock()
			if age := now.Sub(e.received); age > src.maxUnacked() {
				t.Errorf("%s handed out %v after it came, past the cap", s, age)
			}
			if n := src.Attempts(m); n != 1 {
				t.Errorf("%s at attempt %d, want 1: giving it back counted", s, n)
			}
			seen[s] = true
		}
		if err := src.Ack(t.Context(), msgs); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != 8 {
		t.Errorf("received %d of 8 messages", len(seen))
	}
}
