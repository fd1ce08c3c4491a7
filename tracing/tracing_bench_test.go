package tracing_test

import (
	"context"
	"testing"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/internal/otlptest"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/tracing"
)

// BenchmarkTracedBatchOfTen is the per-batch cost of tracing on: a batch
// span with links from five of ten messages' traceparents, four stage
// spans, the outcome attributes, exported to an in-process receiver by the
// SDK's batch processor (which drops what its queue cannot hold, so the
// export is not what is timed).
func BenchmarkTracedBatchOfTen(b *testing.B) {
	rcv := otlptest.Start(b)
	ctx := context.Background()
	p, err := tracing.New(ctx, tracing.Config{Endpoint: rcv.URL})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Shutdown(ctx)
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	batch := make([]*source.Message, 10)
	for i := range batch {
		m := &source.Message{MessageID: "m", Attributes: map[string]string{}}
		if i%2 == 0 {
			m.MessageAttributes = map[string]source.MessageAttribute{"traceparent": {DataType: "String", StringValue: &tp}}
		}
		batch[i] = m
	}
	b.ReportAllocs()
	for b.Loop() {
		c, span := p.StartBatch(ctx, "bench", batch)
		for _, st := range []string{"filter", "enrichment", "target", "settle"} {
			_, end := span.Stage(c, st)
			end(nil)
		}
		span.End(core.BatchOutcome{Messages: 10, Delivered: 10})
	}
}
