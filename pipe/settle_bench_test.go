package pipe_test

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source/memory"
)

// benchSource is a memory queue that reports its pending messages, so that
// a draining pipe waits for the last batches to settle.
type benchSource struct{ *memory.Queue }

func (s benchSource) Pending(context.Context) (int, error) {
	st := s.Stats()
	return st.Visible + st.InFlight + st.Delayed, nil
}

// BenchmarkDrainToNoopTarget is the runtime's cost per message: a pipe
// drains 10,000 messages from a short-polled memory queue to a target that
// takes every batch at once (receive, batch, settle with batched deletes).
// ns/msg and allocs/msg include the memory queue's own work.
func BenchmarkDrainToNoopTarget(b *testing.B) {
	const n = 10000
	for _, conc := range []int{5, 50} {
		b.Run("concurrency="+strconv.Itoa(conc), func(b *testing.B) {
			ctx := context.Background()
			var delivered atomic.Int64
			target := pipe.TargetFunc(func(_ context.Context, events []*pipe.Event) (pipe.Result, error) {
				delivered.Add(int64(len(events)))
				return pipe.Result{}, nil
			})
			var elapsed time.Duration
			var mallocs uint64
			var ms runtime.MemStats
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				q, err := memory.NewBroker().Queue("bench", memory.Options{})
				if err != nil {
					b.Fatal(err)
				}
				for i := range n {
					if _, err := q.Send(ctx, memory.SendInput{Body: `{"kind":"order","amount":` + strconv.Itoa(i) + `}`}); err != nil {
						b.Fatal(err)
					}
				}
				p, err := pipe.New(pipe.Options{Name: "bench", Source: benchSource{q}, Target: target, Drain: true,
					MaxConcurrency: conc, InitialConcurrency: conc})
				if err != nil {
					b.Fatal(err)
				}
				delivered.Store(0)
				runtime.ReadMemStats(&ms)
				before := ms.Mallocs
				start := time.Now()
				b.StartTimer()
				if err := p.Run(ctx); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				elapsed += time.Since(start)
				runtime.ReadMemStats(&ms)
				mallocs += ms.Mallocs - before
				if got := delivered.Load(); got != n {
					b.Fatalf("the target got %d messages, want %d", got, n)
				}
				if st := q.Stats(); st.Deleted != n {
					b.Fatalf("%d messages deleted, want %d", st.Deleted, n)
				}
				b.StartTimer()
			}
			runs := float64(b.N)
			b.ReportMetric(float64(elapsed.Nanoseconds())/runs/n, "ns/msg")
			b.ReportMetric(float64(mallocs)/runs/n, "allocs/msg")
		})
	}
}
