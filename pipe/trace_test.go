package pipe_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/source/memory"
)

// stageKey marks the context a stage span returns, so the test sees which
// context the enrichment and the target got.
type stageKey struct{}

// recordingTracer is a pipe.Tracer that records what the runtime tells it.
type recordingTracer struct {
	mu      sync.Mutex
	batches []*recordedBatch
}

type recordedBatch struct {
	pipe     string
	messages int
	stages   []string
	errs     map[string]error
	outcome  *core.BatchOutcome
}

func (r *recordingTracer) StartBatch(ctx context.Context, name string, batch []*source.Message) (context.Context, core.BatchSpan) {
	b := &recordedBatch{pipe: name, messages: len(batch), errs: map[string]error{}}
	r.mu.Lock()
	r.batches = append(r.batches, b)
	r.mu.Unlock()
	return ctx, &recordedSpan{r: r, b: b}
}

type recordedSpan struct {
	r *recordingTracer
	b *recordedBatch
}

func (s *recordedSpan) Stage(ctx context.Context, name string) (context.Context, func(error)) {
	s.r.mu.Lock()
	s.b.stages = append(s.b.stages, name)
	s.r.mu.Unlock()
	return context.WithValue(ctx, stageKey{}, name), func(err error) {
		s.r.mu.Lock()
		s.b.errs[name] = err
		s.r.mu.Unlock()
	}
}

func (s *recordedSpan) End(o core.BatchOutcome) {
	s.r.mu.Lock()
	s.b.outcome = &o
	s.r.mu.Unlock()
}

type ctxEnricher struct{ saw *[]string }

func (e ctxEnricher) Enrich(ctx context.Context, events []*pipe.Event) ([]*pipe.Event, pipe.Result, error) {
	name, _ := ctx.Value(stageKey{}).(string)
	*e.saw = append(*e.saw, "enrichment got "+name)
	return events, pipe.Result{}, nil
}

// TestATracedBatchHasAStageSpanPerStageAndItsOutcomes runs a pipe with a
// recording Tracer: each batch has its stages in order, the enrichment and
// the target get their stage's context, the target's error ends its stage,
// and the outcome counts add up to the batch.
func TestATracedBatchHasAStageSpanPerStageAndItsOutcomes(t *testing.T) {
	b := memory.NewBroker()
	q := newQueue(t, b, "traced", memory.Options{VisibilityTimeout: 100 * time.Millisecond})
	send(t, q, "keep-1", "keep-2", "skip-1")
	var saw []string
	var mu sync.Mutex
	tr := &recordingTracer{}
	failed := false
	target := pipe.TargetFunc(func(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		name, _ := ctx.Value(stageKey{}).(string)
		saw = append(saw, "target got "+name)
		if !failed {
			failed = true
			return pipe.Result{}, errors.New("down")
		}
		return pipe.Result{}, nil
	})
	filter := pipe.FilterFunc(func(_ context.Context, ev *pipe.Event) (bool, error) {
		return strings.HasPrefix(ev.Message.Body, "keep"), nil
	})
	runDrain(t, pipe.Options{Name: "traced", Source: drainable{q}, Filter: filter, Enricher: ctxEnricher{&saw}, Target: target,
		Tracer: tr, InitialConcurrency: 1, MaxConcurrency: 2, BatchSize: 10})

	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.batches) < 2 {
		t.Fatalf("%d batches traced, want the failed one and its retry", len(tr.batches))
	}
	delivered, filtered, failedN := 0, 0, 0
	for i, bt := range tr.batches {
		if bt.pipe != "traced" || bt.outcome == nil {
			t.Fatalf("batch %d: pipe %q, ended %v", i, bt.pipe, bt.outcome != nil)
		}
		if want := "filter enrichment target settle"; strings.Join(bt.stages, " ") != want {
			t.Errorf("batch %d stages %v, want %s", i, bt.stages, want)
		}
		o := bt.outcome
		if o.Messages != bt.messages || o.Delivered+o.Filtered+o.Failed+o.Released != o.Messages {
			t.Errorf("batch %d outcome %+v does not add up to %d", i, *o, bt.messages)
		}
		if (bt.errs["target"] != nil) != (o.Err != nil) || (o.Err != nil && o.Failed == 0) {
			t.Errorf("batch %d: target stage error %v, batch error %v, failed %d", i, bt.errs["target"], o.Err, o.Failed)
		}
		delivered, filtered, failedN = delivered+o.Delivered, filtered+o.Filtered, failedN+o.Failed
	}
	if delivered != 2 || filtered != 1 || failedN == 0 {
		t.Errorf("delivered %d, filtered %d, failed %d; want 2, 1 and the first try's failures", delivered, filtered, failedN)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range saw {
		if s != "enrichment got enrichment" && s != "target got target" {
			t.Errorf("a stage got another stage's context: %s", s)
		}
	}
}
