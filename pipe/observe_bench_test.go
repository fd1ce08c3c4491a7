package pipe_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source/memory"
)

// BenchmarkDrainWithObserver is BenchmarkDrainToNoopTarget at concurrency
// 5 with an observer set (one that adds up what it is told): the cost of
// the observer hooks per message, to compare with the run without one.
func BenchmarkDrainWithObserver(b *testing.B) {
	benchDrainObserved(b, func() observed { return &watcher{} })
}

// BenchmarkDrainWithIdleTap is BenchmarkDrainWithObserver with an observer
// that is also a pipe.Tap no one watches (a status page with its live tail
// on and closed): the cost of asking Tapping at each stage of a batch.
func BenchmarkDrainWithIdleTap(b *testing.B) {
	benchDrainObserved(b, func() observed { return &tapper{} })
}

// observed is an observer that counts what it was told.
type observed interface {
	core.Observer
	deliveredCount() int
}

func (w *watcher) deliveredCount() int { return w.delivered }

func benchDrainObserved(b *testing.B, newObserver func() observed) {
	const n = 10000
	ctx := context.Background()
	target := pipe.TargetFunc(func(context.Context, []*pipe.Event) (pipe.Result, error) { return pipe.Result{}, nil })
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
			MaxConcurrency: 5, InitialConcurrency: 5})
		if err != nil {
			b.Fatal(err)
		}
		w := newObserver()
		p.SetObserver(w)
		runtime.ReadMemStats(&ms)
		before := ms.Mallocs
		b.StartTimer()
		if err := p.Run(ctx); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		runtime.ReadMemStats(&ms)
		mallocs += ms.Mallocs - before
		if w.deliveredCount() != n {
			b.Fatalf("observed %d delivered, want %d", w.deliveredCount(), n)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(mallocs)/float64(b.N)/n, "allocs/msg")
}
