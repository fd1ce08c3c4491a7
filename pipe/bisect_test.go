package pipe_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source/memory"
)

// poisonTarget answers 500 to a whole batch that holds a poison record, as
// a target that cannot parse one record fails the whole request; other
// batches it takes. It records the good bodies in the order it took them.
type poisonTarget struct {
	slow      time.Duration // how long a batch without the poison takes
	mu        sync.Mutex
	delivered []string
	poisoned  int // calls failed for the poison
}

func (t *poisonTarget) Deliver(_ context.Context, events []*pipe.Event) (pipe.Result, error) {
	time.Sleep(2 * time.Millisecond)
	for _, ev := range events {
		if strings.Contains(ev.Message.Body, "poison") {
			t.mu.Lock()
			defer t.mu.Unlock()
			t.poisoned++
			return pipe.Result{}, errors.New("HTTP 500 Internal Server Error")
		}
	}
	time.Sleep(t.slow)
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ev := range events {
		t.delivered = append(t.delivered, ev.Message.Body)
	}
	return pipe.Result{}, nil
}

// A batch that fails whole every time while the target takes other
// batches is no outage but something in the batch: the pipe bisects it
// (Lambda's BisectBatchOnFunctionError), delivers the good messages, and
// the one that still fails whole on its own fails as a named failure
// would: its receives counted, dead-lettered by the redrive policy (3).
// Before, the batch was held and retried for ever (every 1 s … 60 s) and
// the drain never ended. Nothing is lost, no good message dead-lettered,
// and the dead-letter count says exactly the poison.
func TestAPoisonBatchIsBisectedAndThePoisonDeadLettered(t *testing.T) {
	for _, fifo := range []bool{false, true} {
		t.Run(map[bool]string{false: "standard", true: "fifo"}[fifo], func(t *testing.T) {
			b := memory.NewBroker()
			name := "orders"
			if fifo {
				name = "orders.fifo"
			}
			q := newQueue(t, b, name, memory.Options{FIFO: fifo, VisibilityTimeout: 300 * time.Millisecond,
				MaxReceiveCount: 3, DeadLetterQueue: name + "-dlq"})
			const n, poison = 200, 37
			var want []string
			for i := range n {
				body := fmt.Sprintf(`{"n":%d}`, i)
				if i == poison {
					body = fmt.Sprintf(`{"n":%d,"poison":true}`, i)
				} else {
					want = append(want, body)
				}
				in := memory.SendInput{Body: body}
				if fifo {
					in.GroupID, in.DeduplicationID = fmt.Sprintf("g%d", i%5), fmt.Sprint(i)
				}
				if _, err := q.Send(context.Background(), in); err != nil {
					t.Fatal(err)
				}
			}
			target := &poisonTarget{}
			metrics := pipe.NewMetrics(nil)
			start := time.Now()
			runDrain(t, pipe.Options{Name: "orders", Source: drainable{q}, Target: target, Metrics: metrics,
				BatchSize: 10, InitialConcurrency: 5, MaxConcurrency: 5})
			t.Logf("drained in %v; %d calls failed for the poison", time.Since(start).Round(time.Millisecond), target.poisoned)
			dlq, _ := b.Lookup(name + "-dlq")
			var dead []string
			for _, m := range dlq.Snapshot() {
				dead = append(dead, m.Body)
			}
			if len(dead) != 1 || !strings.Contains(dead[0], "poison") {
				t.Errorf("dead-lettered %q, want the poison only", dead)
			}
			target.mu.Lock()
			defer target.mu.Unlock()
			got := map[string]int{}
			for _, body := range target.delivered {
				got[body]++
			}
			for _, body := range want {
				if got[body] == 0 {
					t.Errorf("%s was never delivered", body)
				}
			}
			if fifo { // each group in order: a message is first taken after every earlier one of its group
				last := map[int]int{}
				seen := map[string]bool{}
				for _, body := range target.delivered {
					if seen[body] {
						continue
					}
					seen[body] = true
					var i int
					fmt.Sscanf(body, `{"n":%d}`, &i)
					if prev, ok := last[i%5]; ok && i < prev {
						t.Errorf("group g%d: %d delivered after %d", i%5, i, prev)
					}
					last[i%5] = i
				}
			}
			if s := q.Stats(); s.Visible+s.InFlight+s.Delayed != 0 {
				t.Errorf("left in the queue: %+v", s)
			}
			if got := testutil.ToFloat64(metrics.DeadLettered.WithLabelValues("orders")); got != 1 {
				t.Errorf("messages_dead_lettered_total = %v, want 1 (the poison)", got)
			}
		})
	}
}

// The halves of a poison batch fail before their siblings are answered
// (the target fails the poison at once and takes 200 ms for the others):
// those failures tell of the batch, not of the target, and do not count
// towards the breaker. Before, they did: three of them opened the
// circuit while the target worked, polling paused, and with nothing else
// to probe with the poison was probed alone until the end of the drain.
func TestAPoisonsHalvesDoNotOpenTheCircuit(t *testing.T) {
	b := memory.NewBroker()
	q := newQueue(t, b, "orders", memory.Options{VisibilityTimeout: time.Second, MaxReceiveCount: 3, DeadLetterQueue: "orders-dlq"})
	const n, poison = 40, 17
	bs := bodies(n, `{"n":%d}`)
	bs[poison] = `{"n":17,"poison":true}`
	send(t, q, bs...)
	c := newCapture()
	target := &poisonTarget{slow: 200 * time.Millisecond}
	runDrain(t, pipe.Options{Name: "orders", Source: drainable{q}, Target: target, Logger: slog.New(c),
		BatchSize: 10, InitialConcurrency: 5, MaxConcurrency: 5})
	if opened := c.atOrAbove(slog.LevelInfo, "circuit open"); len(opened) > 0 {
		t.Errorf("the circuit opened on the poison's halves: %+v", opened[0])
	}
	dlq, _ := b.Lookup("orders-dlq")
	if dead := dlq.Snapshot(); len(dead) != 1 || !strings.Contains(dead[0].Body, "poison") {
		t.Errorf("dead-lettered %v, want the poison only", dead)
	}
	target.mu.Lock()
	defer target.mu.Unlock()
	if len(target.delivered) < n-1 {
		t.Errorf("%d good messages delivered, want %d", len(target.delivered), n-1)
	}
}

// Bisection needs the target to take other batches started after a
// batch's failure: an outage in the middle of the traffic, with batches in
// flight that succeed as it begins, still counts nothing. On a queue that
// dead-letters at the first failed receive, 2 s of 503s over 400
// messages dead-letter none.
func TestAnOutageAmidTrafficIsNotBisected(t *testing.T) {
	b := memory.NewBroker()
	q := newQueue(t, b, "orders", memory.Options{VisibilityTimeout: 300 * time.Millisecond, MaxReceiveCount: 1, DeadLetterQueue: "orders-dlq"})
	send(t, q, bodies(400, `{"n":%d}`)...)
	var mu sync.Mutex
	var first time.Time
	target := pipe.TargetFunc(func(_ context.Context, events []*pipe.Event) (pipe.Result, error) {
		mu.Lock()
		if first.IsZero() {
			first = time.Now()
		}
		since := time.Since(first)
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		if since > 150*time.Millisecond && since < 2150*time.Millisecond {
			return pipe.Result{}, errors.New("HTTP 503 Service Unavailable")
		}
		return pipe.Result{}, nil
	})
	metrics := pipe.NewMetrics(nil)
	p, err := pipe.New(pipe.Options{Name: "orders", Source: drainable{q}, Target: target, Metrics: metrics, Drain: true,
		BatchSize: 5, InitialConcurrency: 5, MaxConcurrency: 5})
	if err != nil {
		t.Fatal(err)
	}
	obs := &countingObserver{}
	p.SetObserver(obs)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Run(ctx); err != nil || ctx.Err() != nil {
		t.Fatalf("the pipe did not drain: %v %v", err, ctx.Err())
	}
	// The outage's messages did fail at the target: failed_total and the
	// status page's failures count them; nothing counts them dead-lettered.
	if obs.failed.Load() == 0 || testutil.ToFloat64(metrics.Failed.WithLabelValues("orders", "target")) == 0 {
		t.Errorf("the outage's failures were not counted (observer %d)", obs.failed.Load())
	}
	if n := obs.dead.Load(); n != 0 {
		t.Errorf("the status page counts %d messages dead-lettered by an outage", n)
	}
	if got := testutil.ToFloat64(metrics.DeadLettered.WithLabelValues("orders")); got != 0 {
		t.Errorf("messages_dead_lettered_total = %v, want 0", got)
	}
	dlq, _ := b.Lookup("orders-dlq")
	if got := dlq.Snapshot(); len(got) != 0 {
		t.Errorf("%d good messages dead-lettered by an outage, e.g. %s", len(got), got[0].Body)
	}
	if s := q.Stats(); s.Deleted != 400 {
		t.Errorf("%d deleted, want 400", s.Deleted)
	}
}

// A dry run bisects a poison batch too, and settles nothing: the good
// messages reach the target, the poison's verdict gives no verb, and the
// drain ends (before, the held poison batch kept it running for ever);
// every message is still in the queue, none dead-lettered.
func TestADryRunBisectsAPoisonBatchAndSettlesNothing(t *testing.T) {
	b := memory.NewBroker()
	q := newQueue(t, b, "orders", memory.Options{VisibilityTimeout: 300 * time.Millisecond, MaxReceiveCount: 3, DeadLetterQueue: "orders-dlq"})
	all := bodies(50, `{"n":%d}`)
	all[17] = `{"n":17,"poison":true}`
	send(t, q, all...)
	target := &poisonTarget{}
	runDrain(t, pipe.Options{Name: "orders", Source: q, Target: target, DryRun: true,
		BatchSize: 10, InitialConcurrency: 5, MaxConcurrency: 5})
	target.mu.Lock()
	got := map[string]bool{}
	for _, body := range target.delivered {
		got[body] = true
	}
	target.mu.Unlock()
	for i, body := range all {
		if i != 17 && !got[body] {
			t.Errorf("%s was never delivered", body)
		}
	}
	if s := q.Stats(); s.Deleted != 0 || len(q.Snapshot()) != 50 {
		t.Errorf("a dry run settled messages: %+v, %d stored", s, len(q.Snapshot()))
	}
	if dlq, _ := b.Lookup("orders-dlq"); len(dlq.Snapshot()) != 0 {
		t.Errorf("a dry run dead-lettered %d messages", len(dlq.Snapshot()))
	}
}

// countingObserver counts what the status page is told of failures.
type countingObserver struct{ failed, dead atomic.Int64 }

func (*countingObserver) Received(int, time.Time)     {}
func (*countingObserver) Settled(int, int)            {}
func (o *countingObserver) Failed(core.Failure)       { o.failed.Add(1) }
func (o *countingObserver) DeadLettered(n int)        { o.dead.Add(int64(n)) }
func (*countingObserver) Scaled(core.ScalingDecision) {}
