// Command heapprobe runs the pipes of a pipeline file in process, as
// `pipes run` does, and serves what the benchmark's live-heap measurement
// needs (issue 11):
//
//	GET /metrics  the pipes' series (pipes_inflight_messages, ...)
//	GET /heap     forces two garbage collections, then answers the live
//	              heap and the goroutine stacks as JSON: {"heap_alloc": B,
//	              "heap_inuse": B, "stack_inuse": B, "goroutines": N}
//	GET /debug/pprof/heap  the heap profile (`?gc=1` collects first)
//	GET /debug/pprof/goroutine  the goroutine profile (`?debug=1`: text)
//
// It sets the Go memory limit and GC target as `pipes run` does with its
// default --max-inflight-bytes; -cpuprofile writes a CPU profile of the
// run (the bench's -cpu-profiles).
//
// HeapAlloc right after runtime.GC is the heap that is reachable, not the
// garbage awaiting a collection that /metrics' go_memstats show between
// collections. StackInuse is the memory of goroutine stacks (the
// runtime's /memory/classes/heap/stacks:bytes), which HeapAlloc leaves
// out: a goroutine parked per in-flight batch shows there. It stops on SIGINT or SIGTERM.
//
//	heapprobe -f pipeline.yaml -addr 127.0.0.1:9100
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime"
	rpprof "runtime/pprof"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/budget"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/pipe"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "heapprobe:", err)
		os.Exit(1)
	}
}

func run() error {
	file := flag.String("f", "", "pipeline file")
	rate := flag.Int("memprofilerate", 0, "runtime.MemProfileRate for /debug/pprof/heap (0: Go's default)")
	addr := flag.String("addr", "127.0.0.1:0", "address of /metrics and /heap")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	flag.Parse()
	if *file == "" {
		return errors.New("-f is required")
	}
	if *rate > 0 {
		runtime.MemProfileRate = *rate
	}
	// As `pipes run` with its default --max-inflight-bytes.
	budget.ApplyMemoryLimit(256<<20, os.Getenv)
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("creating the CPU profile: %w", err)
		}
		defer f.Close()
		if err := rpprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("starting the CPU profile: %w", err)
		}
		defer rpprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	specs, err := config.Load(*file)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	built, err := pipes.NewRegistry().Build(ctx, specs, pipes.Env{Metrics: pipe.NewMetrics(reg), Logger: log})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/debug/pprof/heap", pprof.Handler("heap"))
	mux.Handle("/debug/pprof/goroutine", pprof.Handler("goroutine"))
	mux.HandleFunc("/heap", func(w http.ResponseWriter, _ *http.Request) {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]uint64{"heap_alloc": ms.HeapAlloc, "heap_inuse": ms.HeapInuse,
			"stack_inuse": ms.StackInuse, "goroutines": uint64(runtime.NumGoroutine())})
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", *addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	return pipe.NewRunner(built...).Run(ctx)
}
