package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// Results is what a harness run writes to bench/results/results.json; a run
// of some scenarios keeps the others' figures from earlier runs.
type Results struct {
	Machine string `json:"machine"`
	Cores   int    `json:"cores"`
	Date    string `json:"date"`
	Command string `json:"command"`
	Go      string `json:"go"`
	// Commit is the HEAD the measured tree was on (plus uncommitted work).
	Commit string `json:"commit,omitempty"`
	// Also lists later runs of some scenarios (date: command) whose
	// figures replaced those of the main run.
	Also []string `json:"also,omitempty"`

	Throughput *ThroughputResult `json:"throughput,omitempty"`
	SameJob    *SameJobResult    `json:"samejob,omitempty"`
	Calls      *CallsResult      `json:"calls,omitempty"`
	Idle       *IdleResult       `json:"idle,omitempty"`
	ScaleUp    []ScaleUpResult   `json:"scaleup,omitempty"`
	Memory     []MemoryResult    `json:"memory,omitempty"`
	Heap       []HeapResult      `json:"heap,omitempty"`
	Trickle    *TrickleResult    `json:"trickle,omitempty"`
	RateLimit  *RateLimitResult  `json:"ratelimit,omitempty"`
	Crash      []CrashResult     `json:"crash,omitempty"`
	RabbitJob  *RabbitJobResult  `json:"rabbitjob,omitempty"`
}

// RateLimitResult is a drain under the source's rate_limit.
type RateLimitResult struct {
	RateLimit          float64 `json:"rate_limit"`
	Messages           int     `json:"messages"`
	Concurrency        int     `json:"concurrency"`
	Seconds            float64 `json:"seconds"`
	MsgsPerSec         float64 `json:"msgs_per_sec"`
	Receives           float64 `json:"receives"`
	ReceivesPerMessage float64 `json:"receives_per_message"`
}

// TrickleResult is the cost of one message reaching an idle pipe that
// was at a high concurrency.
type TrickleResult struct {
	Concurrency       int     `json:"concurrency"`
	WaitTime          string  `json:"wait_time"`
	StartupReceives   float64 `json:"startup_receives"`
	ReceivesForOne    float64 `json:"receives_for_one_message"`
	ConcurrencyBefore float64 `json:"concurrency_before"`
	ConcurrencyAfter  float64 `json:"concurrency_after"`
}

// ThroughputResult compares pipes with the minimal consumer.
type ThroughputResult struct {
	N           int    `json:"n"`
	Size        int    `json:"size"`
	Concurrency int    `json:"concurrency"`
	WaitTime    string `json:"wait_time"`
	Runs        []Run  `json:"runs"`

	Pipes   RunnerSummary `json:"pipes"`
	Minimal RunnerSummary `json:"minimal"`
	// ThroughputRatio and CPURatio are pipes/minimal of the medians.
	ThroughputRatio float64 `json:"throughput_ratio"`
	CPURatio        float64 `json:"cpu_ratio"`
	// ServerBound says the server used most of a core during the runs:
	// throughput then tells the server's limit, not the runner's.
	ServerBound bool   `json:"server_bound"`
	Note        string `json:"note"`
}

// SameJobResult compares pipes with the hand-written same-job consumer
// (bench/samejob) and, when it was given, Benthos, at each concurrency.
type SameJobResult struct {
	N        int    `json:"n"`
	Size     int    `json:"size"`
	WaitTime string `json:"wait_time"`
	Rounds   int    `json:"rounds"`
	// Benthos is the -benthos binary's version ("" when none was given).
	Benthos string         `json:"benthos,omitempty"`
	Levels  []SameJobLevel `json:"levels"`
}

// SameJobLevel is the same-job comparison at one concurrency.
type SameJobLevel struct {
	Concurrency int            `json:"concurrency"`
	Runs        []Run          `json:"runs"`
	Pipes       RunnerSummary  `json:"pipes"`
	SameJob     RunnerSummary  `json:"samejob"`
	Benthos     *RunnerSummary `json:"benthos,omitempty"`
	// CPURatio and BenthosRatio are CPU per message while draining of
	// pipes and of Benthos over the same-job consumer's (medians);
	// LifetimeCPURatio is pipes' over the same-job consumer's with
	// start-up and stop.
	CPURatio         float64 `json:"cpu_ratio"`
	BenthosRatio     float64 `json:"benthos_cpu_ratio,omitempty"`
	LifetimeCPURatio float64 `json:"lifetime_cpu_ratio,omitempty"`
	// SameJobVersus holds pipes ÷ each variant of the same-job consumer
	// over plain HTTP (Runs, Pipes and SameJob above are the plain HTTP
	// runs; SameJob is the variant "default").
	SameJobVersus
	// TLS is the same comparison through the harness's TLS proxy (nil when
	// it did not run).
	TLS *SameJobTLS `json:"tls,omitempty"`
}

// SameJobTLS is the same-job comparison at one concurrency with every
// runner reaching the server through the TLS proxy (AWS_CA_BUNDLE).
type SameJobTLS struct {
	Runs  []Run         `json:"runs"`
	Pipes RunnerSummary `json:"pipes"`
	SameJobVersus
}

// SameJobVersus compares pipes with each variant of the same-job consumer
// run in the same rounds.
type SameJobVersus struct {
	Consumers []SameJobConsumer `json:"consumers,omitempty"`
	// Best is the variant with the least CPU per message while draining
	// (median); BestCPURatio is pipes' over it.
	Best         string  `json:"best,omitempty"`
	BestCPURatio float64 `json:"best_cpu_ratio,omitempty"`
}

// SameJobConsumer is one variant of the same-job consumer (see
// sameJobVariants) and pipes' ratios over it.
type SameJobConsumer struct {
	// Variant is default, gomaxprocs1, pool or gomaxprocs1+pool; Runner
	// the runner name of its runs.
	Variant string        `json:"variant"`
	Runner  string        `json:"runner"`
	Summary RunnerSummary `json:"summary"`
	// CPURatio is pipes' CPU per message while draining over this
	// variant's (medians); LifetimeCPURatio the same with start-up and
	// stop.
	CPURatio         float64 `json:"cpu_ratio"`
	LifetimeCPURatio float64 `json:"lifetime_cpu_ratio,omitempty"`
}

// Run is one drain of N messages by one runner.
type Run struct {
	Runner      string `json:"runner"`
	Rep         int    `json:"rep"`
	Concurrency int    `json:"concurrency,omitempty"`
	// Transport is "tls" for a run through the TLS proxy, "" for plain
	// HTTP; TLSHandshakes counts the runner's new connections through it
	// from its start to its stop.
	Transport     string  `json:"transport,omitempty"`
	TLSHandshakes int64   `json:"tls_handshakes,omitempty"`
	Seconds       float64 `json:"seconds"`
	MsgsPerSec    float64 `json:"msgs_per_sec"`
	CPUSeconds    float64 `json:"cpu_seconds"`
	CPUPer1000    float64 `json:"cpu_per_1000"`
	// DrainCPUPer1000 is the CPU from the first message at the target to
	// the last, per 1000 of the messages delivered in between: the drain
	// without start-up and stop.
	DrainCPUPer1000 float64 `json:"drain_cpu_per_1000,omitempty"`
	ServerCPU       float64 `json:"server_cpu_seconds"`
	ServerCPUShare  float64 `json:"server_cpu_share"` // server CPU seconds / wall seconds
	Delivered       int64   `json:"delivered"`
}

// RunnerSummary holds the medians of one runner's runs.
type RunnerSummary struct {
	MsgsPerSec      float64 `json:"msgs_per_sec"`
	CPUPer1000      float64 `json:"cpu_per_1000"`
	DrainCPUPer1000 float64 `json:"drain_cpu_per_1000,omitempty"`
	ServerCPUShare  float64 `json:"server_cpu_share"`
	ServerPer1000   float64 `json:"server_cpu_per_1000"`
	// TLSHandshakes is the median of the runs' TLS handshakes (runs
	// through the TLS proxy only).
	TLSHandshakes float64 `json:"tls_handshakes,omitempty"`
}

// CallsResult is pipes' API calls per message under load.
type CallsResult struct {
	Received   float64            `json:"received"`
	Deleted    float64            `json:"deleted"`
	Calls      map[string]float64 `json:"calls"`
	PerMessage map[string]float64 `json:"per_message"`
}

// IdleResult is pipes' API calls on an empty queue once scaled down.
type IdleResult struct {
	WaitTime          string             `json:"wait_time"`
	Seconds           float64            `json:"seconds"`
	Calls             map[string]float64 `json:"calls"`
	ReceivesPerMinute float64            `json:"receives_per_minute"`
	CallsPerHour      float64            `json:"calls_per_hour"`
	FloorPerMinute    float64            `json:"floor_per_minute"`
	ConcurrencyBefore float64            `json:"concurrency_before"`
	ConcurrencyAfter  float64            `json:"concurrency_after"`
}

// ScaleUpResult is one scale-up run.
type ScaleUpResult struct {
	Rate          int     `json:"scale_up_per_minute"`
	Initial       int     `json:"initial"`
	Max           int     `json:"max"`
	Backlog       int     `json:"backlog"`
	TargetDelay   string  `json:"target_delay"`
	Reached       bool    `json:"reached"`
	SecondsToFull float64 `json:"seconds_to_full"`
	// Extrapolated is the time to full concurrency from the measured slope
	// when the run stopped before reaching it.
	Extrapolated float64 `json:"extrapolated_seconds,omitempty"`
	PerMinute    float64 `json:"measured_per_minute"`
	CSV          string  `json:"csv"`
	Points       []Point `json:"points"`
}

// Point is one sample of the concurrency curve.
type Point struct {
	T           float64 `json:"t"`
	Concurrency float64 `json:"concurrency"`
	InFlight    float64 `json:"inflight_messages"`
}

// MemoryResult is one memory run at high concurrency with a slow target.
type MemoryResult struct {
	Concurrency       int     `json:"concurrency"`
	Size              int     `json:"size"`
	Budget            int64   `json:"max_inflight_bytes"`
	TargetDelay       string  `json:"target_delay"`
	Seconds           float64 `json:"seconds"`
	BaselineRSS       int64   `json:"baseline_rss"`
	PeakRSS           int64   `json:"peak_rss"`
	PeakHeap          float64 `json:"peak_heap"`
	PeakInflightBytes float64 `json:"peak_inflight_bytes"`
	PeakInflightMsgs  float64 `json:"peak_inflight_messages"`
	HeapPerInflight   float64 `json:"heap_per_inflight_message"`
	WithinBudget      bool    `json:"within_budget"`
}

// HeapResult is the memory per extra in-flight message at one message
// size: HeapAlloc after a forced GC, and the goroutine stacks
// (StackInuse), with LoMessages, then HiMessages, held at the target.
type HeapResult struct {
	Size       int     `json:"size"`
	LoMessages int     `json:"lo_messages"`
	HiMessages int     `json:"hi_messages"`
	LoHeap     uint64  `json:"lo_heap"`
	HiHeap     uint64  `json:"hi_heap"`
	PerMessage float64 `json:"per_message"` // heap only (issue 11's figure)
	// Target is 1.2 × the body + 2 KB: issue 11's target for the heap alone.
	Target float64 `json:"target"`

	// Visibility is the queue's visibility timeout during the run ("" in
	// runs before issue 20, which used 300 s: no heartbeat).
	Visibility string `json:"visibility,omitempty"`
	// LoStacks and HiStacks are the goroutine stacks (StackInuse) at each
	// level; LoGoroutines and HiGoroutines the goroutines.
	LoStacks     uint64 `json:"lo_stacks,omitempty"`
	HiStacks     uint64 `json:"hi_stacks,omitempty"`
	LoGoroutines uint64 `json:"lo_goroutines,omitempty"`
	HiGoroutines uint64 `json:"hi_goroutines,omitempty"`
	// StacksPerMessage is the stacks per extra message; TotalPerMessage
	// the heap and stacks together (all of it counted, issue 20).
	StacksPerMessage     float64 `json:"stacks_per_message,omitempty"`
	TotalPerMessage      float64 `json:"total_per_message,omitempty"`
	GoroutinesPerMessage float64 `json:"goroutines_per_message,omitempty"`
	// TotalTarget is 1.2 × the body + 3 KB, for TotalPerMessage.
	TotalTarget float64 `json:"total_target,omitempty"`
}

// loadResults reads dir/results.json; a missing file gives empty results.
func loadResults(dir string) (*Results, error) {
	data, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return &Results{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the results: %w", err)
	}
	var r Results
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", filepath.Join(dir, "results.json"), err)
	}
	return &r, nil
}

// save writes dir/results.json.
func (r *Results) save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the results: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the results: %w", err)
	}
	return nil
}

// median of xs (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// summarize computes the medians of runner's runs.
func summarize(runs []Run, runner string) RunnerSummary {
	var tp, cpu, drain, share, srv, hs []float64
	for _, r := range runs {
		if r.Runner != runner {
			continue
		}
		tp = append(tp, r.MsgsPerSec)
		cpu = append(cpu, r.CPUPer1000)
		if r.DrainCPUPer1000 > 0 {
			drain = append(drain, r.DrainCPUPer1000)
		}
		share = append(share, r.ServerCPUShare)
		hs = append(hs, float64(r.TLSHandshakes))
		if r.Delivered > 0 {
			srv = append(srv, r.ServerCPU/float64(r.Delivered)*1000)
		}
	}
	return RunnerSummary{MsgsPerSec: median(tp), CPUPer1000: median(cpu), DrainCPUPer1000: median(drain), ServerCPUShare: median(share), ServerPer1000: median(srv), TLSHandshakes: median(hs)}
}
