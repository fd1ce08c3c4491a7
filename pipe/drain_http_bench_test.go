package pipe_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source/memory"
	"github.com/pipesproject/pipes/target/httptarget"
)

// BenchmarkDrainToHTTPTarget is batch assembly as a pipe does it: 2,000
// messages of 1 KB from a memory queue, each batch of ten records POSTed by
// the http target to a real HTTP server in this process that counts the
// records. B/msg and allocs/msg are the whole process's (the server's
// included) per message; the records' encoding and the request bodies are
// in them.
func BenchmarkDrainToHTTPTarget(b *testing.B) {
	const n = 2000
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var records []json.RawMessage
		if json.Unmarshal(body, &records) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		got.Add(int64(len(records)))
	}))
	defer srv.Close()
	ctx := context.Background()
	body := `{"kind":"order","pad":"` + strings.Repeat("x", 1000) + `","amount":`
	var mallocs, bytes uint64
	var ms runtime.MemStats
	for b.Loop() {
		b.StopTimer()
		q, err := memory.NewBroker().Queue("bench", memory.Options{})
		if err != nil {
			b.Fatal(err)
		}
		for i := range n {
			if _, err := q.Send(ctx, memory.SendInput{Body: body + strconv.Itoa(i) + `}`}); err != nil {
				b.Fatal(err)
			}
		}
		tgt, err := httptarget.New(httptarget.Config{URL: srv.URL, Batch: true})
		if err != nil {
			b.Fatal(err)
		}
		p, err := pipe.New(pipe.Options{Name: "bench", Source: benchSource{q}, Target: tgt, Drain: true, MaxConcurrency: 4, InitialConcurrency: 4})
		if err != nil {
			b.Fatal(err)
		}
		got.Store(0)
		runtime.ReadMemStats(&ms)
		m0, b0 := ms.Mallocs, ms.TotalAlloc
		b.StartTimer()
		if err := p.Run(ctx); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		runtime.ReadMemStats(&ms)
		mallocs += ms.Mallocs - m0
		bytes += ms.TotalAlloc - b0
		if got.Load() != n {
			b.Fatalf("the server got %d records, want %d", got.Load(), n)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(mallocs)/float64(b.N)/n, "allocs/msg")
	b.ReportMetric(float64(bytes)/float64(b.N)/n, "B/msg")
}
