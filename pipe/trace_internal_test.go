package pipe

import (
	"context"
	"testing"
)

// TestTracingOffAllocatesNothing: without a Tracer the hooks of a batch
// (its span, its stages, its end) cost no allocation.
func TestTracingOffAllocatesNothing(t *testing.T) {
	p := &Pipe{opt: Options{Filter: FilterFunc(func(context.Context, *Event) (bool, error) { return true, nil })}}
	batch := []*Delivery{{}}
	v := []verdict{{outcome: Succeeded}}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		c, span := p.startBatchSpan(ctx, batch)
		p.filterStage(c)(nil)
		sc, end := p.stage(c, "target")
		end(nil)
		_ = sc
		endBatchSpan(span, v, nil)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per batch with tracing off, want 0", allocs)
	}
}

// BenchmarkBatchHooksWithoutTracer is the per-batch cost of the tracing
// hooks when tracing is off.
func BenchmarkBatchHooksWithoutTracer(b *testing.B) {
	p := &Pipe{}
	batch := []*Delivery{{}}
	v := []verdict{{outcome: Succeeded}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c, span := p.startBatchSpan(ctx, batch)
		p.filterStage(c)(nil)
		_, end := p.stage(c, "target")
		end(nil)
		_, end = p.stage(c, "settle")
		end(nil)
		endBatchSpan(span, v, nil)
	}
}

// BenchmarkExecutionIDPerBatch is the per-batch cost of the execution id
// at the default level (error): one small context, two random words.
func BenchmarkExecutionIDPerBatch(b *testing.B) {
	e := newExecLog(nil, "error", false)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = e.begin(ctx, 10)
	}
}
