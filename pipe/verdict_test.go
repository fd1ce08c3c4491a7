package pipe_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source/memory"
)

// An outage is no verdict, from its first batch: on a queue whose redrive
// policy dead-letters at the first failed receive (maxReceiveCount 1),
// 1.5 s of a target refusing connections, over 200 messages in batches of
// 10 with 5 in flight, dead-letters no good message and spends none of
// their receives: each is delivered on its first receive. The bad ones
// (named failed by the target: a verdict) are all dead-lettered, and the
// dead-letter count says exactly them. Before, the batches that failed
// before the circuit opened were settled as failures: 30 good messages
// went to the DLQ.
func TestAnOutageIsNoVerdictFromItsFirstBatch(t *testing.T) {
	b := memory.NewBroker()
	q := newQueue(t, b, "orders", memory.Options{VisibilityTimeout: 300 * time.Millisecond, MaxReceiveCount: 1, DeadLetterQueue: "orders-dlq"})
	const n = 200
	all := make([]string, n)
	for i := range all {
		kind := "good"
		if i%10 == 3 {
			kind = "bad"
		}
		all[i] = fmt.Sprintf(`{%q:%d}`, kind, i)
	}
	send(t, q, all...)
	var mu sync.Mutex
	var first time.Time
	delivered := map[string]int{} // good body → receive count at its success
	var outageCalls atomic.Int64
	target := pipe.TargetFunc(func(_ context.Context, events []*pipe.Event) (pipe.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		if first.IsZero() {
			first = time.Now()
		}
		if time.Since(first) < 1500*time.Millisecond {
			outageCalls.Add(1)
			return pipe.Result{}, errors.New("dial tcp 127.0.0.1:9: connect: connection refused")
		}
		var res pipe.Result
		for _, ev := range events {
			if strings.Contains(ev.Message.Body, "bad") {
				res.Failures = append(res.Failures, pipe.ItemFailure{ID: ev.ID()})
				continue
			}
			delivered[ev.Message.Body] = ev.Message.ReceiveCount()
		}
		return res, nil
	})
	metrics := pipe.NewMetrics(nil)
	runDrain(t, pipe.Options{Name: "orders", Source: drainable{q}, Target: target, Metrics: metrics,
		BatchSize: 10, InitialConcurrency: 5, MaxConcurrency: 5})
	if outageCalls.Load() < 3 {
		t.Fatalf("%d target calls in the outage, want the circuit to open (3 at least)", outageCalls.Load())
	}
	dlq, _ := b.Lookup("orders-dlq")
	bad := 0
	for _, m := range dlq.Snapshot() {
		if !strings.Contains(m.Body, "bad") {
			t.Errorf("a good message was dead-lettered: %s", m.Body)
			continue
		}
		bad++
	}
	if bad != n/10 {
		t.Errorf("%d bad messages dead-lettered, want %d", bad, n/10)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(delivered) != n-n/10 {
		t.Errorf("%d good messages delivered, want %d", len(delivered), n-n/10)
	}
	for body, rc := range delivered {
		if rc != 1 {
			t.Errorf("%s delivered on receive %d, want 1 (the outage spent its receives)", body, rc)
		}
	}
	if got := testutil.ToFloat64(metrics.DeadLettered.WithLabelValues("orders")); got != n/10 {
		t.Errorf("messages_dead_lettered_total = %v, want %d (the bad ones only)", got, n/10)
	}
}

// The circuit closes only on a probe that the target answered: a batch
// that started before the circuit opened and succeeds after it opened
// says nothing of the target now, and leaves it open (it used to close
// it: the circuit opened and closed within milliseconds). Once the target
// works, the next probe closes it.
func TestTheCircuitClosesOnlyOnAProbeThatSucceeded(t *testing.T) {
	b := memory.NewBroker()
	q := newQueue(t, b, "orders", memory.Options{VisibilityTimeout: time.Minute})
	send(t, q, `{"slow":1}`)
	var down atomic.Bool
	down.Store(true)
	release := make(chan struct{})
	slowStarted := make(chan struct{})
	var slowDone atomic.Bool
	target := pipe.TargetFunc(func(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
		if strings.Contains(events[0].Message.Body, "slow") && !slowDone.Load() {
			close(slowStarted)
			<-release
			slowDone.Store(true)
			return pipe.Result{}, nil // it started before the outage: it succeeds
		}
		if down.Load() {
			return pipe.Result{}, errors.New("503 Service Unavailable")
		}
		return pipe.Result{}, nil
	})
	metrics := pipe.NewMetrics(nil)
	p := startPipe(t, pipe.Options{Name: "orders", Source: q, Target: target, Metrics: metrics,
		BatchSize: 1, InitialConcurrency: 5, MaxConcurrency: 5})
	open := func() bool { return testutil.ToFloat64(metrics.CircuitOpen.WithLabelValues("orders")) == 1 }
	<-slowStarted
	send(t, q, `{"n":1}`, `{"n":2}`, `{"n":3}`, `{"n":4}`)
	waitUntil(t, open)
	close(release)
	waitUntil(t, slowDone.Load)
	time.Sleep(300 * time.Millisecond) // the first probe is 1 s after the opening
	if !open() || p.Ready() {
		t.Fatalf("a batch started before the circuit opened closed it by succeeding (circuit_open %v, ready %v)", open(), p.Ready())
	}
	down.Store(false)
	deadline := time.Now().Add(15 * time.Second)
	for open() {
		if time.Now().After(deadline) {
			t.Fatal("the circuit did not close within 15 s of the target working again")
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitUntil(t, func() bool { return q.Stats().Deleted == 5 })
	if !p.Ready() {
		t.Errorf("not ready after the circuit closed: %v", p.LastError())
	}
}
