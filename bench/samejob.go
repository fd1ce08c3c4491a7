package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// sameJob drains n messages at each of the -samejob-concurrency levels
// with pipes sending each message's record as it is (no filter, no
// template), with the same-job consumer of bench/samejob and, with
// -benthos, with Benthos; rounds rotate the order of the runners, and the
// medians of each runner's rounds give the ratios (issue 11).
func (h *harness) sameJob(ctx context.Context, res *Results) error {
	o := h.o
	r := &SameJobResult{N: o.n, Size: o.size, WaitTime: o.wait.String(), Rounds: o.sameRounds}
	runners := []string{"pipes-record", "samejob"}
	if h.benthosBin != "" {
		runners = append(runners, "benthos")
		r.Benthos = h.benthosVersion
	}
	for _, conc := range o.sameConc {
		lvl := SameJobLevel{Concurrency: conc}
		for round := 1; round <= o.sameRounds; round++ {
			// Rotate: each runner goes first, second... in turn.
			k := (round - 1) % len(runners)
			order := append(append([]string(nil), runners[k:]...), runners[:k]...)
			for _, runner := range order {
				d, err := h.drainAt(ctx, runner, round, conc)
				if err != nil {
					return err
				}
				d.run.Concurrency = conc
				lvl.Runs = append(lvl.Runs, d.run)
			}
		}
		lvl.Pipes = summarize(lvl.Runs, "pipes-record")
		lvl.SameJob = summarize(lvl.Runs, "samejob")
		if lvl.SameJob.DrainCPUPer1000 > 0 {
			lvl.CPURatio = lvl.Pipes.DrainCPUPer1000 / lvl.SameJob.DrainCPUPer1000
		}
		if lvl.SameJob.CPUPer1000 > 0 {
			lvl.LifetimeCPURatio = lvl.Pipes.CPUPer1000 / lvl.SameJob.CPUPer1000
		}
		if h.benthosBin != "" {
			b := summarize(lvl.Runs, "benthos")
			lvl.Benthos = &b
			if lvl.SameJob.DrainCPUPer1000 > 0 {
				lvl.BenthosRatio = b.DrainCPUPer1000 / lvl.SameJob.DrainCPUPer1000
			}
		}
		progress(fmt.Sprintf("same job at concurrency %d: while draining, pipes %.1f µs/msg, same-job consumer %.1f µs/msg, ratio %.2f (with start-up and stop %.2f)",
			conc, 1000*lvl.Pipes.DrainCPUPer1000, 1000*lvl.SameJob.DrainCPUPer1000, lvl.CPURatio, lvl.LifetimeCPURatio))
		r.Levels = append(r.Levels, lvl)
		if err := writeRunsCSV(filepath.Join(h.resultsDir, fmt.Sprintf("samejob-%d.csv", conc)), lvl.Runs); err != nil {
			return err
		}
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
			if _, err := h.drainAt(ctx, runner, 0, conc); err != nil {
				return err
			}
		}
	}
	return nil
}

// startProfiled starts pipes' runtime (bench/heapprobe, records as they
// are) or the same-job consumer with a CPU profile to -cpu-profiles.
func (h *harness) startProfiled(label, runner, queueURL string, conc int, wait time.Duration) (*child, error) {
	prof := filepath.Join(h.o.cpuProfiles, fmt.Sprintf("%s-c%d.pprof", runner, conc))
	if runner == "samejob-profiled" {
		return h.kids.start("samejob", filepath.Join(h.tmp, label+".log"), h.samejobBin,
			"-queue-url", queueURL, "-endpoint", h.srv.endpoint, "-target", h.tgt.url,
			"-concurrency", strconv.Itoa(conc), "-wait", wait.String(), "-cpuprofile", prof)
	}
	file := filepath.Join(h.tmp, label+".yaml")
	spec := pipeSpec{queueURL: queueURL, wait: wait, maxConc: max(2, conc), initConc: conc, record: true, targetURL: h.tgt.url}
	if err := os.WriteFile(file, []byte(pipelineYAML(h.srv.endpoint, spec)), 0o644); err != nil {
		return nil, fmt.Errorf("writing the pipeline file: %w", err)
	}
	return h.kids.start("heapprobe", filepath.Join(h.tmp, label+".log"), h.heapprobeBin, "-f", file, "-cpuprofile", prof)
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

// startBenthos starts the -benthos binary on queueURL.
func (h *harness) startBenthos(label, queueURL string, conc int, wait time.Duration) (*child, error) {
	file := filepath.Join(h.tmp, label+".benthos.yaml")
	if err := os.WriteFile(file, []byte(benthosYAML(queueURL, h.srv.endpoint, h.tgt.url, conc, wait)), 0o644); err != nil {
		return nil, fmt.Errorf("writing the Benthos configuration: %w", err)
	}
	return h.kids.start("benthos", filepath.Join(h.tmp, label+".log"), h.benthosBin, "-c", file)
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
