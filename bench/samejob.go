package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// sameJobVariant is one way the same-job consumer (bench/samejob) runs.
type sameJobVariant struct {
	name   string // the -samejob-variants key
	runner string // the runner name of its runs
	// what says how it differs from the consumer as a user writes it.
	what        string
	gomaxprocs1 bool // GOMAXPROCS=1 in its environment
	pool        bool // -pool CONCURRENCY: the SDK client's idle pool sized to the concurrency
}

// sameJobVariants are the variants -samejob-variants may name, in report
// order. The runner "samejob" (the default variant) keeps its name from
// before the variants.
var sameJobVariants = []sameJobVariant{
	{name: "default", runner: "samejob", what: "as a user writes it"},
	{name: "gomaxprocs1", runner: "samejob-gomaxprocs1", what: "GOMAXPROCS=1", gomaxprocs1: true},
	{name: "pool", runner: "samejob-pool", what: "idle pool sized to the concurrency", pool: true},
	{name: "gomaxprocs1+pool", runner: "samejob-gomaxprocs1-pool", what: "GOMAXPROCS=1 and idle pool sized to the concurrency", gomaxprocs1: true, pool: true},
}

// sameJobVariantOf finds the variant whose runner name is runner.
func sameJobVariantOf(runner string) (sameJobVariant, bool) {
	for _, v := range sameJobVariants {
		if v.runner == runner {
			return v, true
		}
	}
	return sameJobVariant{}, false
}

// env is what the variant adds to the consumer's environment.
func (v sameJobVariant) env() []string {
	if v.gomaxprocs1 {
		return []string{"GOMAXPROCS=1"}
	}
	return nil
}

// flags are the variant's extra flags at concurrency conc.
func (v sameJobVariant) flags(conc int) []string {
	if v.pool {
		return []string{"-pool", strconv.Itoa(conc)}
	}
	return nil
}

// parseVariants reads -samejob-variants: names of sameJobVariants,
// comma-separated; default comes first whether named or not (its ratio
// is the one issue 11 set a target for).
func parseVariants(s string) ([]sameJobVariant, error) {
	out := []sameJobVariant{sameJobVariants[0]}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" || f == "default" {
			continue
		}
		found := false
		for _, v := range sameJobVariants[1:] {
			if v.name == f {
				found = true
				if !slices.ContainsFunc(out, func(o sameJobVariant) bool { return o.name == f }) {
					out = append(out, v)
				}
			}
		}
		if !found {
			names := make([]string, len(sameJobVariants))
			for i, v := range sameJobVariants {
				names[i] = v.name
			}
			return nil, fmt.Errorf("-samejob-variants: unknown variant %q (want %s)", f, strings.Join(names, ","))
		}
	}
	return out, nil
}

// via is how a runner reaches the SQS server: the zero value is plain
// HTTP to it; over TLS, the proxy's https endpoint and AWS_CA_BUNDLE.
type via struct {
	name     string // "" (plain HTTP) or "tls"
	endpoint string
	env      []string
	proxy    *tlsProxy // over TLS: counts the handshakes
}

// handshakes is the TLS handshakes the proxy has seen (0 over plain HTTP).
func (v via) handshakes() int64 {
	if v.proxy == nil {
		return 0
	}
	return v.proxy.handshakes.Load()
}

// suffix is " over TLS" for progress lines ("" for plain HTTP).
func (v via) suffix() string {
	if v.name == "" {
		return ""
	}
	return " over " + strings.ToUpper(v.name)
}

// endpoint is the SQS endpoint URL runners are given over v.
func (h *harness) endpoint(v via) string {
	if v.endpoint != "" {
		return v.endpoint
	}
	return h.srv.endpoint
}

// sameJob drains n messages at each of the -samejob-concurrency levels
// with pipes sending each message's record as it is (no filter, no
// template), with each -samejob-variants variant of the same-job consumer
// of bench/samejob and, with -benthos, with Benthos (plain HTTP only);
// with -samejob-tls the same runners drain again through a TLS proxy in
// the same rounds. Each round runs plain HTTP and TLS in turn (the first
// alternating) and rotates the order of the runners, so that the drift of
// a shared machine falls on all of them; the medians of each runner's
// rounds give the ratios (issues 11 and 20).
func (h *harness) sameJob(ctx context.Context, res *Results) error {
	o := h.o
	r := &SameJobResult{N: o.n, Size: o.size, WaitTime: o.wait.String(), Rounds: o.sameRounds}
	vias := []via{{}}
	if o.sameTLS {
		p, err := startTLSProxy(h.tmp, strings.TrimPrefix(h.srv.endpoint, "http://"))
		if err != nil {
			return err
		}
		defer p.close()
		vias = append(vias, via{name: "tls", endpoint: p.endpoint, env: []string{"AWS_CA_BUNDLE=" + p.caFile}, proxy: p})
		progress("TLS proxy at " + p.endpoint + " in front of " + h.srv.endpoint)
	}
	consumers := make([]string, len(o.sameVariants))
	for i, v := range o.sameVariants {
		consumers[i] = v.runner
	}
	runners := append([]string{"pipes-record"}, consumers...)
	if h.benthosBin != "" {
		r.Benthos = h.benthosVersion
	}
	for _, conc := range o.sameConc {
		lvl := SameJobLevel{Concurrency: conc}
		var tlsRuns []Run
		for round := 1; round <= o.sameRounds; round++ {
			for i := range vias {
				v := vias[(i+round-1)%len(vias)]
				list := runners
				if v.name == "" && h.benthosBin != "" {
					list = append(list[:len(list):len(list)], "benthos")
				}
				// Rotate: each runner goes first, second... in turn.
				k := (round - 1) % len(list)
				order := append(append([]string(nil), list[k:]...), list[:k]...)
				for _, runner := range order {
					d, err := h.drainAt(ctx, runner, round, conc, v)
					if err != nil {
						return err
					}
					d.run.Concurrency = conc
					if v.name == "" {
						lvl.Runs = append(lvl.Runs, d.run)
					} else {
						tlsRuns = append(tlsRuns, d.run)
					}
				}
			}
		}
		lvl.Pipes = summarize(lvl.Runs, "pipes-record")
		lvl.SameJob = summarize(lvl.Runs, "samejob")
		lvl.CPURatio = ratio(lvl.Pipes.DrainCPUPer1000, lvl.SameJob.DrainCPUPer1000)
		lvl.LifetimeCPURatio = ratio(lvl.Pipes.CPUPer1000, lvl.SameJob.CPUPer1000)
		lvl.SameJobVersus = versus(lvl.Runs, lvl.Pipes, o.sameVariants)
		if h.benthosBin != "" {
			b := summarize(lvl.Runs, "benthos")
			lvl.Benthos = &b
			lvl.BenthosRatio = ratio(b.DrainCPUPer1000, lvl.SameJob.DrainCPUPer1000)
		}
		progressVersus(conc, "", lvl.Pipes, lvl.SameJobVersus)
		if err := writeRunsCSV(filepath.Join(h.resultsDir, fmt.Sprintf("samejob-%d.csv", conc)), lvl.Runs); err != nil {
			return err
		}
		if len(vias) > 1 {
			t := &SameJobTLS{Runs: tlsRuns, Pipes: summarize(tlsRuns, "pipes-record")}
			t.SameJobVersus = versus(tlsRuns, t.Pipes, o.sameVariants)
			lvl.TLS = t
			progressVersus(conc, " over TLS", t.Pipes, t.SameJobVersus)
			if err := writeRunsCSV(filepath.Join(h.resultsDir, fmt.Sprintf("samejob-tls-%d.csv", conc)), tlsRuns); err != nil {
				return err
			}
		}
		r.Levels = append(r.Levels, lvl)
	}
	res.SameJob = r
	if o.cpuProfiles == "" {
		return nil
	}
	// One more drain each, profiled, not counted: pipes' runtime in
	// bench/heapprobe (as `pipes run` runs it) and the same-job consumer.
	if err := os.MkdirAll(o.cpuProfiles, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", o.cpuProfiles, err)
	}
	for _, conc := range o.sameConc {
		for _, runner := range []string{"pipes-probe", "samejob-profiled"} {
			if _, err := h.drainAt(ctx, runner, 0, conc, via{}); err != nil {
				return err
			}
		}
	}
	return nil
}

// versus computes pipes ÷ each variant's medians from runs, and the best.
func versus(runs []Run, pipes RunnerSummary, variants []sameJobVariant) SameJobVersus {
	var out SameJobVersus
	best := 0.0
	for _, v := range variants {
		s := summarize(runs, v.runner)
		c := SameJobConsumer{Variant: v.name, Runner: v.runner, Summary: s,
			CPURatio: ratio(pipes.DrainCPUPer1000, s.DrainCPUPer1000), LifetimeCPURatio: ratio(pipes.CPUPer1000, s.CPUPer1000)}
		out.Consumers = append(out.Consumers, c)
		if s.DrainCPUPer1000 > 0 && (best == 0 || s.DrainCPUPer1000 < best) {
			best = s.DrainCPUPer1000
			out.Best, out.BestCPURatio = v.name, c.CPURatio
		}
	}
	return out
}

// ratio is a / b (0 when b is 0).
func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// progressVersus logs one level's comparison.
func progressVersus(conc int, over string, pipes RunnerSummary, vs SameJobVersus) {
	parts := make([]string, 0, len(vs.Consumers))
	for _, c := range vs.Consumers {
		parts = append(parts, fmt.Sprintf("%s %.1f µs/msg (pipes ÷ it %.2f)", c.Variant, 1000*c.Summary.DrainCPUPer1000, c.CPURatio))
	}
	progress(fmt.Sprintf("same job%s at concurrency %d: while draining, pipes %.1f µs/msg; same-job consumer %s; pipes ÷ the best (%s) %.2f",
		over, conc, 1000*pipes.DrainCPUPer1000, strings.Join(parts, ", "), vs.Best, vs.BestCPURatio))
}

// startProfiled starts pipes' runtime (bench/heapprobe, records as they
// are) or the same-job consumer with a CPU profile to -cpu-profiles.
func (h *harness) startProfiled(label, runner, queueURL string, conc int, wait time.Duration, v via) (*child, error) {
	prof := filepath.Join(h.o.cpuProfiles, fmt.Sprintf("%s-c%d.pprof", runner, conc))
	if runner == "samejob-profiled" {
		return h.kids.start("samejob", filepath.Join(h.tmp, label+".log"), v.env, h.samejobBin,
			"-queue-url", queueURL, "-endpoint", h.endpoint(v), "-target", h.tgt.url,
			"-concurrency", strconv.Itoa(conc), "-wait", wait.String(), "-cpuprofile", prof)
	}
	file := filepath.Join(h.tmp, label+".yaml")
	spec := pipeSpec{queueURL: queueURL, wait: wait, maxConc: max(2, conc), initConc: conc, record: true, targetURL: h.tgt.url}
	if err := os.WriteFile(file, []byte(pipelineYAML(h.endpoint(v), spec)), 0o644); err != nil {
		return nil, fmt.Errorf("writing the pipeline file: %w", err)
	}
	return h.kids.start("heapprobe", filepath.Join(h.tmp, label+".log"), v.env, h.heapprobeBin, "-f", file, "-cpuprofile", prof)
}

// benthosYAML is Benthos' configuration for the same drain: aws_sqs (conc
// copies, 10 messages a receive) to http_client, batches of 10 sent as one
// JSON array of the bodies (Benthos builds no Pipes record).
func benthosYAML(queueURL, endpoint, target string, conc int, wait time.Duration) string {
	var b strings.Builder
	b.WriteString("http:\n  enabled: false\nlogger:\n  level: WARN\n")
	fmt.Fprintf(&b, "input:\n  broker:\n    copies: %d\n    inputs:\n      - aws_sqs:\n", conc)
	fmt.Fprintf(&b, "          url: %s\n          endpoint: %s\n          region: us-east-1\n", queueURL, endpoint)
	b.WriteString("          credentials:\n            id: x\n            secret: x\n")
	fmt.Fprintf(&b, "          max_number_of_messages: 10\n          wait_time_seconds: %d\n", int(wait.Seconds()))
	fmt.Fprintf(&b, "output:\n  http_client:\n    url: %s\n    verb: POST\n    headers:\n      Content-Type: application/json\n", target)
	fmt.Fprintf(&b, "    max_in_flight: %d\n    batching:\n      count: 10\n      period: 50ms\n      processors:\n        - archive:\n            format: json_array\n", conc)
	return b.String()
}

// startBenthos starts the -benthos binary on queueURL over v.
func (h *harness) startBenthos(label, queueURL string, conc int, wait time.Duration, v via) (*child, error) {
	file := filepath.Join(h.tmp, label+".benthos.yaml")
	if err := os.WriteFile(file, []byte(benthosYAML(queueURL, h.endpoint(v), h.tgt.url, conc, wait)), 0o644); err != nil {
		return nil, fmt.Errorf("writing the Benthos configuration: %w", err)
	}
	return h.kids.start("benthos", filepath.Join(h.tmp, label+".log"), v.env, h.benthosBin, "-c", file)
}

// parseConcurrencies reads a comma-separated list of positive integers.
func parseConcurrencies(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-samejob-concurrency: %q is not a positive integer", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-samejob-concurrency: no level in %q", s)
	}
	return out, nil
}
