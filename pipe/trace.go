package pipe

import (
	"context"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/source"
)

// Tracer starts the spans of a pipe's batches (Options.Tracer). It is
// optional: with none set the runtime starts no span and allocates
// nothing for tracing. Package tracing's Provider is the
// module's OpenTelemetry one; implementations must be safe for concurrent use: every batch of every pipe calls
// StartBatch from its own goroutine. A Tracer never settles or changes a
// message.
type Tracer interface {
	// StartBatch starts the span of one batch of the named pipe and
	// returns a context carrying it, handed to the batch's stages (so an
	// http target or enrichment sends its traceparent). It does not
	// block.
	StartBatch(ctx context.Context, pipe string, batch []*source.Message) (context.Context, core.BatchSpan)
}

// batchSpanKey is the context key of the batch span, for the stages.
type batchSpanKey struct{}

// startBatchSpan starts the batch's span when the pipe has a Tracer;
// otherwise it returns ctx and nil at no cost.
func (p *Pipe) startBatchSpan(ctx context.Context, batch []*delivery) (context.Context, core.BatchSpan) {
	if p.opt.Tracer == nil {
		return ctx, nil
	}
	msgs := make([]*source.Message, len(batch))
	for i, d := range batch {
		msgs[i] = d.Message
	}
	ctx, span := p.opt.Tracer.StartBatch(ctx, p.opt.Name, msgs)
	if span == nil {
		return ctx, nil
	}
	return context.WithValue(ctx, batchSpanKey{}, span), span
}

// stage starts the span of a stage of the batch in ctx; without tracing it
// returns ctx and a function that does nothing, allocating nothing.
func (p *Pipe) stage(ctx context.Context, name string) (context.Context, func(error)) {
	if p.opt.Tracer == nil {
		return ctx, noStage
	}
	span, _ := ctx.Value(batchSpanKey{}).(core.BatchSpan)
	if span == nil {
		return ctx, noStage
	}
	return span.Stage(ctx, name)
}

func noStage(error) {}

// endBatchSpan ends span (nil: none) with the counts of the verdicts.
func endBatchSpan(span core.BatchSpan, v []verdict, err error) {
	if span == nil {
		return
	}
	o := core.BatchOutcome{Messages: len(v), Err: err}
	for _, x := range v {
		switch x.outcome {
		case outSucceeded:
			o.Delivered++
		case outFiltered:
			o.Filtered++
		case outReleased:
			o.Released++
		default:
			o.Failed++
		}
	}
	span.End(o)
}

// filterStage starts the filter stage's span when the pipe has a filter
// and a batch span; it returns the function that ends it.
func (p *Pipe) filterStage(ctx context.Context) func(error) {
	if p.opt.Filter == nil {
		return noStage
	}
	_, end := p.stage(ctx, "filter")
	return end
}
