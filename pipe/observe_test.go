package pipe_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source/memory"
)

// watcher is an Observer that adds up what it is told.
type watcher struct {
	mu                                  sync.Mutex
	received, delivered, filtered, dead int
	oldest                              time.Time
	failures                            []core.Failure
}

func (w *watcher) Received(n int, oldest time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.received += n
	if w.oldest.IsZero() || oldest.Before(w.oldest) {
		w.oldest = oldest
	}
}

func (w *watcher) Settled(delivered, filtered int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.delivered += delivered
	w.filtered += filtered
}

func (w *watcher) Failed(f core.Failure) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failures = append(w.failures, f)
}

func (w *watcher) DeadLettered(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dead += n
}

func (w *watcher) Scaled(core.ScalingDecision) {}

// onlyOdd is a filter that lets through the bodies holding "keep".
type onlyKeep struct{}

func (onlyKeep) Match(_ context.Context, ev *pipe.Event) (bool, error) {
	return strings.Contains(ev.Message.Body, "keep"), nil
}

func TestTheObserverSeesWhatTheMetricsCount(t *testing.T) {
	long := `{"keep":"bad","pad":"` + strings.Repeat("é", 400) + `"}`
	for _, tc := range []struct {
		name       string
		execData   bool
		wantSample bool
	}{
		{name: "without execution data failures carry no sample", execData: false},
		{name: "with execution data failures carry a sample of at most 512 bytes", execData: true, wantSample: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := memory.NewBroker()
			q := newQueue(t, b, "orders", memory.Options{VisibilityTimeout: 100 * time.Millisecond, MaxReceiveCount: 2, DeadLetterQueue: "orders-dlq"})
			send(t, q, `{"keep":1}`, `{"keep":2}`, `{"drop":3}`, long)
			w := &watcher{}
			rec := &recorder{fail: func(ev *pipe.Event) bool { return strings.Contains(ev.Message.Body, "bad") }}
			p, err := pipe.New(pipe.Options{Source: drainable{q}, Target: rec, Filter: onlyKeep{}, Drain: true,
				IncludeExecutionData: tc.execData})
			if err != nil {
				t.Fatal(err)
			}
			p.SetObserver(w)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := p.Run(ctx); err != nil {
				t.Fatal(err)
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.received != 5 || w.delivered != 2 || w.filtered != 1 || w.dead != 1 || len(w.failures) != 2 {
				t.Fatalf("observed received %d delivered %d filtered %d dead-lettered %d failures %d, want 5 2 1 1 2",
					w.received, w.delivered, w.filtered, w.dead, len(w.failures))
			}
			if w.oldest.IsZero() || time.Since(w.oldest) > time.Minute {
				t.Fatalf("oldest message sent at %v", w.oldest)
			}
			f := w.failures[1]
			if f.Stage != "target" || f.Attempts != 2 || f.Err == nil || f.MessageID == "" {
				t.Fatalf("failure %+v: want stage target, attempt 2, an error and an id", f)
			}
			if got := f.Sample != ""; got != tc.wantSample {
				t.Fatalf("sample %q, want one: %v", f.Sample, tc.wantSample)
			}
			if len(f.Sample) > core.SampleLimit || !strings.HasPrefix(long, f.Sample) || !utf8Valid(f.Sample) {
				t.Fatalf("sample of %d bytes is not a whole-character prefix of at most %d", len(f.Sample), core.SampleLimit)
			}
		})
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

func TestAPausedPipeReceivesNothingAndResumes(t *testing.T) {
	b := memory.NewBroker()
	q := newQueue(t, b, "orders", memory.Options{})
	rec := &recorder{}
	p := startPipe(t, pipe.Options{Source: q, Target: rec})
	waitUntil(t, p.Ready)
	p.Pause()
	if !p.Status().Paused {
		t.Fatal("Status does not say paused")
	}
	// The receive under way (a 50 ms long poll) returns; none starts after.
	waitUntil(t, func() bool { return p.Status().Receiving == 0 })
	send(t, q, bodies(5, `{"n":%d}`)...)
	time.Sleep(300 * time.Millisecond) // six wait times: a polling pipe would have taken them
	if st := q.Stats(); st.Received != 0 || st.Visible != 5 {
		t.Fatalf("a paused pipe received %d messages (%d left visible), want 0 and 5", st.Received, st.Visible)
	}
	p.Resume()
	waitUntil(t, func() bool { return q.Stats().Deleted == 5 })
	p.stop(t, time.Minute, "Run did not return")
}
