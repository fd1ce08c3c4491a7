package main

import (
	"context"
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// pipeSpec is what varies between the pipeline files the harness writes.
type pipeSpec struct {
	queueURL string
	wait     time.Duration
	maxConc  int
	initConc int
	rate     int // 0 keeps the default scale_up_per_minute
	// rateLimit is the source's rate_limit (0: none).
	rateLimit int
	budget    int64
	// budgetSet passes budget as --max-inflight-bytes (0: no limit);
	// otherwise pipes runs with its default budget, as users run it.
	budgetSet bool
	targetURL string
	// record sends each message's Pipes SQS record as it is (no filter, no
	// input template): the same job as bench/samejob.
	record bool
	// via is how pipes reaches the server (zero: plain HTTP to it).
	via via
}

// pipelineYAML renders the bench pipe: an EventBridge pattern filter, an
// input template and the harness's HTTP target.
func pipelineYAML(endpoint string, p pipeSpec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: bench\nsource:\n  type: sqs\n  queue_url: %s\n  endpoint: %s\n  region: us-east-1\n", p.queueURL, endpoint)
	fmt.Fprintf(&b, "  wait_time: %s\n  max_concurrency: %d\n  initial_concurrency: %d\n", p.wait, p.maxConc, p.initConc)
	if p.rate > 0 {
		fmt.Fprintf(&b, "  scale_up_per_minute: %d\n", p.rate)
	}
	if p.rateLimit > 0 {
		fmt.Fprintf(&b, "  rate_limit: %d\n", p.rateLimit)
	}
	if p.record {
		fmt.Fprintf(&b, "target:\n  type: http\n  url: %s\n  timeout: 60s\n", p.targetURL)
		return b.String()
	}
	b.WriteString("filter:\n  patterns:\n    - '{\"body\": {\"kind\": [\"order\"], \"amount\": [{\"numeric\": [\">\", 0]}]}}'\n")
	fmt.Fprintf(&b, "target:\n  type: http\n  url: %s\n  timeout: 60s\n  input_template: '{\"id\": \"<$.messageId>\", \"order\": <$.body>}'\n", p.targetURL)
	return b.String()
}

// startPipes writes the pipeline file and starts `pipes run` on it; it
// returns the child and its /metrics URL without waiting for it.
func (h *harness) startPipes(label string, p pipeSpec) (*child, string, error) {
	p.targetURL = h.tgt.url
	file := filepath.Join(h.tmp, label+".yaml")
	if err := os.WriteFile(file, []byte(pipelineYAML(h.endpoint(p.via), p)), 0o644); err != nil {
		return nil, "", fmt.Errorf("writing the pipeline file: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{h.pipesBin, "run", "-f", file, "--metrics-addr", addr}
	if p.budgetSet {
		args = append(args, "--max-inflight-bytes", strconv.FormatInt(p.budget, 10))
	}
	c, err := h.kids.start("pipes", filepath.Join(h.tmp, label+".log"), p.via.env, args...)
	if err != nil {
		return nil, "", err
	}
	return c, "http://" + addr + "/metrics", nil
}

// startConsumer starts a hand-written consumer (bin: bench/minimal or
// bench/samejob) on queueURL over v, with env and extra flags.
func (h *harness) startConsumer(label, bin, queueURL string, conc int, wait time.Duration, v via, env []string, extra ...string) (*child, error) {
	args := []string{bin, "-queue-url", queueURL, "-endpoint", h.endpoint(v), "-target", h.tgt.url,
		"-concurrency", strconv.Itoa(conc), "-wait", wait.String()}
	return h.kids.start(filepath.Base(bin), filepath.Join(h.tmp, label+".log"), append(append([]string(nil), v.env...), env...), append(args, extra...)...)
}

// logTail returns the last lines of a child's log, for error messages.
func (h *harness) logTail(label string) string {
	data, _ := os.ReadFile(filepath.Join(h.tmp, label+".log"))
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return strings.Join(lines[max(0, len(lines)-5):], "\n")
}

// waitMetrics scrapes url until pipes_concurrency is served (the pipe has
// opened its queue), at most timeout.
func waitMetrics(ctx context.Context, url string, c *child, timeout time.Duration) (metrics, error) {
	deadline := time.Now().Add(timeout)
	for {
		m, err := scrape(ctx, url)
		if err == nil && len(m.byLabel("pipes_concurrency", "pipe")) > 0 {
			return m, nil
		}
		if c.exited() {
			return nil, errors.New("pipes exited before serving its metrics")
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("no pipes metrics at %s within %v: %v", url, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// drainRun is the outcome of one throughput run.
type drainRun struct {
	run     Run
	metrics metrics // pipes only: the scrape once the queue was empty
}

// drainOnce fills a fresh queue with n messages and lets runner drain it
// at the -concurrency of the throughput scenario.
func (h *harness) drainOnce(ctx context.Context, runner string, rep int) (drainRun, error) {
	return h.drainAt(ctx, runner, rep, h.o.concurrency, via{})
}

// drainAt fills a fresh queue with n messages and lets runner drain it with
// conc concurrent batches, reaching the server over v. Runners: pipes
// (filter and input template), minimal (bench/minimal), pipes-record (each
// message's record as it is), the same-job consumer's variants
// (bench/samejob: samejob, samejob-gomaxprocs1...; see sameJobVariants)
// and benthos (-benthos).
func (h *harness) drainAt(ctx context.Context, runner string, rep, conc int, v via) (drainRun, error) {
	o := h.o
	var out drainRun
	url, err := h.srv.createQueue(ctx, "bench-"+runner, 60*time.Second)
	if err != nil {
		return out, err
	}
	defer h.srv.deleteQueue(url)
	if err := h.srv.fill(ctx, url, 0, o.n, o.size); err != nil {
		return out, err
	}
	if err := h.waitQuiet(ctx); err != nil {
		return out, err
	}
	h.tgt.reset(0)
	label := fmt.Sprintf("throughput-%s-c%d-%d", runner, conc, rep)
	if v.name != "" {
		label = fmt.Sprintf("throughput-%s-%s-c%d-%d", runner, v.name, conc, rep)
	}
	srvCPU0, err := procCPU(h.srv.pid())
	if err != nil {
		return out, err
	}
	start, hs0 := time.Now(), v.handshakes()
	var c *child
	var metricsURL string
	switch runner {
	case "pipes", "pipes-record":
		c, metricsURL, err = h.startPipes(label, pipeSpec{queueURL: url, wait: o.wait, maxConc: max(2, conc), initConc: conc, record: runner == "pipes-record", via: v})
	case "minimal":
		c, err = h.startConsumer(label, h.minimalBin, url, conc, o.wait, v, nil)
	case "pipes-probe", "samejob-profiled":
		c, err = h.startProfiled(label, runner, url, conc, o.wait, v)
	case "benthos":
		c, err = h.startBenthos(label, url, conc, o.wait, v)
	default:
		sv, ok := sameJobVariantOf(runner)
		if !ok {
			err = fmt.Errorf("unknown runner %q", runner)
			break
		}
		c, err = h.startConsumer(label, h.samejobBin, url, conc, o.wait, v, sv.env(), sv.flags(conc)...)
	}
	if err != nil {
		return out, err
	}
	defer c.stop(40 * time.Second)
	timeout := 2*time.Minute + time.Duration(o.n)*time.Millisecond
	// The drain's CPU runs from the first batch at the target to the last:
	// start-up (clients, configuration) and the stop are left out.
	if !h.tgt.waitItems(ctx, 1, timeout, c.done) {
		return out, fmt.Errorf("%s delivered nothing within %v: %s", runner, timeout, h.logTail(label))
	}
	items0 := h.tgt.items.Load()
	cpu0, err := procCPU(c.cmd.Process.Pid)
	if err != nil {
		return out, err
	}
	if !h.tgt.waitItems(ctx, int64(o.n), timeout, c.done) {
		return out, fmt.Errorf("%s delivered %d of %d messages within %v: %s", runner, h.tgt.items.Load(), o.n, timeout, h.logTail(label))
	}
	items1 := h.tgt.items.Load()
	cpu1, err := procCPU(c.cmd.Process.Pid)
	if err != nil {
		return out, err
	}
	elapsed := time.Since(start).Seconds()
	srvCPU1, err := procCPU(h.srv.pid())
	if err != nil {
		return out, err
	}
	if err := h.srv.waitEmpty(ctx, url, 30*time.Second); err != nil {
		return out, fmt.Errorf("%s: %w", runner, err)
	}
	if metricsURL != "" {
		if out.metrics, err = scrape(ctx, metricsURL); err != nil {
			return out, err
		}
	}
	c.stop(40 * time.Second)
	delivered := h.tgt.items.Load()
	out.run = Run{
		Runner: runner, Rep: rep, Transport: v.name, TLSHandshakes: v.handshakes() - hs0, Seconds: elapsed, MsgsPerSec: float64(o.n) / elapsed,
		CPUSeconds: c.cpuSeconds(), ServerCPU: srvCPU1 - srvCPU0, ServerCPUShare: (srvCPU1 - srvCPU0) / elapsed,
		Delivered: delivered,
	}
	out.run.CPUPer1000 = out.run.CPUSeconds / float64(o.n) * 1000
	if items1 > items0 {
		out.run.DrainCPUPer1000 = (cpu1 - cpu0) / float64(items1-items0) * 1000
	}
	user, sys, switches := c.usage()
	progress(fmt.Sprintf("%s%s c%d run %d: %d msgs in %.2f s = %.0f msgs/s, CPU %.3f s (%.4f s/1000; %.4f s/1000 while draining; user %.3f s, system %.3f s, %.2f context switches a message), server CPU %.0f%% of a core, delivered %d%s",
		runner, v.suffix(), conc, rep, o.n, elapsed, out.run.MsgsPerSec, out.run.CPUSeconds, out.run.CPUPer1000, out.run.DrainCPUPer1000, user, sys, float64(switches)/float64(o.n), 100*out.run.ServerCPUShare, delivered, handshakeNote(out.run.TLSHandshakes, v)))
	// Abandoned long polls of the stopped runner end within the wait time:
	// the next runner starts after that (the next queue fills meanwhile).
	h.quietAt = time.Now().Add(o.wait + 500*time.Millisecond)
	return out, nil
}

// handshakeNote is ", N TLS handshakes" over TLS ("" over plain HTTP).
func handshakeNote(n int64, v via) string {
	if v.proxy == nil {
		return ""
	}
	return fmt.Sprintf(", %d TLS handshakes", n)
}

// throughput drains n messages alternately with pipes and the minimal
// consumer, reps times each.
func (h *harness) throughput(ctx context.Context, res *Results) error {
	o := h.o
	t := &ThroughputResult{N: o.n, Size: o.size, Concurrency: o.concurrency, WaitTime: o.wait.String()}
	calls := &CallsResult{Calls: map[string]float64{}, PerMessage: map[string]float64{}}
	for rep := 1; rep <= o.reps; rep++ {
		order := []string{"pipes", "minimal"}
		if rep%2 == 0 {
			order = []string{"minimal", "pipes"}
		}
		for _, runner := range order {
			d, err := h.drainOnce(ctx, runner, rep)
			if err != nil {
				return err
			}
			t.Runs = append(t.Runs, d.run)
			if d.metrics != nil {
				addCalls(calls, d.metrics)
			}
		}
	}
	t.Pipes, t.Minimal = summarize(t.Runs, "pipes"), summarize(t.Runs, "minimal")
	if t.Minimal.MsgsPerSec > 0 && t.Minimal.CPUPer1000 > 0 {
		t.ThroughputRatio = t.Pipes.MsgsPerSec / t.Minimal.MsgsPerSec
		t.CPURatio = t.Pipes.CPUPer1000 / t.Minimal.CPUPer1000
	}
	t.ServerBound = math.Max(t.Pipes.ServerCPUShare, t.Minimal.ServerCPUShare) > 0.8
	if t.ServerBound {
		t.Note = "the server used more than 80% of a core: throughput shows the server's limit, compare CPU per message"
	} else {
		t.Note = "the server was not saturated"
	}
	res.Throughput = t
	finishCalls(calls)
	res.Calls = calls
	return writeRunsCSV(filepath.Join(h.resultsDir, "throughput.csv"), t.Runs)
}

// calls measures API calls per message in one pipes run, unless the
// throughput scenario already did.
func (h *harness) calls(ctx context.Context, res *Results) error {
	if h.o.scenarios["throughput"] && res.Calls != nil {
		return nil
	}
	d, err := h.drainOnce(ctx, "pipes", 1)
	if err != nil {
		return err
	}
	calls := &CallsResult{Calls: map[string]float64{}, PerMessage: map[string]float64{}}
	addCalls(calls, d.metrics)
	finishCalls(calls)
	res.Calls = calls
	return nil
}

func addCalls(c *CallsResult, m metrics) {
	for op, v := range m.byLabel("pipes_aws_api_calls_total", "operation") {
		c.Calls[op] += v
	}
	c.Received += m.sum("pipes_messages_received_total", "pipe", "bench")
	c.Deleted += m.sum("pipes_messages_deleted_total", "pipe", "bench")
}

func finishCalls(c *CallsResult) {
	for op, v := range c.Calls {
		if c.Received > 0 {
			c.PerMessage[op] = v / c.Received
		}
	}
}

// idle drains a small backlog at concurrency 16, waits out the long polls
// in flight, then counts pipes' API calls over idleSeconds.
func (h *harness) idle(ctx context.Context, res *Results) error {
	o := h.o
	url, err := h.srv.createQueue(ctx, "bench-idle", 60*time.Second)
	if err != nil {
		return err
	}
	defer h.srv.deleteQueue(url)
	const backlog = 1000
	if err := h.srv.fill(ctx, url, 0, backlog, o.size); err != nil {
		return err
	}
	h.tgt.reset(0)
	c, murl, err := h.startPipes("idle", pipeSpec{queueURL: url, wait: o.idleWait, maxConc: 16, initConc: 16})
	if err != nil {
		return err
	}
	defer c.stop(40 * time.Second)
	if !h.tgt.waitItems(ctx, backlog, 2*time.Minute, c.done) {
		return fmt.Errorf("pipes delivered %d of %d messages: %s", h.tgt.items.Load(), backlog, h.logTail("idle"))
	}
	warm := o.idleWait + 5*time.Second
	progress(fmt.Sprintf("idle: backlog drained; waiting %v for the long polls in flight, then measuring %v", warm, o.idleSeconds))
	if err := sleep(ctx, warm); err != nil {
		return err
	}
	before, err := scrape(ctx, murl)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := sleep(ctx, o.idleSeconds); err != nil {
		return err
	}
	after, err := scrape(ctx, murl)
	if err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	r := &IdleResult{WaitTime: o.idleWait.String(), Seconds: secs, Calls: map[string]float64{},
		FloorPerMinute:    60 / o.idleWait.Seconds(),
		ConcurrencyBefore: before.sum("pipes_concurrency", "pipe", "bench"),
		ConcurrencyAfter:  after.sum("pipes_concurrency", "pipe", "bench"),
	}
	b := before.byLabel("pipes_aws_api_calls_total", "operation")
	total := 0.0
	for op, v := range after.byLabel("pipes_aws_api_calls_total", "operation") {
		if d := v - b[op]; d > 0 {
			r.Calls[op] = d
			total += d
		}
	}
	r.ReceivesPerMinute = r.Calls["ReceiveMessage"] / secs * 60
	r.CallsPerHour = total / secs * 3600
	progress(fmt.Sprintf("idle: %v calls in %.0f s: %.2f receives/min, %.0f calls/hour; concurrency %.0f → %.0f",
		r.Calls, secs, r.ReceivesPerMinute, r.CallsPerHour, r.ConcurrencyBefore, r.ConcurrencyAfter))
	res.Idle = r
	return nil
}

// rateLimited drains a backlog with the source's rate_limit at
// rateLimit messages a second and counts pipes' ReceiveMessage calls: a
// rate limit paces full receives, it must not shrink them (issue 11
// measured 3,335 receives for 3,601 messages at rate_limit 30 before).
func (h *harness) rateLimited(ctx context.Context, res *Results) error {
	o := h.o
	const rate = 30
	n := 600
	if o.quick {
		n = 150
	}
	url, err := h.srv.createQueue(ctx, "bench-ratelimit", 60*time.Second)
	if err != nil {
		return err
	}
	defer h.srv.deleteQueue(url)
	if err := h.srv.fill(ctx, url, 0, n, o.size); err != nil {
		return err
	}
	h.tgt.reset(0)
	start := time.Now()
	c, murl, err := h.startPipes("ratelimit", pipeSpec{queueURL: url, wait: o.wait, maxConc: 16, initConc: 16, rateLimit: rate})
	if err != nil {
		return err
	}
	defer c.stop(40 * time.Second)
	timeout := time.Duration(n/rate)*time.Second + time.Minute
	if !h.tgt.waitItems(ctx, int64(n), timeout, c.done) {
		return fmt.Errorf("pipes delivered %d of %d messages at rate_limit %d: %s", h.tgt.items.Load(), n, rate, h.logTail("ratelimit"))
	}
	secs := time.Since(start).Seconds()
	m, err := scrape(ctx, murl)
	if err != nil {
		return err
	}
	r := &RateLimitResult{RateLimit: rate, Messages: n, Concurrency: 16, Seconds: secs, MsgsPerSec: float64(n) / secs,
		Receives: m.byLabel("pipes_aws_api_calls_total", "operation")["ReceiveMessage"]}
	r.ReceivesPerMessage = r.Receives / float64(n)
	progress(fmt.Sprintf("ratelimit: %d msgs at rate_limit %d in %.1f s (%.1f msgs/s), %.0f ReceiveMessage calls = %.3f a message",
		n, rate, secs, r.MsgsPerSec, r.Receives, r.ReceivesPerMessage))
	res.RateLimit = r
	return nil
}

// scaleUp runs the scale-up measurement at the default rate and at
// scaleFast.
func (h *harness) scaleUp(ctx context.Context, res *Results) error {
	rates := []int{0}
	if h.o.scaleFast > 0 {
		rates = append(rates, h.o.scaleFast)
	}
	var out []ScaleUpResult
	var errs []error
	for _, rate := range rates {
		r, err := h.scaleOnce(ctx, rate)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, r)
	}
	if len(out) > 0 {
		res.ScaleUp = out
		colors := []color.RGBA{{200, 30, 30, 255}, {30, 60, 200, 255}}
		var ss []series
		for i, r := range out {
			ss = append(ss, series{color: colors[i%len(colors)], points: r.Points})
		}
		f, err := os.Create(filepath.Join(h.resultsDir, "scaleup.png"))
		if err != nil {
			return fmt.Errorf("creating the plot: %w", err)
		}
		defer f.Close()
		if err := plotCurves(f, ss); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}

// scaleOnce keeps a backlog on a fresh queue (sending as many messages as
// the target got) and samples pipes_concurrency every 250 ms until it
// reaches the maximum or the expected time runs out.
func (h *harness) scaleOnce(ctx context.Context, rate int) (ScaleUpResult, error) {
	o := h.o
	eff := rate
	if eff == 0 {
		eff = 300
	}
	const initial = 5
	r := ScaleUpResult{Rate: eff, Initial: initial, Max: o.scaleMax, Backlog: o.scaleBacklog, TargetDelay: o.scaleDelay.String()}
	url, err := h.srv.createQueue(ctx, "bench-scale", 120*time.Second)
	if err != nil {
		return r, err
	}
	defer h.srv.deleteQueue(url)
	if err := h.srv.fill(ctx, url, 0, o.scaleBacklog, o.size); err != nil {
		return r, err
	}
	h.tgt.reset(o.scaleDelay)
	defer h.tgt.reset(0)
	label := fmt.Sprintf("scaleup-%d", eff)
	c, murl, err := h.startPipes(label, pipeSpec{queueURL: url, wait: 20 * time.Second, maxConc: o.scaleMax, initConc: initial, rate: rate})
	if err != nil {
		return r, err
	}
	defer c.stop(60 * time.Second)
	start := time.Now()

	// The refiller keeps the backlog: it sends what the target got.
	rctx, stopRefill := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopRefill()
	wg.Go(func() {
		sent := int64(0)
		for rctx.Err() == nil {
			if k := h.tgt.items.Load() - sent; k > 0 {
				k = min(k, 2000)
				if err := h.srv.fill(rctx, url, o.scaleBacklog+int(sent), int(k), o.size); err != nil && rctx.Err() == nil {
					progress("scale-up refill: " + err.Error())
				}
				sent += k
			}
			select {
			case <-rctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	})

	if _, err := waitMetrics(ctx, murl, c, 15*time.Second); err != nil {
		return r, fmt.Errorf("%w: %s", err, h.logTail(label))
	}
	expect := time.Duration(float64(o.scaleMax-initial) / float64(eff) * float64(time.Minute))
	limit := expect*3/2 + 30*time.Second
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	reachedAt := -1.0
	for time.Since(start) < limit {
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-tick.C:
		}
		m, err := scrape(ctx, murl)
		if err != nil {
			if c.exited() {
				return r, fmt.Errorf("pipes exited during scale-up: %s", h.logTail(label))
			}
			continue
		}
		p := Point{T: time.Since(start).Seconds(), Concurrency: m.sum("pipes_concurrency", "pipe", "bench"), InFlight: m.sum("pipes_inflight_messages", "pipe", "bench")}
		r.Points = append(r.Points, p)
		if reachedAt < 0 && p.Concurrency >= float64(o.scaleMax) {
			reachedAt = p.T
		}
		if reachedAt >= 0 && p.T > reachedAt+2 {
			break
		}
	}
	if len(r.Points) == 0 {
		return r, errors.New("no concurrency sample")
	}
	first, last := r.Points[0], r.Points[len(r.Points)-1]
	if reachedAt >= 0 {
		r.Reached, r.SecondsToFull = true, reachedAt
		r.PerMinute = (float64(o.scaleMax) - first.Concurrency) / (reachedAt - first.T) * 60
	} else {
		r.SecondsToFull = last.T
		if last.T > first.T {
			r.PerMinute = (last.Concurrency - first.Concurrency) / (last.T - first.T) * 60
		}
		if r.PerMinute > 0 {
			r.Extrapolated = last.T + (float64(o.scaleMax)-last.Concurrency)/r.PerMinute*60
		}
	}
	progress(fmt.Sprintf("scale-up at %d/min: reached %v after %.1f s (%.0f/min), %d samples, target got %d",
		eff, r.Reached, r.SecondsToFull, r.PerMinute, len(r.Points), h.tgt.items.Load()))
	r.CSV = fmt.Sprintf("scaleup-%d.csv", eff)
	var rows [][]string
	for _, p := range r.Points {
		rows = append(rows, []string{ff(p.T), ff(p.Concurrency), ff(p.InFlight)})
	}
	if err := writeCSV(filepath.Join(h.resultsDir, r.CSV), []string{"t_seconds", "concurrency", "inflight_messages"}, rows); err != nil {
		return r, err
	}
	return r, nil
}

// memory runs pipes at memConc batches with a slow target, with the
// in-flight budget and without, sampling in-flight bytes and heap.
func (h *harness) memory(ctx context.Context, res *Results) error {
	var out []MemoryResult
	for _, budget := range []int64{h.o.memBudget, 0} {
		m, err := h.memoryOnce(ctx, budget)
		if err != nil {
			return err
		}
		out = append(out, m)
	}
	res.Memory = out
	return nil
}

func (h *harness) memoryOnce(ctx context.Context, budget int64) (MemoryResult, error) {
	o := h.o
	r := MemoryResult{Concurrency: o.memConc, Size: o.memSize, Budget: budget, TargetDelay: o.memDelay.String()}
	url, err := h.srv.createQueue(ctx, "bench-mem", 300*time.Second)
	if err != nil {
		return r, err
	}
	defer h.srv.deleteQueue(url)
	n := o.memConc * 10 * 2
	if err := h.srv.fill(ctx, url, 0, n, o.memSize); err != nil {
		return r, err
	}
	h.tgt.reset(o.memDelay)
	defer h.tgt.reset(0)
	label := fmt.Sprintf("memory-%d", budget)
	c, murl, err := h.startPipes(label, pipeSpec{queueURL: url, wait: 20 * time.Second, maxConc: o.memConc, initConc: o.memConc, budget: budget, budgetSet: true})
	if err != nil {
		return r, err
	}
	defer c.stop(90 * time.Second)
	m, err := waitMetrics(ctx, murl, c, 15*time.Second)
	if err != nil {
		return r, fmt.Errorf("%w: %s", err, h.logTail(label))
	}
	r.BaselineRSS = int64(m.sum("process_resident_memory_bytes"))
	start := time.Now()
	var rows [][]string
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for time.Since(start) < o.memSeconds {
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-tick.C:
		}
		m, err := scrape(ctx, murl)
		if err != nil {
			continue
		}
		ib, im := m.sum("pipes_inflight_bytes", "pipe", "bench"), m.sum("pipes_inflight_messages", "pipe", "bench")
		heap := m.sum("go_memstats_heap_alloc_bytes")
		rss := m.sum("process_resident_memory_bytes")
		r.PeakInflightBytes = math.Max(r.PeakInflightBytes, ib)
		r.PeakInflightMsgs = math.Max(r.PeakInflightMsgs, im)
		r.PeakHeap = math.Max(r.PeakHeap, heap)
		rows = append(rows, []string{ff(time.Since(start).Seconds()), ff(ib), ff(im), ff(heap), ff(rss)})
	}
	hwm, err := procStatusKB(c.cmd.Process.Pid, "VmHWM")
	if err != nil {
		return r, err
	}
	r.PeakRSS = hwm
	r.Seconds = time.Since(start).Seconds()
	if r.PeakInflightMsgs > 0 {
		r.HeapPerInflight = r.PeakHeap / r.PeakInflightMsgs
	}
	r.WithinBudget = budget <= 0 || r.PeakInflightBytes <= float64(budget)
	progress(fmt.Sprintf("memory (budget %d): peak RSS %s, heap %s, in flight %s in %.0f msgs, target got %d",
		budget, mib(float64(r.PeakRSS)), mib(r.PeakHeap), mib(r.PeakInflightBytes), r.PeakInflightMsgs, h.tgt.items.Load()))
	err = writeCSV(filepath.Join(h.resultsDir, fmt.Sprintf("memory-%d.csv", budget)),
		[]string{"t_seconds", "inflight_bytes", "inflight_messages", "heap_alloc_bytes", "rss_bytes"}, rows)
	return r, err
}

func ff(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// trickle (not in the default set) looks for receives beyond need: a pipe
// at concurrency 100 on an empty queue goes idle, then one message is
// sent, and the ReceiveMessage calls that one message costs are counted
// until the long polls it started have ended.
func (h *harness) trickle(ctx context.Context, res *Results) error {
	const conc = 100
	url, err := h.srv.createQueue(ctx, "bench-trickle", 60*time.Second)
	if err != nil {
		return err
	}
	defer h.srv.deleteQueue(url)
	h.tgt.reset(0)
	wait := h.o.idleWait
	c, murl, err := h.startPipes("trickle", pipeSpec{queueURL: url, wait: wait, maxConc: conc, initConc: conc})
	if err != nil {
		return err
	}
	defer c.stop(40 * time.Second)
	if _, err := waitMetrics(ctx, murl, c, 15*time.Second); err != nil {
		return fmt.Errorf("%w: %s", err, h.logTail("trickle"))
	}
	if err := sleep(ctx, wait+5*time.Second); err != nil {
		return err
	}
	before, err := scrape(ctx, murl)
	if err != nil {
		return err
	}
	if err := h.srv.fill(ctx, url, 0, 1, h.o.size); err != nil {
		return err
	}
	if !h.tgt.waitItems(ctx, 1, time.Minute, c.done) {
		return errors.New("the trickle message was not delivered within a minute")
	}
	if err := sleep(ctx, wait+5*time.Second); err != nil {
		return err
	}
	after, err := scrape(ctx, murl)
	if err != nil {
		return err
	}
	r := &TrickleResult{Concurrency: conc, WaitTime: wait.String(),
		StartupReceives:   before.sum("pipes_aws_api_calls_total", "operation", "ReceiveMessage"),
		ReceivesForOne:    after.sum("pipes_aws_api_calls_total", "operation", "ReceiveMessage") - before.sum("pipes_aws_api_calls_total", "operation", "ReceiveMessage"),
		ConcurrencyBefore: before.sum("pipes_concurrency", "pipe", "bench"),
		ConcurrencyAfter:  after.sum("pipes_concurrency", "pipe", "bench"),
	}
	progress(fmt.Sprintf("trickle: %.0f receives while going idle, %.0f receives for one message; concurrency %.0f → %.0f",
		r.StartupReceives, r.ReceivesForOne, r.ConcurrencyBefore, r.ConcurrencyAfter))
	res.Trickle = r
	return nil
}
