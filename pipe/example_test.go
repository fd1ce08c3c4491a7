package pipe_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/source/memory"
	"github.com/pipesproject/pipes/source/sourcetest"
	"github.com/pipesproject/pipes/target/targettest"
)

// exampleQueue is a memory queue holding bodies, for the examples.
func exampleQueue(b *memory.Broker, name string, bodies ...string) *memory.Queue {
	q, err := b.Queue(name, memory.Options{WaitTime: 50 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	for _, body := range bodies {
		if _, err := q.Send(context.Background(), memory.SendInput{Body: body}); err != nil {
			panic(err)
		}
	}
	return q
}

// A pipe in Go, without YAML: a memory queue as the source and a Go
// function as the target. The target reads each message body with Body;
// Drain makes Run return once the queue is empty.
func Example() {
	q := exampleQueue(memory.NewBroker(), "orders", `{"order":1,"total":30}`, `{"order":2,"total":12}`, "not JSON")
	var mu sync.Mutex
	var seen []string
	target := pipe.TargetFunc(func(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range events {
			body, isJSON := ev.Body() // decoded JSON, else the raw string
			if order, ok := body.(map[string]any); isJSON && ok {
				seen = append(seen, fmt.Sprintf("order %v: %v", order["order"], order["total"]))
			} else {
				seen = append(seen, fmt.Sprintf("text %q", body))
			}
		}
		return pipe.Result{}, nil // nothing failed: every message is deleted
	})
	p, err := pipe.New(pipe.Options{Name: "orders", Source: q, Target: target, Drain: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := p.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	sort.Strings(seen)
	fmt.Println(strings.Join(seen, "\n"))
	fmt.Println("left in the queue:", q.Stats().Visible+q.Stats().InFlight)
	// Output:
	// order 1: 30
	// order 2: 12
	// text "not JSON"
	// left in the queue: 0
}

// A target decides each item's fate in its Result: an item not named
// succeeded; one failed with Permanent is dead-lettered now (here to a Go
// function as the pipe's DeadLetter target); one with a RetryAfter comes
// back after that delay; any other failure is retried by the source's
// rules.
func Example_itemFailures() {
	q := exampleQueue(memory.NewBroker(), "payments", `{"id":"ok"}`, `{"id":"poison"}`, `{"id":"busy"}`)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var mu sync.Mutex
	var dead []string
	busyTries := 0
	done := func() { // called under mu
		if busyTries == 2 && len(dead) == 1 {
			stop() // a graceful stop once both have happened
		}
	}
	target := pipe.TargetFunc(func(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		var res pipe.Result
		for _, ev := range events {
			body, _ := ev.Body()
			switch body.(map[string]any)["id"] {
			case "poison":
				res.Failures = append(res.Failures, pipe.ItemFailure{ID: ev.ID(), Err: pipe.Permanent(errors.New("no such account"))})
			case "busy":
				if busyTries++; busyTries == 1 { // the downstream said: come back in 100 ms
					res.Failures = append(res.Failures, pipe.ItemFailure{ID: ev.ID(), Err: errors.New("busy"), RetryAfter: 100 * time.Millisecond})
				}
			}
		}
		done()
		return res, nil
	})
	deadLetter := pipe.TargetFunc(func(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range events {
			dead = append(dead, ev.Message.Body) // the original body
		}
		done()
		return pipe.Result{}, nil
	})
	p, err := pipe.New(pipe.Options{Source: q, Target: target, DeadLetter: deadLetter})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := p.Run(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("dead-lettered:", dead)
	fmt.Println("busy tried", busyTries, "times")
	fmt.Println("left:", q.Stats().Visible+q.Stats().InFlight+q.Stats().Delayed)
	// Output:
	// dead-lettered: [{"id":"poison"}]
	// busy tried 2 times
	// left: 0
}

// A Runner runs several pipes and stops them together: cancelling its
// context is a graceful stop (no new receives; batches in flight finish
// and are settled; what is left is given back to its queue).
func ExampleRunner() {
	b := memory.NewBroker()
	orders := exampleQueue(b, "orders", "o1", "o2", "o3")
	refunds := exampleQueue(b, "refunds", "r1", "r2")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var mu sync.Mutex
	got := map[string]int{}
	counting := func(name string, want int) pipe.Target {
		return pipe.TargetFunc(func(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			got[name] += len(events)
			if got["orders"] == 3 && got["refunds"] == 2 {
				stop() // both have all their messages: stop
			}
			return pipe.Result{}, nil
		})
	}
	var ps []*pipe.Pipe
	for _, o := range []pipe.Options{
		{Name: "orders", Source: orders, Target: counting("orders", 3)},
		{Name: "refunds", Source: refunds, Target: counting("refunds", 2)},
	} {
		p, err := pipe.New(o)
		if err != nil {
			fmt.Println(err)
			return
		}
		ps = append(ps, p)
	}
	if err := pipe.NewRunner(ps...).Run(ctx); err != nil { // nil after a graceful stop
		fmt.Println(err)
		return
	}
	fmt.Println("orders:", got["orders"], "refunds:", got["refunds"])
	fmt.Println("left:", orders.Stats().Visible+orders.Stats().InFlight, refunds.Stats().Visible+refunds.Stats().InFlight)
	// Output:
	// orders: 3 refunds: 2
	// left: 0 0
}

// ackCountingSource is a custom Source: it decorates another (a memory queue
// here, an in-house broker's client in real life) and counts what it
// acknowledged. Embedding the queue keeps its optional abilities
// (Extender, Terminator, Opener, …); Ack is overridden.
type ackCountingSource struct {
	*memory.Queue
	acked atomic.Int64
}

func (s *ackCountingSource) Ack(ctx context.Context, msgs []*source.Message) error {
	if err := s.Queue.Ack(ctx, msgs); err != nil {
		return err
	}
	s.acked.Add(int64(len(msgs)))
	return nil
}

var _ source.Source = (*ackCountingSource)(nil)

// A custom Source is any type with Receive, Ack and Nak; source/sourcetest
// is the contract suite it must pass (TestAckCountingSourcePassesSourcetest
// runs it on this one).
func Example_customSource() {
	src := &ackCountingSource{Queue: exampleQueue(memory.NewBroker(), "audit", "a", "b", "c")}
	p, err := pipe.New(pipe.Options{Source: src, Drain: true,
		Target: pipe.TargetFunc(func(context.Context, []*pipe.Event) (pipe.Result, error) { return pipe.Result{}, nil })})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := p.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("acked:", src.acked.Load())
	// Output: acked: 3
}

func TestAckCountingSourcePassesSourcetest(t *testing.T) {
	sourcetest.Run(t, sourcetest.Harness{
		New: func(t *testing.T, o sourcetest.QueueOptions) (source.Source, func(*testing.T, ...string)) {
			q, err := memory.NewBroker().Queue("contract", memory.Options{VisibilityTimeout: o.VisibilityTimeout, WaitTime: o.WaitTime})
			if err != nil {
				t.Fatal(err)
			}
			return &ackCountingSource{Queue: q}, func(t *testing.T, bodies ...string) { send(t, q, bodies...) }
		},
	})
}

// storeTarget is a custom Target: it keeps each payload, as a database
// or an in-house API would. It is safe for concurrent use, as the pipe
// calls Deliver from several batches at once.
type storeTarget struct {
	mu   sync.Mutex
	rows [][]byte
}

// Deliver stores every event's payload: the record JSON, or what the
// pipe's input template made of it. A payload it cannot take would be an
// ItemFailure naming that event (Permanent to dead-letter it).
func (s *storeTarget) Deliver(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
	if err := ctx.Err(); err != nil {
		return pipe.Result{}, fmt.Errorf("storing %d events: %w", len(events), err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range events {
		s.rows = append(s.rows, append([]byte(nil), ev.RecordJSON...))
	}
	return pipe.Result{}, nil
}

var _ pipe.Target = (*storeTarget)(nil)

// A custom Target is any type with Deliver; target/targettest is the
// contract suite it must pass (TestStoreTargetPassesTargettest runs it on
// this one). The payload a target gets is the message's record, as JSON.
func Example_customTarget() {
	q := exampleQueue(memory.NewBroker(), "rows", `{"n":1}`)
	store := &storeTarget{}
	p, err := pipe.New(pipe.Options{Source: q, Target: store, Drain: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := p.Run(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	row := string(store.rows[0])
	fmt.Println(strings.HasPrefix(row, `{"messageId":`), strings.Contains(row, `"body":"{\"n\":1}"`))
	// Output: true true
}

func TestStoreTargetPassesTargettest(t *testing.T) {
	targettest.Run(t, targettest.Harness{
		New: func(t *testing.T) (pipe.Target, targettest.Inspect) {
			s := &storeTarget{}
			return s, func(*testing.T) [][]byte {
				s.mu.Lock()
				defer s.mu.Unlock()
				return append([][]byte(nil), s.rows...)
			}
		},
	})
}
