package main

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/pipe"
)

// BenchmarkDrainSQSToHTTP is the whole hot path in one process, for
// profiles (`go test -run '^$' -bench DrainSQS -cpuprofile cpu.out
// ./bench/`): a pipe (sqs source on local-aws-sqs, http target batching
// records as they are, concurrency 4) drains 2,000 × 200 B messages per
// iteration and stops. The target is this process's own HTTP server (its
// CPU is in the figures); filling the queue is not timed but is in a CPU
// profile (SendMessageBatch). cpu-µs/msg is this process's user+system CPU.
// It relies on nothing server-specific. Without the server's packages
// (.ci/sqs) it is skipped, and fails under CI=true.
func BenchmarkDrainSQSToHTTP(b *testing.B) {
	const n, size, conc = 2000, 200, 4
	root, err := repoRoot()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, ".ci", "sqs", "node_modules")); err != nil {
		if os.Getenv("CI") == "true" {
			b.Fatalf("the SQS server's packages are missing under CI: %v", err)
		}
		b.Skip("no .ci/sqs/node_modules: run npm ci there")
	}
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"} {
		b.Setenv(k, v)
	}
	ctx := context.Background()
	srv, err := startServer(ctx, root, "local-aws-sqs")
	if err != nil {
		b.Fatal(err)
	}
	defer srv.stop()
	tgt, err := startTarget()
	if err != nil {
		b.Fatal(err)
	}
	defer tgt.close()
	dir := b.TempDir()
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		url, err := srv.createQueue(ctx, "bench-drain", 60*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		if err := srv.fill(ctx, url, 0, n, size); err != nil {
			b.Fatal(err)
		}
		tgt.reset(0)
		file := filepath.Join(dir, "pipe.yaml")
		yaml := pipelineYAML(srv.endpoint, pipeSpec{queueURL: url, wait: time.Second, maxConc: conc, initConc: conc, record: true, targetURL: tgt.url})
		if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
			b.Fatal(err)
		}
		specs, err := config.Load(file)
		if err != nil {
			b.Fatal(err)
		}
		built, err := pipes.NewRegistry().Build(ctx, specs, pipes.Env{Drain: true})
		if err != nil {
			b.Fatal(err)
		}
		c0 := processCPU()
		b.StartTimer()
		if err := pipe.NewRunner(built...).Run(ctx); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += processCPU() - c0
		if got := tgt.items.Load(); got != n {
			b.Fatalf("the target got %d of %d messages", got, n)
		}
		srv.deleteQueue(url)
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*n), "cpu-µs/msg")
	b.ReportMetric(0, "ns/op")
}

// processCPU is this process's user+system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
