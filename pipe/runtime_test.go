package pipe_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pipesproject/pipes/budget"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source/memory"
)

// Defect 9: after the stop, a target that ignores the cancellation of its
// call does not hold Run past the shutdown timeout plus a few seconds; its
// messages are released and its late verdicts refused.
func TestShutdownTimeoutIsEnforcedOnATargetThatIgnoresCancellation(t *testing.T) {
	b := memory.NewBroker()
	q := newQueue(t, b, "orders", memory.Options{VisibilityTimeout: time.Hour})
	send(t, q, bodies(10, `{"n":%d}`)...)
	started := make(chan struct{}, 10)
	unblock := make(chan struct{})
	target := pipe.TargetFunc(func(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
		started <- struct{}{}
		<-unblock // ignores ctx
		return pipe.Result{}, nil
	})
	metrics := pipe.NewMetrics(nil)
	p := startPipe(t, pipe.Options{Source: q, Target: target, ShutdownTimeout: 300 * time.Millisecond, Metrics: metrics})
	<-started
	p.stop(t, 20*time.Second, "Run waited for a target that ignores its context")
	if st := q.Stats(); st.Visible != 10 || st.Deleted != 0 {
		t.Fatalf("after the stop: %+v, want all 10 released", st)
	}
	close(unblock) // the abandoned batch now answers: its acks are refused
	waitUntil(t, func() bool { return testutil.ToFloat64(metrics.DoubleSettles.WithLabelValues("pipe")) == 10 })
	if st := q.Stats(); st.Deleted != 0 {
		t.Fatalf("a late verdict was applied: %+v", st)
	}
}

// Abort (a second signal) ends the stop at once, releasing what is in
// flight, without waiting for the shutdown timeout.
func TestAbortCutsTheStopShort(t *testing.T) {
	b := memory.NewBroker()
	q := newQueue(t, b, "orders", memory.Options{VisibilityTimeout: time.Hour})
	send(t, q, bodies(5, `{"n":%d}`)...)
	started := make(chan struct{}, 10)
	target := pipe.TargetFunc(func(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
		started <- struct{}{}
		<-ctx.Done()
		return pipe.Result{}, ctx.Err()
	})
	p := startPipe(t, pipe.Options{Source: q, Target: target, ShutdownTimeout: time.Hour})
	<-started
	p.cancel()
	time.Sleep(50 * time.Millisecond)
	p.Abort()
	p.wait(t, 20*time.Second, "Run did not return after Abort")
	if st := q.Stats(); st.Visible != 5 {
		t.Fatalf("after Abort: %+v, want all 5 released", st)
	}
}

// Defect 10: messages received while the pipe stops are released and their
// bytes given back to a shared budget.
func TestAStoppingPipeGivesEveryByteBackToTheBudget(t *testing.T) {
	b := memory.NewBroker()
	q := newQueue(t, b, "orders", memory.Options{WaitTime: 2 * time.Second})
	budget := budget.New(1 << 20)
	p := startPipe(t, pipe.Options{Source: q, Target: &recorder{}, Budget: budget, InitialConcurrency: 5})
	waitUntil(t, p.Ready)
	time.Sleep(100 * time.Millisecond) // the receive is long-polling
	p.cancel()
	send(t, q, bodies(3, `{"late":%d}`)...) // taken by the poll under way
	p.wait(t, time.Minute, "Run did not return")
	if u := budget.Used(); u != 0 {
		t.Fatalf("the budget holds %d bytes after the pipe stopped, want 0", u)
	}
	if st := q.Stats(); st.Visible+int(st.Deleted) != 3 || st.InFlight != 0 {
		t.Fatalf("after the stop: %+v, want the late messages delivered or released", st)
	}
}

// Partial failures named by the target do not shrink concurrency (Lambda
// does not scale down on partial batch responses); batches failing whole
// do.
func TestNamedItemFailuresDoNotShrinkConcurrency(t *testing.T) {
	for _, tt := range []struct {
		name   string
		target pipe.Target
		shrink bool
	}{
		{"every item named failed", pipe.TargetFunc(func(_ context.Context, events []*pipe.Event) (pipe.Result, error) {
			ids := make([]string, len(events))
			for i, ev := range events {
				ids[i] = ev.ID()
			}
			return pipe.Fail(pipe.ErrReportedFailed, ids...), nil
		}), false},
		{"the target call fails", pipe.TargetFunc(func(context.Context, []*pipe.Event) (pipe.Result, error) {
			return pipe.Result{}, errors.New("503 service unavailable")
		}), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := memory.NewBroker()
			q := newQueue(t, b, "orders", memory.Options{VisibilityTimeout: 100 * time.Millisecond})
			send(t, q, bodies(200, `{"n":%d}`)...)
			p, err := pipe.New(pipe.Options{Source: q, Target: tt.target, InitialConcurrency: 8, MaxConcurrency: 8})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
			defer cancel()
			_ = p.Run(ctx)
			if shrunk := p.Concurrency() < 8; shrunk != tt.shrink {
				t.Fatalf("concurrency %d after 2.5 s, shrink %v, want %v", p.Concurrency(), shrunk, tt.shrink)
			}
		})
	}
}

// A target outage longer than maxReceiveCount × visibility dead-letters
// nothing: the circuit opens, polling stops, the failed batches are held
// (invisible, no receive spent) and probed until the target works again.
func TestATargetOutageBurnsNoReceiveCount(t *testing.T) {
	b := memory.NewBroker()
	q := newQueue(t, b, "orders", memory.Options{VisibilityTimeout: 200 * time.Millisecond, MaxReceiveCount: 3, DeadLetterQueue: "orders-dlq"})
	send(t, q, bodies(50, `{"n":%d}`)...)
	var down atomic.Bool
	down.Store(true)
	var calls atomic.Int64
	var delivered sync.Map
	target := pipe.TargetFunc(func(_ context.Context, events []*pipe.Event) (pipe.Result, error) {
		calls.Add(1)
		if down.Load() {
			return pipe.Result{}, errors.New("dial tcp 127.0.0.1:9: connect: connection refused")
		}
		for _, ev := range events {
			delivered.Store(ev.ID(), true)
		}
		return pipe.Result{}, nil
	})
	metrics := pipe.NewMetrics(nil)
	p := startPipe(t, pipe.Options{Name: "orders", Source: drainable{q}, Target: target, Metrics: metrics, Drain: true})
	// 4 s of outage: 20 visibility timeouts, enough to dead-letter
	// everything 6 times over without the breaker.
	waitUntil(t, func() bool { return testutil.ToFloat64(metrics.CircuitOpen.WithLabelValues("orders")) == 1 })
	if p.Ready() || p.LastError() == nil || !strings.Contains(p.LastError().Error(), "circuit open") {
		t.Errorf("while the circuit is open: ready %v, last error %v; want not ready with the reason", p.Ready(), p.LastError())
	}
	time.Sleep(4 * time.Second)
	if n := calls.Load(); n > 30 {
		t.Errorf("%d target calls in the outage, want a few probes", n)
	}
	down.Store(false)
	p.wait(t, 60*time.Second, "the pipe did not drain after the target came back")
	dlq, _ := b.Lookup("orders-dlq")
	if n := len(dlq.Snapshot()); n != 0 {
		t.Fatalf("%d messages dead-lettered by a target outage, want 0", n)
	}
	n := 0
	delivered.Range(func(any, any) bool { n++; return true })
	if n != 50 {
		t.Fatalf("%d delivered, want 50", n)
	}
	if got := testutil.ToFloat64(metrics.CircuitOpen.WithLabelValues("orders")); got != 0 {
		t.Fatalf("circuit_open = %v after the target came back, want 0", got)
	}
}

// Messages whose last receive allowed by the redrive policy failed are
// counted as dead-lettered: the queue moves them to its DLQ.
func TestTheLastAllowedReceiveCountsAsDeadLettered(t *testing.T) {
	b := memory.NewBroker()
	q := newQueue(t, b, "orders", memory.Options{VisibilityTimeout: 100 * time.Millisecond, MaxReceiveCount: 2, DeadLetterQueue: "orders-dlq"})
	send(t, q, `{"bad":1}`, `{"ok":1}`)
	rec := &recorder{fail: func(ev *pipe.Event) bool { return strings.Contains(ev.Message.Body, "bad") }}
	metrics := pipe.NewMetrics(nil)
	runDrain(t, pipe.Options{Name: "orders", Source: drainable{q}, Target: rec, Metrics: metrics})
	if got := testutil.ToFloat64(metrics.DeadLettered.WithLabelValues("orders")); got != 1 {
		t.Fatalf("messages_dead_lettered_total = %v, want 1", got)
	}
}

// A dry run on a live queue keeps at most 10,000 messages hidden: polling
// pauses there, so memory does not grow without bound; the stop releases
// them all, and nothing is deleted.
func TestADryRunHoldsABoundedNumberOfMessages(t *testing.T) {
	b := memory.NewBroker()
	q := newQueue(t, b, "orders", memory.Options{VisibilityTimeout: time.Hour})
	const n = 10_300
	for i := 0; i < n; i += 100 {
		send(t, q, bodies(100, `{"n":%d}`)...)
	}
	p := startPipe(t, pipe.Options{Source: q, Target: &recorder{}, DryRun: true, InitialConcurrency: 50, MaxConcurrency: 50})
	waitUntil(t, func() bool { return q.Stats().InFlight >= 10_000 })
	time.Sleep(300 * time.Millisecond)
	st := q.Stats()
	if st.InFlight > 10_000+10 || int(st.Received) > 10_000+10 {
		t.Fatalf("the dry run holds %d messages (%d received), want at most 10,000 and one receive", st.InFlight, st.Received)
	}
	p.stop(t, time.Minute, "Run did not return")
	if st := q.Stats(); st.Visible != n || st.Deleted != 0 {
		t.Fatalf("after the dry run: %+v, want all %d visible and none deleted", st, n)
	}
}

// Under a rate limit, receives still take ten messages a call (up to a
// second of tokens) and are paced: about 0.1 ReceiveMessage per message,
// not one call per token.
func TestARateLimitKeepsReceivesFull(t *testing.T) {
	b := memory.NewBroker()
	q := newQueue(t, b, "orders", memory.Options{})
	send(t, q, bodies(90, `{"n":%d}`)...)
	src := &countingDrainable{countingSource: &countingSource{Queue: q}}
	runDrain(t, pipe.Options{Source: src, Target: &recorder{}, RateLimit: 30, InitialConcurrency: 5})
	if st := q.Stats(); st.Deleted != 90 {
		t.Fatalf("deleted %d, want 90", st.Deleted)
	}
	// 9 full receives, plus the empty ones that end the drain.
	if n := src.calls.Load(); n > 15 {
		t.Fatalf("%d receives for 90 messages at rate_limit 30: want about 0.1 a message", n)
	}
}

// countingDrainable is a countingSource that reports what is left, so a
// draining pipe waits for it.
type countingDrainable struct{ *countingSource }

func (d *countingDrainable) Pending(context.Context) (int, error) {
	s := d.Stats()
	return s.Visible + s.InFlight + s.Delayed, nil
}
