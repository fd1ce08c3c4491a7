package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pipesproject/pipes/config"
)

func TestTheRabbitJobPipelineFileLoads(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pipe.yaml")
	yaml := rabbitPipelineYAML("amqp://guest:guest@127.0.0.1:5672/", "bench-q", "http://127.0.0.1:9/", 10, 16)
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	ps, err := config.Load(file)
	if err != nil {
		t.Fatalf("the rabbitjob pipeline file does not load: %v\n%s", err, yaml)
	}
	s := ps[0].Source
	if s.Type != "rabbitmq" || s.Queue != "bench-q" || s.BatchSize != 10 || s.MaxConcurrency != 16 || s.InitialConcurrency != 16 || s.Prefetch != 0 {
		t.Errorf("source %+v: want rabbitmq bench-q, batches of 10, concurrency 16 from the start, the default prefetch", s)
	}
	if ps[0].Filter != nil || ps[0].Target.InputTemplate != "" {
		t.Errorf("the pipe filters or templates: records are to go as they are")
	}
}

func TestRabbitJobVariantsAreParsedWithTheDefaultFirst(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{in: "default,gomaxprocs1,gomaxprocs1+channels", want: []string{"rabbitjob", "rabbitjob-gomaxprocs1", "rabbitjob-gomaxprocs1-channels"}},
		{in: "channels,channels", want: []string{"rabbitjob", "rabbitjob-channels"}},
		{in: "", want: []string{"rabbitjob"}},
		{in: "pool", err: `-rabbitjob-variants: unknown variant "pool" (want default,gomaxprocs1,channels,gomaxprocs1+channels)`},
	} {
		vs, err := parseRabbitVariants(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, v := range vs {
			got = append(got, v.runner)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: runners %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestTheReportPrintsPipesOverTheHandWrittenRabbitMQConsumer(t *testing.T) {
	r := &Results{RabbitJob: &RabbitJobResult{N: 20000, Size: 200, Batch: 10, Rounds: 3, Queue: "classic, durable, persistent messages",
		Levels: []RabbitJobLevel{{
			Concurrency: 4, Prefetch: 40, Load: "1.10 → 1.30",
			Pipes: RunnerSummary{DrainCPUPer1000: 0.050, CPUPer1000: 0.052, MsgsPerSec: 6000},
			Consumers: []RabbitJobConsumer{
				{Variant: "default", Summary: RunnerSummary{DrainCPUPer1000: 0.060, CPUPer1000: 0.061, MsgsPerSec: 7000}, CPURatio: 0.83, ThroughputRatio: 0.86},
				{Variant: "gomaxprocs1", Summary: RunnerSummary{DrainCPUPer1000: 0.045, CPUPer1000: 0.046, MsgsPerSec: 6500}, CPURatio: 1.11, ThroughputRatio: 0.92},
			},
			Best: "gomaxprocs1", BestCPURatio: 1.11, Fastest: "default", ThroughputRatio: 0.86,
		}}}}
	var b strings.Builder
	if err := writeReport(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| RabbitMQ same job, concurrency 4, prefetch 40: CPU µs per msg, pipes (records as they are) | 50.0 (52.0 with start-up and stop; 6000 msgs/s while draining) | 20000 × 200 B, classic, durable, persistent messages queue, batches of 10, medians of 3 rotated rounds, load 1.10 → 1.30;",
		"| RabbitMQ same job, concurrency 4, prefetch 40: CPU µs per msg, hand-written amqp091-go consumer (bench/rabbitjob, GOMAXPROCS=1) | 45.0 (46.0 with start-up and stop; 6500 msgs/s while draining); pipes ÷ it: CPU 1.11, msgs/s 0.92 |  |  |",
		"| RabbitMQ same job, concurrency 4, prefetch 40: CPU ratio pipes ÷ the best hand-written consumer (GOMAXPROCS=1) | 1.11 | ≤ 1.0 | **no** |",
		"| RabbitMQ same job, concurrency 4, prefetch 40: throughput ratio pipes ÷ the fastest hand-written consumer (as a user writes it: a shared channel, an ack per message) | 0.86 | ≥ 0.9 | **no** |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
}
