package main

import (
	"bytes"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pipesproject/pipes/config"
)

// These tests cover the report, the plot and the parsers without a server;
// the harness itself only runs with `go run ./bench`.

func sampleResults() *Results {
	runs := []Run{
		{Runner: "pipes", Rep: 1, Seconds: 2, MsgsPerSec: 10000, CPUPer1000: 0.08, ServerCPUShare: 0.7, ServerCPU: 1.4, Delivered: 20000},
		{Runner: "minimal", Rep: 1, Seconds: 2, MsgsPerSec: 10500, CPUPer1000: 0.06, ServerCPUShare: 0.7, ServerCPU: 1.4, Delivered: 20000},
	}
	return &Results{
		Machine: "Test CPU", Cores: 2, Date: "2026-11-30 01:00 UTC", Command: "go run ./bench", Go: "go1.26",
		Throughput: &ThroughputResult{N: 20000, Size: 200, Concurrency: 16, WaitTime: "2s", Runs: runs,
			Pipes: summarize(runs, "pipes"), Minimal: summarize(runs, "minimal"), ThroughputRatio: 0.95, CPURatio: 1.33},
		Calls: &CallsResult{Received: 20000, Deleted: 20000,
			Calls:      map[string]float64{"ReceiveMessage": 2100, "DeleteMessageBatch": 2000},
			PerMessage: map[string]float64{"ReceiveMessage": 0.105, "DeleteMessageBatch": 0.1}},
		Idle: &IdleResult{WaitTime: "20s", Seconds: 60, ReceivesPerMinute: 3, CallsPerHour: 180, FloorPerMinute: 3},
		ScaleUp: []ScaleUpResult{
			{Rate: 300, Initial: 5, Max: 1000, Backlog: 10000, TargetDelay: "5s", Reached: true, SecondsToFull: 199, PerMinute: 300,
				Points: []Point{{T: 0, Concurrency: 5}, {T: 199, Concurrency: 1000}}},
			{Rate: 6000, Initial: 5, Max: 1000, Backlog: 10000, TargetDelay: "5s", SecondsToFull: 5, PerMinute: 3000, Extrapolated: 20},
		},
		Memory: []MemoryResult{
			{Concurrency: 1000, Size: 4096, Budget: 8 << 20, TargetDelay: "10s", PeakRSS: 100 << 20, PeakInflightBytes: 8 << 20, WithinBudget: true},
			{Concurrency: 1000, Size: 4096, TargetDelay: "10s", PeakRSS: 300 << 20, PeakInflightBytes: 40 << 20},
		},
		Trickle: &TrickleResult{Concurrency: 100, WaitTime: "20s", StartupReceives: 100, ReceivesForOne: 99, ConcurrencyBefore: 100},
		SameJob: &SameJobResult{N: 20000, Size: 200, WaitTime: "2s", Rounds: 3, Benthos: "Benthos v4.27.0", Levels: []SameJobLevel{{
			Concurrency: 4,
			Pipes:       RunnerSummary{DrainCPUPer1000: 0.09, CPUPer1000: 0.1, MsgsPerSec: 3000},
			SameJob:     RunnerSummary{DrainCPUPer1000: 0.1, CPUPer1000: 0.105, MsgsPerSec: 2900},
			Benthos:     &RunnerSummary{DrainCPUPer1000: 0.12, CPUPer1000: 0.13, MsgsPerSec: 2000},
			CPURatio:    0.9, LifetimeCPURatio: 0.95, BenthosRatio: 1.2,
		}}},
		Heap: []HeapResult{
			{Size: 4096, LoMessages: 200, HiMessages: 2000, LoHeap: 3 << 20, HiHeap: 15 << 20, PerMessage: 6990, Target: 6963.2},
			{Size: 200, LoMessages: 200, HiMessages: 2000, LoHeap: 3 << 20, HiHeap: 7 << 20, PerMessage: 2182, Target: 2288,
				Visibility: "30s", LoStacks: 1 << 20, HiStacks: 4 << 20, StacksPerMessage: 1802, TotalPerMessage: 3984, GoroutinesPerMessage: 0.12, TotalTarget: 3312},
		},
	}
}

func TestTheReportHasARowPerFigureWithItsTarget(t *testing.T) {
	var b strings.Builder
	if err := writeReport(&b, sampleResults()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Test CPU (2 cores)", "go run ./bench",
		"| Throughput ratio pipes/minimal | 0.95 | ≥ 0.9 | yes |",
		"| CPU ratio pipes/minimal | 1.33 | ≤ 1.5 | yes |",
		"ReceiveMessage calls per message | 0.1050",
		"DeleteMessage calls per message | 0.0000",
		"| Idle ReceiveMessage per minute (empty queue) | 3.00",
		"scale_up_per_minute 300", "199.0 s", "not reached; ≈ 20 s extrapolated",
		"--max-inflight-bytes 8.0 MiB", "--max-inflight-bytes no limit",
		"one message reaching an idle pipe at concurrency 100 (wait 20s) | 99",
		"| Same job, concurrency 4: CPU ratio pipes/same-job | 0.90 (0.95 with start-up and stop) | ≤ 0.9 | yes |",
		"Same job, concurrency 4: CPU µs per msg, same-job consumer (bench/samejob) | 100.0 (105.0 with start-up and stop; 2900 msgs/s)",
		"ratio Benthos/same-job 1.20",
		"Live heap per extra in-flight message, 4096 B bodies", "| 6990 B (1.71 × body; 3.0 MiB → 15.0 MiB) | ≤ 1.2 × body + 2 KB = 6963 B | **no** |",
		"| All-in memory per extra in-flight message, 200 B bodies (heap + goroutine stacks, visibility 30s: heartbeat running) | 3984 B = 2182 B heap + 1802 B stacks",
		"0.12 goroutines per message) | ≤ 1.2 × body + 3 KB = 3312 B | **no** |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
}

func TestAnEmptyResultsFolderGivesAReportWithoutFigures(t *testing.T) {
	r, err := loadResults(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := writeReport(&b, r); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(b.String(), "\n| "); lines != 1 {
		t.Errorf("the report of no results has %d table rows, want the header only:\n%s", lines, b.String())
	}
}

func TestResultsSurviveASaveAndLoad(t *testing.T) {
	dir := t.TempDir()
	if err := sampleResults().save(dir); err != nil {
		t.Fatal(err)
	}
	r, err := loadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.Throughput == nil || r.Throughput.CPURatio != 1.33 || len(r.ScaleUp) != 2 || len(r.ScaleUp[0].Points) != 2 {
		t.Errorf("loaded results %+v differ from the saved ones", r)
	}
}

func TestThePlotIsAPNGOfTheRightSize(t *testing.T) {
	var b bytes.Buffer
	ss := []series{
		{color: color.RGBA{255, 0, 0, 255}, points: []Point{{T: 0, Concurrency: 5}, {T: 10, Concurrency: 55}, {T: 199, Concurrency: 1000}}},
		{color: color.RGBA{0, 0, 255, 255}, points: nil},
	}
	if err := plotCurves(&b, ss); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	if got := img.Bounds().Size(); got.X != plotW || got.Y != plotH {
		t.Errorf("plot size %v, want %dx%d", got, plotW, plotH)
	}
	// A red pixel of the line must be there.
	found := false
	for y := 0; y < plotH && !found; y++ {
		for x := 0; x < plotW; x++ {
			if r, g, bl, _ := img.At(x, y).RGBA(); r == 0xffff && g == 0 && bl == 0 {
				found = true
				break
			}
		}
	}
	if !found {
		t.Error("the plot has no pixel of the line's colour")
	}
}

func TestMetricsAreSummedByNameAndLabels(t *testing.T) {
	text := `# HELP pipes_aws_api_calls_total Calls.
# TYPE pipes_aws_api_calls_total counter
pipes_aws_api_calls_total{operation="ReceiveMessage",pipe="bench"} 210
pipes_aws_api_calls_total{operation="DeleteMessageBatch",pipe="bench"} 200
pipes_aws_api_calls_total{operation="ReceiveMessage",pipe="other"} 5
pipes_concurrency{pipe="bench"} 16
go_memstats_heap_alloc_bytes 1.2e+07
`
	m, err := parseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		got  float64
		want float64
	}{
		{"a series without labels is read", m.sum("go_memstats_heap_alloc_bytes"), 1.2e7},
		{"all series of a name are added up", m.sum("pipes_aws_api_calls_total"), 415},
		{"a label filter keeps the matching series", m.sum("pipes_aws_api_calls_total", "pipe", "bench"), 410},
		{"two label pairs must both match", m.sum("pipes_aws_api_calls_total", "pipe", "bench", "operation", "ReceiveMessage"), 210},
		{"by-label sums group by the label", m.byLabel("pipes_aws_api_calls_total", "operation")["ReceiveMessage"], 215},
		{"an unknown name sums to zero", m.sum("nothing"), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
}

func TestTheHarnessPipelineFileIsAValidPipe(t *testing.T) {
	for _, rate := range []int{0, 6000} {
		file := filepath.Join(t.TempDir(), "bench.yaml")
		y := pipelineYAML("http://127.0.0.1:1", pipeSpec{queueURL: "http://127.0.0.1:1/123456789012/q", wait: 2 * time.Second,
			maxConc: 16, initConc: 16, rate: rate, targetURL: "http://127.0.0.1:2/"})
		if err := os.WriteFile(file, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		specs, err := config.Load(file)
		if err != nil {
			t.Fatalf("rate %d: %v\n%s", rate, err, y)
		}
		want := rate
		if want == 0 {
			want = 300
		}
		if len(specs) != 1 || specs[0].Source.ScaleUpPerMinute != want || specs[0].Filter == nil || len(specs[0].Filter.Patterns) != 1 {
			t.Errorf("rate %d: loaded %+v", rate, specs)
		}
	}
}

func TestMedianOfEvenAndOddCounts(t *testing.T) {
	tests := []struct {
		name string
		in   []float64
		want float64
	}{
		{"no value gives zero", nil, 0},
		{"an odd count gives the middle value", []float64{3, 1, 2}, 2},
		{"an even count gives the mean of the middle two", []float64{4, 1, 3, 2}, 2.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := median(tt.in); got != tt.want {
				t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func FuzzParseMetrics(f *testing.F) {
	f.Add("a 1\n")
	f.Add(`x{a="b",c="d"} 2.5` + "\n# HELP x y\n")
	f.Add("broken{ 1\n{} \n x")
	f.Fuzz(func(t *testing.T, text string) {
		m, err := parseMetrics(strings.NewReader(text))
		if err != nil {
			return
		}
		for _, s := range m {
			_ = m.sum(s.name)
		}
	})
}

const benchOutput = `goos: linux
pkg: github.com/pipesproject/pipes/filter
cpu: Test CPU
BenchmarkMatchDecodedBody-2   	 1000000	      1500 ns/op	 600.00 MB/s	     0 B/op	       0 allocs/op
BenchmarkMatchDecodedBody-2   	 1000000	      1700 ns/op	 600.00 MB/s	     0 B/op	       0 allocs/op
BenchmarkMatchDecodedBody-2   	 1000000	      1600 ns/op	 600.00 MB/s	     0 B/op	       0 allocs/op
pkg: github.com/pipesproject/pipes/pipe
BenchmarkDrainToNoopTarget/concurrency=5-2 	 30	  41717508 ns/op	  25.45 allocs/msg	 4193 ns/msg	20911952 B/op	  254468 allocs/op
PASS
ok  	github.com/pipesproject/pipes/pipe	0.121s
`

func TestBenchmarkOutputGivesMediansAndTargets(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, microFile), []byte(benchOutput), 0o644); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := writeMicro(&b, dir); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| filter.MatchDecodedBody | 1600 | 0 | 0 |  | ≤ 2000 ns | yes |",
		"| pipe.DrainToNoopTarget/concurrency=5 | 4.172e+07 | 2.091e+07 | 2.545e+05 | 25.45 allocs/msg, 4193 ns/msg |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the micro-benchmark table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestNoBenchmarkOutputPrintsNoTable(t *testing.T) {
	var b strings.Builder
	if err := writeMicro(&b, t.TempDir()); err != nil || b.Len() != 0 {
		t.Errorf("got %q, %v; want nothing", b.String(), err)
	}
}

func FuzzParseBench(f *testing.F) {
	f.Add(benchOutput)
	f.Add("BenchmarkX-2 10 5 ns/op\n")
	f.Add("BenchmarkX 1 x y z\npkg: \n")
	f.Fuzz(func(t *testing.T, text string) {
		bs, err := parseBench(strings.NewReader(text))
		if err != nil {
			return
		}
		for _, b := range bs {
			if b.name == "" {
				t.Errorf("a benchmark without a name from %q", text)
			}
		}
	})
}

func TestTheBenthosVersionIsReadFromItsVersionOutput(t *testing.T) {
	for _, tt := range []struct{ out, want string }{
		{"Version: v4.27.0\nDate: unknown\n", "Benthos v4.27.0"},
		{"something else", "something else"},
	} {
		if got := benthosVersion(tt.out); got != tt.want {
			t.Errorf("benthosVersion(%q) = %q, want %q", tt.out, got, tt.want)
		}
	}
}

func TestHeapSizesAreReadFromTheFlag(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []int
		fails    bool
	}{
		{name: "all three sizes are read", in: "200,4096,102400", want: []int{200, 4096, 102400}},
		{name: "one size with spaces is read", in: " 4096 ", want: []int{4096}},
		{name: "a size the scenario has no level for fails", in: "200,1000", fails: true},
		{name: "no size fails", in: ",", fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseHeapSizes(tc.in)
			if (err != nil) != tc.fails {
				t.Fatalf("parseHeapSizes(%q) error = %v, want failure %v", tc.in, err, tc.fails)
			}
			if !tc.fails && !slices.Equal(got, tc.want) {
				t.Errorf("parseHeapSizes(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}
