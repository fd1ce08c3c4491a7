package pipe_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source/memory"
)

// tapper is a watcher that is also a Tap, tapping while on is set.
type tapper struct {
	watcher
	on     atomic.Bool
	mu     sync.Mutex
	events []core.TapEvent
}

func (t *tapper) Tapping() bool { return t.on.Load() }
func (t *tapper) Tapped(e core.TapEvent) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.events = append(t.events, e)
}

// stages are the stages and details the tap saw of a message, in order.
func (t *tapper) stages(body string) (id string, out []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.events {
		if e.Stage == core.TapReceived && e.Sample == body {
			id = e.MessageID
		}
	}
	for _, e := range t.events {
		if e.MessageID == id {
			out = append(out, strings.TrimSuffix(e.Stage+" "+e.Detail, " "))
		}
	}
	return id, out
}

func TestATapSeesEachMessagePassTheStages(t *testing.T) {
	cases := []struct {
		name      string
		tapping   bool
		execData  bool
		body      string
		want      string
		wantEmpty bool
	}{
		{"a message that passes the filter reaches the target", true, true, `{"kind":"order"}`, "received|filter passed|target|outcome succeeded", false},
		{"a message the filter drops ends there", true, true, `{"kind":"other"}`, "received|filter filtered out|outcome filtered", false},
		{"a message the target refuses fails", true, true, `{"kind":"order","bad":true}`, "received|filter passed|target|outcome failed: target: refused", false},
		{"nothing is tapped while no one watches", false, true, `{"kind":"order"}`, "", true},
		{"without execution data no sample is kept", true, false, `{"kind":"order"}`, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			q, err := memory.NewBroker().Queue("tap", memory.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := q.Send(ctx, memory.SendInput{Body: tc.body}); err != nil {
				t.Fatal(err)
			}
			target := pipe.TargetFunc(func(_ context.Context, evs []*pipe.Event) (pipe.Result, error) {
				var res pipe.Result
				for _, ev := range evs {
					if strings.Contains(ev.Message.Body, "bad") {
						res.Failures = append(res.Failures, pipe.ItemFailure{ID: ev.ID(), Err: errString("refused")})
					}
				}
				return res, nil
			})
			p, err := pipe.New(pipe.Options{Name: "tap", Source: q, Target: target, IncludeExecutionData: tc.execData,
				Filter: pipe.FilterFunc(func(_ context.Context, ev *pipe.Event) (bool, error) {
					return strings.Contains(ev.Message.Body, "order"), nil
				})})
			if err != nil {
				t.Fatal(err)
			}
			tp := &tapper{}
			tp.on.Store(tc.tapping)
			p.SetObserver(tp)
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- p.Run(rctx) }()
			for settled := false; !settled; {
				time.Sleep(10 * time.Millisecond)
				tp.watcher.mu.Lock()
				settled = tp.delivered+tp.filtered+len(tp.failures) > 0
				tp.watcher.mu.Unlock()
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			_, got := tp.stages(tc.body)
			if tc.wantEmpty {
				if len(got) != 0 {
					t.Fatalf("tapped %v, want nothing of the body", got)
				}
				return
			}
			if strings.Join(got, "|") != tc.want {
				t.Fatalf("stages %q, want %q", strings.Join(got, "|"), tc.want)
			}
		})
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func TestTheTapsTargetSampleCarriesNoReceiptHandle(t *testing.T) {
	ctx := context.Background()
	q, err := memory.NewBroker().Queue("tap", memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Send(ctx, memory.SendInput{Body: `{"kind":"order"}`}); err != nil {
		t.Fatal(err)
	}
	var handles []string
	var mu sync.Mutex
	target := pipe.TargetFunc(func(_ context.Context, evs []*pipe.Event) (pipe.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range evs {
			handles = append(handles, ev.Message.ReceiptHandle)
			if !strings.Contains(string(ev.PayloadBytes()), `"receiptHandle"`) {
				t.Errorf("the target's own input lost its receiptHandle: %s", ev.PayloadBytes())
			}
		}
		return pipe.Result{}, nil
	})
	p, err := pipe.New(pipe.Options{Name: "tap", Source: q, Target: target, IncludeExecutionData: true})
	if err != nil {
		t.Fatal(err)
	}
	tp := &tapper{}
	tp.on.Store(true)
	p.SetObserver(tp)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	for settled := false; !settled; {
		time.Sleep(10 * time.Millisecond)
		tp.watcher.mu.Lock()
		settled = tp.delivered > 0
		tp.watcher.mu.Unlock()
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(handles) == 0 || handles[0] == "" {
		t.Fatalf("the memory queue gave no receipt handle: %q", handles)
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	seen := false
	for _, e := range tp.events {
		if e.Stage != core.TapTarget {
			continue
		}
		seen = true
		if strings.Contains(e.Sample, "receiptHandle") || strings.Contains(e.Sample, handles[0]) {
			t.Errorf("the target's sample shows the lease: %s", e.Sample)
		}
		if !strings.Contains(e.Sample, `"messageId"`) || !strings.Contains(e.Sample, `kind`) {
			t.Errorf("the target's sample lost the record: %s", e.Sample)
		}
	}
	if !seen {
		t.Fatal("no target event tapped")
	}
}
