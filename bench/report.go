package main

import (
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
)

// writeReport prints the Markdown table of r that the README includes.
func writeReport(w io.Writer, r *Results) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured on %s (%d cores), %s, %s, commit %s, with:\n\n    %s\n\n", orDash(r.Machine), r.Cores, orDash(r.Date), orDash(r.Go), orDash(r.Commit), orDash(r.Command))
	for _, a := range r.Also {
		fmt.Fprintf(&b, "and later, for some scenarios, %s\n\n", a)
	}
	b.WriteString("| Figure | Measured | Target | Met |\n|---|---|---|---|\n")
	row := func(fig, val, target string, met *bool) {
		m := ""
		if met != nil {
			m = map[bool]string{true: "yes", false: "**no**"}[*met]
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", fig, val, target, m)
	}
	yes := func(v bool) *bool { return &v }
	if t := r.Throughput; t != nil {
		setup := fmt.Sprintf("%d × %d B, concurrency %d, wait %s, %d runs each", t.N, t.Size, t.Concurrency, t.WaitTime, len(t.Runs)/2)
		row("Throughput, pipes (median msgs/s)", fmt.Sprintf("%.0f", t.Pipes.MsgsPerSec), setup, nil)
		row("Throughput, minimal consumer (median msgs/s)", fmt.Sprintf("%.0f", t.Minimal.MsgsPerSec), "", nil)
		row("Throughput ratio pipes/minimal", fmt.Sprintf("%.2f", t.ThroughputRatio), "≥ 0.9", yes(t.ThroughputRatio >= 0.9))
		row("CPU s per 1000 msgs, pipes", fmt.Sprintf("%.4f", t.Pipes.CPUPer1000), "", nil)
		row("CPU s per 1000 msgs, minimal consumer", fmt.Sprintf("%.4f", t.Minimal.CPUPer1000), "", nil)
		row("CPU ratio pipes/minimal", fmt.Sprintf("%.2f", t.CPURatio), "≤ 1.5", yes(t.CPURatio <= 1.5))
		row("Server CPU (share of a core) with pipes / minimal", fmt.Sprintf("%.0f%% / %.0f%%", 100*t.Pipes.ServerCPUShare, 100*t.Minimal.ServerCPUShare), t.Note, nil)
	}
	if s := r.SameJob; s != nil {
		for _, l := range s.Levels {
			setup := fmt.Sprintf("%d × %d B, concurrency %d, wait %s, medians of %d rotated rounds; CPU from the first message at the target to the last", s.N, s.Size, l.Concurrency, s.WaitTime, s.Rounds)
			val := func(r RunnerSummary) string {
				if r.TLSHandshakes > 0 {
					return fmt.Sprintf("%.1f (%.1f with start-up and stop; %.0f msgs/s; %.0f TLS handshakes)", 1000*r.DrainCPUPer1000, 1000*r.CPUPer1000, r.MsgsPerSec, r.TLSHandshakes)
				}
				return fmt.Sprintf("%.1f (%.1f with start-up and stop; %.0f msgs/s)", 1000*r.DrainCPUPer1000, 1000*r.CPUPer1000, r.MsgsPerSec)
			}
			row(fmt.Sprintf("Same job, concurrency %d: CPU µs per msg, pipes (records as they are)", l.Concurrency), val(l.Pipes), setup, nil)
			row(fmt.Sprintf("Same job, concurrency %d: CPU µs per msg, same-job consumer (bench/samejob)", l.Concurrency), val(l.SameJob), "", nil)
			row(fmt.Sprintf("Same job, concurrency %d: CPU ratio pipes/same-job", l.Concurrency), fmt.Sprintf("%.2f (%.2f with start-up and stop)", l.CPURatio, l.LifetimeCPURatio), "≤ 0.9", yes(l.CPURatio <= 0.9))
			if l.Benthos != nil {
				row(fmt.Sprintf("Same job, concurrency %d: CPU µs per msg, Benthos (%s; bodies as a JSON array, no record)", l.Concurrency, s.Benthos),
					val(*l.Benthos)+fmt.Sprintf(", ratio Benthos/same-job %.2f", l.BenthosRatio), "", nil)
			}
			versusRows(row, val, fmt.Sprintf("Same job, concurrency %d, plain HTTP", l.Concurrency), l.SameJobVersus, true)
			if t := l.TLS; t != nil {
				fig := fmt.Sprintf("Same job, concurrency %d, TLS", l.Concurrency)
				row(fig+": CPU µs per msg, pipes (records as they are)", val(t.Pipes), "through the harness's TLS proxy (AWS_CA_BUNDLE), same rounds", nil)
				versusRows(row, val, fig, t.SameJobVersus, false)
			}
		}
	}
	if c := r.Calls; c != nil {
		ops := []string{"DeleteMessage", "ChangeMessageVisibility"} // per-message calls, shown even when 0
		for op := range c.PerMessage {
			if !contains(ops, op) {
				ops = append(ops, op)
			}
		}
		sort.Strings(ops)
		for _, op := range ops {
			target, met := "", (*bool)(nil)
			switch op {
			case "ReceiveMessage", "DeleteMessageBatch":
				target, met = "≤ 0.11", yes(c.PerMessage[op] <= 0.11)
			case "DeleteMessage", "ChangeMessageVisibility":
				target, met = "0", yes(c.PerMessage[op] == 0)
			}
			row(fmt.Sprintf("%s calls per message", op), fmt.Sprintf("%.4f (%.0f calls / %.0f msgs)", c.PerMessage[op], c.Calls[op], c.Received), target, met)
		}
	}
	if i := r.Idle; i != nil {
		row("Idle ReceiveMessage per minute (empty queue)", fmt.Sprintf("%.2f (wait %s, over %.0f s; concurrency %.0f→%.0f)", i.ReceivesPerMinute, i.WaitTime, i.Seconds, i.ConcurrencyBefore, i.ConcurrencyAfter),
			fmt.Sprintf("≤ %.0f", i.FloorPerMinute), yes(i.ReceivesPerMinute <= i.FloorPerMinute+0.01))
		row("Idle API calls per hour (extrapolated)", fmt.Sprintf("%.0f", i.CallsPerHour), fmt.Sprintf("%.0f", i.FloorPerMinute*60), nil)
	}
	for _, s := range r.ScaleUp {
		val := fmt.Sprintf("%.1f s (%.0f/min measured)", s.SecondsToFull, s.PerMinute)
		if !s.Reached {
			val = fmt.Sprintf("not reached; ≈ %.0f s extrapolated (%.0f/min measured)", s.Extrapolated, s.PerMinute)
		}
		target, met := "", (*bool)(nil)
		if s.Rate == 300 {
			target, met = "≥ +300/min", yes(s.PerMinute >= 300*0.95)
		}
		row(fmt.Sprintf("Scale-up %d→%d at scale_up_per_minute %d (backlog %d, target %s)", s.Initial, s.Max, s.Rate, s.Backlog, s.TargetDelay), val, target, met)
	}
	for _, m := range r.Memory {
		budget := "no limit"
		if m.Budget > 0 {
			budget = mib(float64(m.Budget))
		}
		fig := fmt.Sprintf("Memory at %d batches, %d B msgs, target %s, --max-inflight-bytes %s", m.Concurrency, m.Size, m.TargetDelay, budget)
		// Peak HeapAlloc counts garbage awaiting a collection: the live heap
		// per message is the heap scenario's.
		val := fmt.Sprintf("peak RSS %s (%s at first scrape), peak heap (HeapAlloc, garbage included) %s, peak in flight %s in %.0f msgs",
			mib(float64(m.PeakRSS)), mib(float64(m.BaselineRSS)), mib(m.PeakHeap), mib(m.PeakInflightBytes), m.PeakInflightMsgs)
		if m.Budget > 0 {
			row(fig, val, "in-flight bytes ≤ budget", yes(m.WithinBudget))
		} else {
			row(fig, val, "", nil)
		}
	}
	for _, hp := range r.Heap {
		row(fmt.Sprintf("Live heap per extra in-flight message, %d B bodies (HeapAlloc after a forced GC, bench/heapprobe, %d → %d messages held at the target)", hp.Size, hp.LoMessages, hp.HiMessages),
			fmt.Sprintf("%.0f B (%.2f × body; %s → %s)", hp.PerMessage, hp.PerMessage/float64(hp.Size), mib(float64(hp.LoHeap)), mib(float64(hp.HiHeap))),
			fmt.Sprintf("≤ 1.2 × body + 2 KB = %.0f B", hp.Target), yes(hp.PerMessage <= hp.Target))
		if hp.TotalTarget > 0 {
			row(fmt.Sprintf("All-in memory per extra in-flight message, %d B bodies (heap + goroutine stacks, visibility %s: heartbeat running)", hp.Size, hp.Visibility),
				fmt.Sprintf("%.0f B = %.0f B heap + %.0f B stacks (%.2f × body; stacks %s → %s; %.2f goroutines per message)",
					hp.TotalPerMessage, hp.PerMessage, hp.StacksPerMessage, hp.TotalPerMessage/float64(hp.Size),
					mib(float64(hp.LoStacks)), mib(float64(hp.HiStacks)), hp.GoroutinesPerMessage),
				fmt.Sprintf("≤ 1.2 × body + 3 KB = %.0f B", hp.TotalTarget), yes(hp.TotalPerMessage <= hp.TotalTarget))
		}
	}
	if rl := r.RateLimit; rl != nil {
		row(fmt.Sprintf("ReceiveMessage calls per message at rate_limit %.0f (%d msgs, concurrency %d)", rl.RateLimit, rl.Messages, rl.Concurrency),
			fmt.Sprintf("%.3f (%.0f calls; %.1f msgs/s)", rl.ReceivesPerMessage, rl.Receives, rl.MsgsPerSec), "≤ 0.11", yes(rl.ReceivesPerMessage <= 0.11))
	}
	if t := r.Trickle; t != nil {
		row(fmt.Sprintf("ReceiveMessage calls for one message reaching an idle pipe at concurrency %.0f (wait %s)", t.ConcurrencyBefore, t.WaitTime),
			fmt.Sprintf("%.0f (and %.0f from start until idle)", t.ReceivesForOne, t.StartupReceives), "", nil)
	}
	for _, c := range r.Crash {
		row(fmt.Sprintf("Duplicates after %d SIGKILLs, %d msgs (%d failing to the DLQ), visibility %s, maxReceiveCount %d, concurrency %d, seed %d (%s)", c.Kills, c.Messages, c.Failing, c.Visibility, c.MaxReceive, c.Concurrency, c.Seed, filepath.Base(c.Binary)),
			fmt.Sprintf("%.2f%% (%d of %d good; lost %d; %.4f DeleteMessageBatch a good message)", 100*c.DuplicateRate, c.Duplicates, c.Good, c.Lost, c.DeleteCallsPerMessage), "≤ 6%, lost 0", yes(c.DuplicateRate <= 0.06 && c.Lost == 0))
	}
	rabbitJobRows(row, r.RabbitJob)
	_, err := io.WriteString(w, b.String())
	return err
}

// versusRows adds, under fig, a row per variant of the same-job consumer
// (its CPU per message and pipes ÷ it) and pipes ÷ the best of them;
// skipDefault leaves out the default variant's, which rows above show.
func versusRows(row func(fig, val, target string, met *bool), val func(RunnerSummary) string, fig string, vs SameJobVersus, skipDefault bool) {
	if len(vs.Consumers) == 0 {
		return
	}
	best := ""
	for _, c := range vs.Consumers {
		w := variantWhat(c.Variant)
		if c.Variant == vs.Best {
			best = w
		}
		if skipDefault && c.Variant == "default" {
			continue
		}
		row(fmt.Sprintf("%s: CPU µs per msg, same-job consumer (%s)", fig, w),
			fmt.Sprintf("%s; pipes ÷ it %.2f (%.2f with start-up and stop)", val(c.Summary), c.CPURatio, c.LifetimeCPURatio), "", nil)
	}
	met := vs.BestCPURatio <= 0.8
	row(fmt.Sprintf("%s: CPU ratio pipes ÷ the best same-job consumer (%s)", fig, best), fmt.Sprintf("%.2f", vs.BestCPURatio), "≤ 0.8", &met)
}

// variantWhat describes a variant of the same-job consumer by its name.
func variantWhat(name string) string {
	for _, v := range sameJobVariants {
		if v.name == name {
			return v.what
		}
	}
	return name
}

func mib(n float64) string { return fmt.Sprintf("%.1f MiB", n/(1<<20)) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
