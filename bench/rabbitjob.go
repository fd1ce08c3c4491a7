package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// rabbitOptions are the rabbitjob scenario's flags.
type rabbitOptions struct {
	url      string
	n, size  int
	batch    int
	conc     string // comma-separated
	rounds   int
	variants string
}

// register adds the rabbitjob scenario's flags to fs.
func (o *rabbitOptions) register(fs *flag.FlagSet) {
	def := os.Getenv("PIPES_RABBITMQ_URL")
	if def == "" {
		def = "amqp://guest:guest@127.0.0.1:5672/"
	}
	fs.StringVar(&o.url, "rabbitjob-url", def, "the RabbitMQ broker of the rabbitjob scenario, skipped when it cannot be reached (default: PIPES_RABBITMQ_URL, or the local broker; a URL with a real password belongs in PIPES_RABBITMQ_URL: the command line is saved with the results)")
	fs.IntVar(&o.n, "rabbitjob-n", 20000, "messages per drain of the rabbitjob scenario")
	fs.IntVar(&o.size, "rabbitjob-size", 200, "message body size of the rabbitjob scenario")
	fs.IntVar(&o.batch, "rabbitjob-batch", 10, "batch size of the rabbitjob scenario (the prefetch is batch × concurrency, pipes' default)")
	fs.StringVar(&o.conc, "rabbitjob-concurrency", "4,16", "concurrencies of the rabbitjob scenario (comma-separated)")
	fs.IntVar(&o.rounds, "rabbitjob-rounds", 3, "rounds of the rabbitjob scenario at each concurrency (the runners' order rotates; medians are reported)")
	fs.StringVar(&o.variants, "rabbitjob-variants", "default,gomaxprocs1,gomaxprocs1+channels",
		"variants of the hand-written RabbitMQ consumer (bench/rabbitjob): default (a shared channel, an ack per message), gomaxprocs1 (GOMAXPROCS=1), channels (a channel per worker, one multiple ack per batch), gomaxprocs1+channels; default always runs")
}

// rabbitVariant is one way the hand-written RabbitMQ consumer runs.
type rabbitVariant struct {
	name, runner, what string
	gomaxprocs1        bool // GOMAXPROCS=1 in its environment
	channels           bool // -channels
}

// rabbitVariants are the variants -rabbitjob-variants may name, in
// report order.
var rabbitVariants = []rabbitVariant{
	{name: "default", runner: "rabbitjob", what: "as a user writes it: a shared channel, an ack per message"},
	{name: "gomaxprocs1", runner: "rabbitjob-gomaxprocs1", what: "GOMAXPROCS=1", gomaxprocs1: true},
	{name: "channels", runner: "rabbitjob-channels", what: "a channel per worker, one multiple ack per batch", channels: true},
	{name: "gomaxprocs1+channels", runner: "rabbitjob-gomaxprocs1-channels", what: "GOMAXPROCS=1, a channel per worker, one multiple ack per batch", gomaxprocs1: true, channels: true},
}

// parseRabbitVariants reads -rabbitjob-variants: default comes first
// whether named or not.
func parseRabbitVariants(s string) ([]rabbitVariant, error) {
	out := []rabbitVariant{rabbitVariants[0]}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" || f == "default" {
			continue
		}
		found := false
		for _, v := range rabbitVariants[1:] {
			if v.name == f {
				found = true
				dup := false
				for _, o := range out {
					dup = dup || o.name == f
				}
				if !dup {
					out = append(out, v)
				}
			}
		}
		if !found {
			names := make([]string, len(rabbitVariants))
			for i, v := range rabbitVariants {
				names[i] = v.name
			}
			return nil, fmt.Errorf("-rabbitjob-variants: unknown variant %q (want %s)", f, strings.Join(names, ","))
		}
	}
	return out, nil
}

// RabbitJobResult compares pipes draining a RabbitMQ queue to the HTTP
// target with the hand-written amqp091-go consumer of bench/rabbitjob
// doing the same job (issue 21), at each concurrency.
type RabbitJobResult struct {
	N      int    `json:"n"`
	Size   int    `json:"size"`
	Batch  int    `json:"batch"`
	Rounds int    `json:"rounds"`
	Queue  string `json:"queue"` // the queue kind: "classic, durable, persistent messages"
	// Levels are the concurrencies measured.
	Levels []RabbitJobLevel `json:"levels"`
}

// RabbitJobLevel is the RabbitMQ same-job comparison at one concurrency.
type RabbitJobLevel struct {
	Concurrency int `json:"concurrency"`
	Prefetch    int `json:"prefetch"`
	// Load is /proc/loadavg's 1-minute figure at the level's start and end.
	Load      string              `json:"load"`
	Runs      []Run               `json:"runs"`
	Pipes     RunnerSummary       `json:"pipes"`
	Consumers []RabbitJobConsumer `json:"consumers"`
	// Best is the variant with the least median CPU per message while
	// draining; BestCPURatio pipes' over it (target ≤ 1.0).
	Best         string  `json:"best"`
	BestCPURatio float64 `json:"best_cpu_ratio"`
	// Fastest is the variant with the most median msgs/s while draining;
	// ThroughputRatio is pipes' over it (target ≥ 0.9).
	Fastest         string  `json:"fastest"`
	ThroughputRatio float64 `json:"throughput_ratio"`
}

// RabbitJobConsumer is one variant of the hand-written consumer and
// pipes' ratios over it.
type RabbitJobConsumer struct {
	Variant string        `json:"variant"`
	Runner  string        `json:"runner"`
	Summary RunnerSummary `json:"summary"`
	// CPURatio is pipes' CPU per message while draining over this
	// variant's; ThroughputRatio pipes' msgs/s while draining over this
	// variant's (medians).
	CPURatio        float64 `json:"cpu_ratio"`
	ThroughputRatio float64 `json:"throughput_ratio"`
}

// rabbitReachable dials the broker's address of amqpURL (2 s).
func rabbitReachable(amqpURL string) error {
	uri, err := amqp.ParseURI(amqpURL)
	if err != nil {
		return fmt.Errorf("-rabbitjob-url is not an AMQP URL")
	}
	c, err := net.DialTimeout("tcp", net.JoinHostPort(uri.Host, strconv.Itoa(uri.Port)), 2*time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

// rabbitJob drains n messages of a fresh durable classic queue at each
// -rabbitjob-concurrency with pipes (rabbitmq source, records as they
// are, http target) and with each -rabbitjob-variants variant of
// bench/rabbitjob, at the same batch size, prefetch and concurrency, in
// rounds whose runner order rotates. CPU per message and msgs/s are
// counted from the first batch at the target to the last; the medians
// give the ratios. Without a reachable broker it is skipped.
func (h *harness) rabbitJob(ctx context.Context, res *Results) error {
	o := h.o.rabbit
	if err := rabbitReachable(o.url); err != nil {
		progress("scenario rabbitjob skipped: no RabbitMQ broker at " + redactURL(o.url) + " (" + err.Error() + ")")
		return nil
	}
	variants, err := parseRabbitVariants(o.variants)
	if err != nil {
		return err
	}
	var levels []int
	for _, f := range strings.Split(o.conc, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return fmt.Errorf("-rabbitjob-concurrency: %q is not a positive integer", f)
		}
		levels = append(levels, n)
	}
	bin := filepath.Join(h.tmp, "rabbitjob")
	if err := h.build(ctx, bin, "./bench/rabbitjob"); err != nil {
		return err
	}
	bc := &brokerConn{url: o.url}
	defer bc.close()
	r := &RabbitJobResult{N: o.n, Size: o.size, Batch: o.batch, Rounds: o.rounds, Queue: "classic, durable, persistent messages"}
	runners := []string{"pipes"}
	for _, v := range variants {
		runners = append(runners, v.runner)
	}
	for _, conc := range levels {
		lvl := RabbitJobLevel{Concurrency: conc, Prefetch: o.batch * conc}
		load0 := loadAvg()
		for round := 1; round <= o.rounds; round++ {
			k := (round - 1) % len(runners)
			order := append(append([]string(nil), runners[k:]...), runners[:k]...)
			for _, runner := range order {
				run, err := h.rabbitDrainRetried(ctx, bc, bin, runner, round, conc, variants)
				if err != nil {
					return err
				}
				lvl.Runs = append(lvl.Runs, run)
			}
		}
		lvl.Load = load0 + " → " + loadAvg()
		lvl.Pipes = summarize(lvl.Runs, "pipes")
		bestCPU, bestTP := 0.0, 0.0
		for _, v := range variants {
			s := summarize(lvl.Runs, v.runner)
			c := RabbitJobConsumer{Variant: v.name, Runner: v.runner, Summary: s,
				CPURatio: ratio(lvl.Pipes.DrainCPUPer1000, s.DrainCPUPer1000), ThroughputRatio: ratio(lvl.Pipes.MsgsPerSec, s.MsgsPerSec)}
			lvl.Consumers = append(lvl.Consumers, c)
			if s.DrainCPUPer1000 > 0 && (bestCPU == 0 || s.DrainCPUPer1000 < bestCPU) {
				bestCPU, lvl.Best, lvl.BestCPURatio = s.DrainCPUPer1000, v.name, c.CPURatio
			}
			if s.MsgsPerSec > bestTP {
				bestTP, lvl.Fastest, lvl.ThroughputRatio = s.MsgsPerSec, v.name, c.ThroughputRatio
			}
		}
		parts := make([]string, 0, len(lvl.Consumers))
		for _, c := range lvl.Consumers {
			parts = append(parts, fmt.Sprintf("%s %.1f µs/msg %.0f msgs/s (pipes ÷ it: CPU %.2f, msgs/s %.2f)", c.Variant, 1000*c.Summary.DrainCPUPer1000, c.Summary.MsgsPerSec, c.CPURatio, c.ThroughputRatio))
		}
		progress(fmt.Sprintf("rabbitjob at concurrency %d, prefetch %d (load %s): pipes %.1f µs/msg %.0f msgs/s; hand-written consumer %s; CPU pipes ÷ the best (%s) %.2f; msgs/s pipes ÷ the fastest (%s) %.2f",
			conc, lvl.Prefetch, lvl.Load, 1000*lvl.Pipes.DrainCPUPer1000, lvl.Pipes.MsgsPerSec, strings.Join(parts, ", "), lvl.Best, lvl.BestCPURatio, lvl.Fastest, lvl.ThroughputRatio))
		if err := writeRunsCSV(filepath.Join(h.resultsDir, fmt.Sprintf("rabbitjob-%d.csv", conc)), lvl.Runs); err != nil {
			return err
		}
		r.Levels = append(r.Levels, lvl)
	}
	res.RabbitJob = r
	if h.o.cpuProfiles == "" {
		return nil
	}
	// One more drain each, profiled, not counted: pipes' runtime in
	// bench/heapprobe (as `pipes run` runs it) and the default consumer.
	if err := os.MkdirAll(h.o.cpuProfiles, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", h.o.cpuProfiles, err)
	}
	for _, conc := range levels {
		for _, runner := range []string{"pipes-probe", "rabbitjob-profiled"} {
			if _, err := h.rabbitDrainRetried(ctx, bc, bin, runner, 0, conc, variants); err != nil {
				return err
			}
		}
	}
	return nil
}

// build compiles pkg of the repository to bin.
func (h *harness) build(ctx context.Context, bin, pkg string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
	cmd.Dir = h.root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %w: %s", pkg, err, out)
	}
	return nil
}

// brokerConn is the harness's own connection to the broker, for filling
// and inspecting the queues, dialled again after it closed.
type brokerConn struct {
	url  string
	conn *amqp.Connection
	ch   *amqp.Channel // in confirm mode
	// leftover are the queues a closed channel could not delete: the next
	// channel does.
	leftover []string
}

// channel returns the open channel, dialling first when there is none.
func (b *brokerConn) channel() (*amqp.Channel, error) {
	if b.ch != nil && !b.ch.IsClosed() {
		return b.ch, nil
	}
	b.close()
	conn, err := amqp.Dial(b.url)
	if err != nil {
		return nil, fmt.Errorf("connecting to RabbitMQ: %w", err)
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("opening a channel in confirm mode: %w", err)
	}
	b.conn, b.ch = conn, ch
	left := b.leftover
	b.leftover = nil
	for _, q := range left {
		b.deleteQueue(q)
	}
	return ch, nil
}

// deleteQueue deletes queue now, or on the next channel.
func (b *brokerConn) deleteQueue(queue string) {
	if b.ch == nil {
		b.leftover = append(b.leftover, queue)
		return
	}
	if _, err := b.ch.QueueDelete(queue, false, false, false); err != nil {
		b.leftover = append(b.leftover, queue)
	}
}

func (b *brokerConn) close() {
	if b.ch != nil && !b.ch.IsClosed() {
		left := b.leftover
		b.leftover = nil
		for _, q := range left {
			b.deleteQueue(q)
		}
	}
	if b.conn != nil {
		_ = b.conn.Close()
	}
	b.conn, b.ch = nil, nil
}

// rabbitDrainRetried is rabbitDrain, tried up to three times 10 s apart:
// the broker is shared, and a test elsewhere may restart it.
func (h *harness) rabbitDrainRetried(ctx context.Context, bc *brokerConn, bin, runner string, round, conc int, variants []rabbitVariant) (Run, error) {
	var err error
	for try := 1; ; try++ {
		if _, err = bc.channel(); err == nil {
			var run Run
			if run, err = h.rabbitDrain(ctx, bc, bin, runner, round, conc, variants); err == nil {
				return run, nil
			}
		}
		if try == 3 || ctx.Err() != nil {
			return Run{}, err
		}
		progress(fmt.Sprintf("rabbitjob %s c%d round %d failed (%v): again in 10 s on a fresh queue", runner, conc, round, err))
		bc.close()
		if err := sleep(ctx, 10*time.Second); err != nil {
			return Run{}, err
		}
	}
}

// rabbitDrain fills a fresh queue with n messages and lets runner drain
// it at concurrency conc: pipes, a variant's runner, or (profiled, not
// counted) pipes-probe and rabbitjob-profiled.
func (h *harness) rabbitDrain(ctx context.Context, bc *brokerConn, bin, runner string, round, conc int, variants []rabbitVariant) (Run, error) {
	o := h.o.rabbit
	var out Run
	ch := bc.ch
	queue := fmt.Sprintf("bench-rabbitjob-%s-c%d-%d-%s", runner, conc, round, rand.Text()[:6])
	if _, err := ch.QueueDeclare(queue, true, false, false, false, amqp.Table{"x-queue-type": "classic"}); err != nil {
		return out, fmt.Errorf("declaring queue %s: %w", queue, err)
	}
	defer bc.deleteQueue(queue)
	if err := fillRabbit(ctx, ch, queue, o.n, o.size); err != nil {
		return out, err
	}
	h.tgt.reset(0)
	label := fmt.Sprintf("rabbitjob-%s-c%d-%d", runner, conc, round)
	prefetch := o.batch * conc
	consumerArgs := []string{bin, "-url", o.url, "-queue", queue, "-target", h.tgt.url,
		"-concurrency", strconv.Itoa(conc), "-batch", strconv.Itoa(o.batch), "-prefetch", strconv.Itoa(prefetch)}
	start := time.Now()
	var c *child
	var err error
	switch runner {
	case "pipes", "pipes-probe":
		file := filepath.Join(h.tmp, label+".yaml")
		if err := os.WriteFile(file, []byte(rabbitPipelineYAML(o.url, queue, h.tgt.url, o.batch, conc)), 0o644); err != nil {
			return out, fmt.Errorf("writing the pipeline file: %w", err)
		}
		if runner == "pipes" {
			c, err = h.kids.start("pipes", filepath.Join(h.tmp, label+".log"), nil, h.pipesBin, "run", "-f", file, "--metrics-addr", "127.0.0.1:0")
		} else {
			prof := filepath.Join(h.o.cpuProfiles, fmt.Sprintf("rabbitjob-pipes-probe-c%d.pprof", conc))
			c, err = h.kids.start("heapprobe", filepath.Join(h.tmp, label+".log"), nil, h.heapprobeBin, "-f", file, "-cpuprofile", prof)
		}
	case "rabbitjob-profiled":
		prof := filepath.Join(h.o.cpuProfiles, fmt.Sprintf("rabbitjob-consumer-c%d.pprof", conc))
		c, err = h.kids.start("rabbitjob", filepath.Join(h.tmp, label+".log"), nil, append(consumerArgs, "-cpuprofile", prof)...)
	default:
		var v *rabbitVariant
		for i := range variants {
			if variants[i].runner == runner {
				v = &variants[i]
			}
		}
		if v == nil {
			return out, fmt.Errorf("unknown runner %q", runner)
		}
		args := consumerArgs
		if v.channels {
			args = append(args[:len(args):len(args)], "-channels")
		}
		var env []string
		if v.gomaxprocs1 {
			env = []string{"GOMAXPROCS=1"}
		}
		c, err = h.kids.start("rabbitjob", filepath.Join(h.tmp, label+".log"), env, args...)
	}
	if err != nil {
		return out, err
	}
	defer c.stop(40 * time.Second)
	timeout := time.Minute + time.Duration(o.n)*time.Millisecond
	if !h.tgt.waitItems(ctx, 1, timeout, c.done) {
		return out, fmt.Errorf("%s delivered nothing within %v: %s", runner, timeout, h.logTail(label))
	}
	t0, items0 := time.Now(), h.tgt.items.Load()
	cpu0, err := procCPU(c.cmd.Process.Pid)
	if err != nil {
		return out, err
	}
	if !h.tgt.waitItems(ctx, int64(o.n), timeout, c.done) {
		return out, fmt.Errorf("%s delivered %d of %d messages within %v: %s", runner, h.tgt.items.Load(), o.n, timeout, h.logTail(label))
	}
	t1, items1 := time.Now(), h.tgt.items.Load()
	cpu1, err := procCPU(c.cmd.Process.Pid)
	if err != nil {
		return out, err
	}
	c.stop(40 * time.Second)
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, amqp.Table{"x-queue-type": "classic"})
	if err != nil {
		return out, fmt.Errorf("reading queue %s: %w", queue, err)
	}
	if q.Messages != 0 {
		return out, fmt.Errorf("%s left %d of %d messages unacked in queue %s: %s", runner, q.Messages, o.n, queue, h.logTail(label))
	}
	delivered := h.tgt.items.Load()
	drain := t1.Sub(t0).Seconds()
	out = Run{Runner: runner, Rep: round, Concurrency: conc, Seconds: time.Since(start).Seconds(), CPUSeconds: c.cpuSeconds(), Delivered: delivered}
	out.CPUPer1000 = out.CPUSeconds / float64(o.n) * 1000
	if items1 > items0 && drain > 0 {
		out.DrainCPUPer1000 = (cpu1 - cpu0) / float64(items1-items0) * 1000
		out.MsgsPerSec = float64(items1-items0) / drain
	}
	user, sys, switches := c.usage()
	progress(fmt.Sprintf("rabbitjob %s c%d round %d: %d msgs, %.0f msgs/s while draining (%.2f s), %.1f µs/msg while draining (%.1f µs/msg with start-up and stop; user %.3f s, system %.3f s, %.2f context switches a message), delivered %d, load %s",
		runner, conc, round, o.n, out.MsgsPerSec, drain, 1000*out.DrainCPUPer1000, 1000*out.CPUPer1000, user, sys, float64(switches)/float64(o.n), delivered, loadAvg()))
	return out, nil
}

// rabbitPipelineYAML is the pipe of the rabbitjob scenario: the queue's
// records as they are, batch at a time, to the target.
func rabbitPipelineYAML(amqpURL, queue, target string, batch, conc int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: bench\nsource:\n  type: rabbitmq\n  url: %s\n  queue: %s\n", amqpURL, queue)
	fmt.Fprintf(&b, "  batch_size: %d\n  max_concurrency: %d\n  initial_concurrency: %d\n", batch, conc, conc)
	fmt.Fprintf(&b, "target:\n  type: http\n  url: %s\n  timeout: 60s\n", target)
	return b.String()
}

// fillRabbit publishes n persistent messages of size bytes to queue
// (through the default exchange) and waits for the broker's confirms.
func fillRabbit(ctx context.Context, ch *amqp.Channel, queue string, n, size int) error {
	const window = 500
	ts := time.Now().UTC().Truncate(time.Second)
	pending := make([]*amqp.DeferredConfirmation, 0, window)
	wait := func() error {
		for _, dc := range pending {
			ok, err := dc.WaitContext(ctx)
			if err != nil {
				return fmt.Errorf("filling queue %s: %w", queue, err)
			}
			if !ok {
				return fmt.Errorf("filling queue %s: the broker nacked a message", queue)
			}
		}
		pending = pending[:0]
		return nil
	}
	for i := range n {
		body := benchBody(i, size)
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, false, false, amqp.Publishing{
			MessageId: "bench-" + strconv.Itoa(i), ContentType: "application/json", DeliveryMode: amqp.Persistent,
			Timestamp: ts, Body: body,
		})
		if err != nil {
			return fmt.Errorf("filling queue %s: %w", queue, err)
		}
		if pending = append(pending, dc); len(pending) == window {
			if err := wait(); err != nil {
				return err
			}
		}
	}
	return wait()
}

// benchBody is message i's JSON body of about size bytes.
func benchBody(i, size int) []byte {
	b := fmt.Appendf(nil, `{"kind":"order","id":%d,"amount":%d,"pad":"`, i, i%100+1)
	for len(b) < size-2 {
		b = append(b, 'x')
	}
	return append(b, `"}`...)
}

// loadAvg is the 1-minute load average ("?" when unknown).
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

// redactURL is u without its password.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "the -rabbitjob-url"
	}
	return p.Redacted()
}

// rabbitJobRows adds the rabbitjob scenario's rows to the report: per
// concurrency, pipes and each variant of the hand-written consumer, and
// pipes ÷ the best (CPU, target ≤ 1.0) and ÷ the fastest (msgs/s, target
// ≥ 0.9).
func rabbitJobRows(row func(fig, val, target string, met *bool), r *RabbitJobResult) {
	if r == nil {
		return
	}
	what := func(name string) string {
		for _, v := range rabbitVariants {
			if v.name == name {
				return v.what
			}
		}
		return name
	}
	val := func(s RunnerSummary) string {
		return fmt.Sprintf("%.1f (%.1f with start-up and stop; %.0f msgs/s while draining)", 1000*s.DrainCPUPer1000, 1000*s.CPUPer1000, s.MsgsPerSec)
	}
	for _, l := range r.Levels {
		fig := fmt.Sprintf("RabbitMQ same job, concurrency %d, prefetch %d", l.Concurrency, l.Prefetch)
		setup := fmt.Sprintf("%d × %d B, %s queue, batches of %d, medians of %d rotated rounds, load %s; CPU and msgs/s from the first batch at the target to the last", r.N, r.Size, r.Queue, r.Batch, r.Rounds, l.Load)
		row(fig+": CPU µs per msg, pipes (records as they are)", val(l.Pipes), setup, nil)
		for _, c := range l.Consumers {
			row(fmt.Sprintf("%s: CPU µs per msg, hand-written amqp091-go consumer (bench/rabbitjob, %s)", fig, what(c.Variant)),
				fmt.Sprintf("%s; pipes ÷ it: CPU %.2f, msgs/s %.2f", val(c.Summary), c.CPURatio, c.ThroughputRatio), "", nil)
		}
		cpuMet, tpMet := l.BestCPURatio <= 1.0, l.ThroughputRatio >= 0.9
		row(fmt.Sprintf("%s: CPU ratio pipes ÷ the best hand-written consumer (%s)", fig, what(l.Best)), fmt.Sprintf("%.2f", l.BestCPURatio), "≤ 1.0", &cpuMet)
		row(fmt.Sprintf("%s: throughput ratio pipes ÷ the fastest hand-written consumer (%s)", fig, what(l.Fastest)), fmt.Sprintf("%.2f", l.ThroughputRatio), "≥ 0.9", &tpMet)
	}
}
