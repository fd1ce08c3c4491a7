package pipe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/pipesproject/pipes/budget"
	"github.com/pipesproject/pipes/internal/backoff"
	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/source"
)

// Limits fixed by Pipes and SQS.
const (
	// maxBatchBytes is the payload above which a batch is handed on early
	// (the 6 MB synchronous invocation quota).
	maxBatchBytes = 6 << 20
	// maxReceive is the most messages one ReceiveMessage returns, and the
	// most entries of a DeleteMessageBatch.
	maxReceive = 10
	// maxVisibility is SQS's 12-hour ceiling on a message's invisibility,
	// counted from its receive.
	maxVisibility = 12 * time.Hour
	// defaultVisibility stands in for a source that reports none.
	defaultVisibility = 30 * time.Second
	// stopGrace is how long batches get to return once their target calls
	// are cancelled at the shutdown deadline; releases and deletes then get
	// settleMargin more. Everything after a stop fits in ShutdownTimeout +
	// stopGrace + settleMargin.
	stopGrace    = time.Second
	settleMargin = 4 * time.Second
	// drainOpenTimeout is how long --drain keeps trying to open a source
	// that fails before it gives up with the reason.
	drainOpenTimeout = 30 * time.Second
)

// Backoff gives a failed item a visibility timeout by receive count:
// Base * Factor^(receiveCount-1), capped at Max (and under SQS's 12 h), with
// full jitter when Jitter is set.
type Backoff struct {
	Base   time.Duration
	Factor float64
	Max    time.Duration
	Jitter bool
}

// Delay is the visibility to give an item received receiveCount times, in
// whole seconds, rounded up: a delay is never cut to 0, which is a
// release (on RabbitMQ a give-back that neither counts nor dead-letters).
// Max 0 means only SQS's cap (12 h less a minute).
func (b Backoff) Delay(receiveCount int) time.Duration {
	limit := b.Max
	if limit <= 0 || limit > maxVisibility-time.Minute {
		limit = maxVisibility - time.Minute
	}
	e := backoff.Exponential{Base: b.Base, Max: limit, Factor: max(b.Factor, 1)}
	if b.Jitter {
		e.Jitter = backoff.Full
	}
	d := e.Delay(receiveCount)
	if r := d % time.Second; r != 0 {
		d += time.Second - r
	}
	return d
}

// Options configure a Pipe. Source and Target are required.
type Options struct {
	// Name identifies the pipe in logs and metrics.
	Name string
	// Source is the queue to poll.
	Source source.Source
	// Filter, when set, decides which events go on; the others are deleted
	// as filtered.
	Filter Filter
	// Enricher, when set, runs on the events that passed the filter; what
	// it returns goes on to the target.
	Enricher Enricher
	// Transformer, when set, renders each event's payload for the target
	// (after the enrichment).
	Transformer Transformer
	// Target receives the batches.
	Target Target
	// TargetTimeout is the longest a target call may take; it is used for
	// the visibility advice at start. 0: unknown.
	TargetTimeout time.Duration

	// BatchSize is the most messages in a batch (default 10).
	BatchSize int
	// BatchWindow is how long a batch may wait to fill (0: hand on what each
	// receive returns).
	BatchWindow time.Duration
	// MaxConcurrency caps the batches in flight (default 1000).
	MaxConcurrency int
	// InitialConcurrency is where scaling starts (default 5).
	InitialConcurrency int
	// ScaleUpPerMinute is how many concurrent batches may be added per
	// minute while messages keep coming (default 300).
	ScaleUpPerMinute int
	// DeadLetter, when set, receives the items that fail with a client
	// error (Permanent) and, with DeadLetterOnExhausted, those whose
	// in-runner retries ran out (Exhausted), each with its failure context
	// as message attributes; they are deleted from the source once sent.
	DeadLetter Target
	// DeadLetterOnExhausted sends items whose retries ran out to
	// DeadLetter instead of back to the queue.
	DeadLetterOnExhausted bool
	// Unwrap names the envelope to take message bodies out of: "sns",
	// "eventbridge", "auto" (either) or "" (none).
	Unwrap string
	// RateLimit caps the messages received per second (0: no cap). A token
	// bucket (burst: one second's worth, at least 10) gates the receives, so
	// messages beyond the rate stay in the queue and burn no receive count.
	RateLimit float64
	// RetryBackoff, when set, gives failed items a visibility by receive
	// count; otherwise they wait out the visibility they have.
	RetryBackoff *Backoff
	// ShutdownTimeout bounds how long in-flight batches may run after the
	// pipe is told to stop; what is unfinished then is released (default
	// 30 s).
	ShutdownTimeout time.Duration
	// Drain makes Run return once the source is empty and nothing is in
	// flight.
	Drain bool
	// DryRun never deletes: messages that would be deleted (delivered or
	// filtered) stay hidden by the heartbeat while the pipe runs and are
	// released (visibility 0) when it stops, so a live queue can be watched
	// without consuming it. With Drain, the pipe stops once receives come
	// back empty.
	DryRun bool

	// Budget bounds in-flight bytes across pipes (nil: no limit).
	Budget *budget.Budget
	// Metrics receives the pipe's series (nil: a private, unregistered set).
	Metrics *Metrics
	// Logger receives the pipe's logs (nil: discard).
	Logger *slog.Logger
	// LogLevel is Pipes' execution log level: off, error, info or trace.
	LogLevel string
	// IncludeExecutionData adds payloads to trace logs.
	IncludeExecutionData bool
	// Tracer, when set, gives every batch a span with a child per stage
	// (trace.go); nil: no tracing, at no cost.
	Tracer Tracer
}

// Pipe moves messages from a source to a target. Create it with New and
// start it with Run. The pipe ties its parts together under one lock:
// the scheduler (scheduler.go) counts what is under way, the receive
// backoff (recvbackoff.go) pauses a failing source, the size estimate
// (sizeest.go) reserves budget, the circuit breaker (breaker.go) and the
// held batches (held.go) ride out a target's outage; the rate limiter
// (limiter.go) has a lock of its own. Batches are formed by its batcher
// and every message is settled by its settler.
type Pipe struct {
	opt  Options
	log  *slog.Logger
	exec execLog
	met  *pipeMetrics
	wake chan struct{}

	abortOnce sync.Once
	abort     chan struct{} // closed by Abort

	// lazyPayloads: events carry their records not encoded yet (the
	// target is a PayloadAppender and no stage reads payloads before it).
	lazyPayloads bool
	rate         *limiter // nil: no rate limit

	mu          sync.Mutex
	info        source.Info
	visibility  time.Duration
	set         *settler
	batches     batcher
	ctl         *controller
	sched       scheduler
	recvBackoff recvBackoff
	sizes       sizeEstimate
	dry         dryHold
	circuit     breaker
	held        holds
	convicted   convictions // bisect.go
	started     bool
	stopping    bool
	paused      bool // Pause: no receive starts (control.go)
	drained     bool
}

// New checks the options and makes a pipe.
func New(opt Options) (*Pipe, error) {
	if opt.Source == nil {
		return nil, errors.New("pipe: a source is required")
	}
	if opt.Target == nil {
		return nil, errors.New("pipe: a target is required")
	}
	if opt.Name == "" {
		opt.Name = "pipe"
	}
	if opt.BatchSize <= 0 {
		opt.BatchSize = 10
	}
	if opt.MaxConcurrency <= 0 {
		opt.MaxConcurrency = 1000
	}
	if opt.InitialConcurrency <= 0 {
		opt.InitialConcurrency = 5
	}
	if opt.ScaleUpPerMinute <= 0 {
		opt.ScaleUpPerMinute = 300
	}
	if opt.ShutdownTimeout <= 0 {
		opt.ShutdownTimeout = 30 * time.Second
	}
	if opt.Metrics == nil {
		opt.Metrics = NewMetrics(nil)
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	log := opt.Logger.With("pipe", opt.Name)
	_, appender := opt.Target.(PayloadAppender)
	return &Pipe{
		lazyPayloads: appender && opt.Enricher == nil && opt.Transformer == nil,
		opt:          opt,
		log:          log,
		exec:         newExecLog(log, opt.LogLevel, opt.IncludeExecutionData),
		met:          opt.Metrics.forPipe(opt.Name),
		wake:         make(chan struct{}, 1),
		abort:        make(chan struct{}),
		rate:         newLimiter(opt.RateLimit),
		sched:        scheduler{batchSize: opt.BatchSize},
	}, nil
}

// Abort cuts a stop short: a Run that is stopping (its ctx is done) acts
// at once as if ShutdownTimeout had passed: target calls and receives are
// cancelled and everything unfinished is released. Before the stop it
// only marks the pipe so that the stop is immediate. It is what a second
// SIGTERM does. Safe for concurrent use; it does not block.
func (p *Pipe) Abort() { p.abortOnce.Do(func() { close(p.abort) }) }

// Name is the pipe's name.
func (p *Pipe) Name() string { return p.opt.Name }

// Ready reports whether the pipe has opened its source and is polling.
// It is false too while the source keeps failing (three rounds of receives in a
// row) and while the circuit breaker holds polling for a failing target;
// LastError says why.
func (p *Pipe) Ready() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.started && !p.stopping && !p.recvBackoff.failing() && !p.circuit.open
}

// LastError is why the pipe is not ready: the source's last error while it
// keeps failing, or the target's while the circuit is open; nil when both
// work.
func (p *Pipe) LastError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.recvBackoff.err == nil && p.circuit.open {
		return fmt.Errorf("target failing, polling paused (circuit open, next probe in %s): %w",
			time.Until(p.circuit.probeAt).Round(time.Second), p.circuit.err)
	}
	return p.recvBackoff.err
}

// Concurrency is the number of batches the pipe may have in flight now.
func (p *Pipe) Concurrency() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sched.conc
}

func (p *Pipe) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Run polls the source and processes batches until ctx is done (or, with
// Drain, until the source is empty). It then stops polling at once, lets
// in-flight batches finish within ShutdownTimeout, and has the settler
// release (Nak) what did not finish and flush what is settled. Everything
// after the stop fits in ShutdownTimeout plus a few seconds: a target that
// ignores the cancellation of its call is left running, and its verdicts
// are refused (the messages were released). Run returns nil on a clean
// stop and an error only when the source cannot be opened for good. Run
// must be called once.
func (p *Pipe) Run(ctx context.Context) error {
	info, err := p.openSource(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	now := time.Now()
	p.mu.Lock()
	p.info = info
	p.visibility = info.VisibilityTimeout
	if p.visibility <= 0 {
		p.visibility = defaultVisibility
	}
	p.ctl = newController(p.opt.InitialConcurrency, p.opt.MaxConcurrency, p.opt.ScaleUpPerMinute, now)
	p.sched.conc = p.ctl.cur
	p.batches = newBatcher(info.FIFO, p.opt.BatchSize)
	p.set = newSettler(p.settlerConfig(), min(64, max(8, p.opt.MaxConcurrency)))
	p.started = true
	p.mu.Unlock()
	p.met.concurrency.Set(float64(p.sched.conc))
	p.followConcurrency(p.sched.conc)
	p.adviseOnQueue(info)
	p.log.Info("pipe started", "source", info.ARN, "fifo", info.FIFO, "visibility_timeout", p.visibility.String(),
		"batch_size", p.opt.BatchSize, "batch_window", p.opt.BatchWindow.String(), "concurrency", p.sched.conc,
		"max_concurrency", p.opt.MaxConcurrency)

	// work outlives ctx by up to ShutdownTimeout: in-flight batches and
	// receives go on after polling stops.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	// Receives run under recv: cut at once at the stop when the source
	// loses nothing by it (CancelSafe), else waited for.
	recv, cancelRecv := context.WithCancel(work)
	defer cancelRecv()
	// Receives and batches run on the pipe's long-lived workers, sized
	// to the concurrency by the scaler (schedule).
	pool := newWorkers(poolSize(p.sched.conc))
	p.schedule(ctx, recv, work, pool)
	if _, ok := p.opt.Source.(source.CancelSafe); ok {
		cancelRecv()
	}

	// Polling has stopped: hand on what was received, let batches finish.
	deadline := time.Now().Add(p.opt.ShutdownTimeout)
	p.mu.Lock()
	p.stopping = true
	p.batches.closeOpen()
	held := p.held.release()
	if p.circuit.open {
		// The target is down: what waits for a batch is given back now
		// rather than sent to fail.
		held = append(held, p.batches.drain()...)
	}
	polls, inflight := p.sched.receiving, p.sched.inflight
	p.mu.Unlock()
	p.giveBack(held)
	if _, safe := p.opt.Source.(source.CancelSafe); polls > 0 && !safe {
		// An abandoned long poll still takes messages on the server (seen
		// on SQS-compatible servers), which would then stay hidden for their
		// visibility timeout: the polls are waited for instead.
		wait := "up to the wait time"
		if pl, ok := p.opt.Source.(interface{ PollLeft() time.Duration }); ok { // sqs.Source
			wait = "at most " + pl.PollLeft().Round(time.Second).String() + ", the wait_time left"
		}
		p.log.Info("stopping: waiting for the long polls under way ("+wait+"); what they return is released at once; a second signal stops now",
			"polls", polls, "batches_in_flight", inflight, "shutdown_timeout", p.opt.ShutdownTimeout.String())
	}
	p.dispatch(work, pool)
	done := make(chan struct{})
	go func() {
		// Wait for batches, new ones dispatched as slots free, and for the
		// receives under way: they are not cut short before the deadline,
		// since a long poll abandoned on the client may still take messages
		// on the server; what they return now is released at once.
		for work.Err() == nil {
			p.mu.Lock()
			left := p.sched.inflight + p.batches.pending() + p.sched.receiving
			p.mu.Unlock()
			if left == 0 {
				break
			}
			select {
			case <-p.wake:
			case <-time.After(50 * time.Millisecond):
			case <-work.Done():
			}
			p.dispatch(work, pool)
		}
		pool.wait()
		close(done)
	}()
	timer := time.NewTimer(time.Until(deadline))
	finished := true // every job returned: the workers are waited for
	select {
	case <-done:
		timer.Stop()
	case <-p.abort:
		timer.Stop()
		p.log.Warn("stop forced, releasing unfinished messages")
		cancelWork()
		select {
		case <-done:
		case <-time.After(stopGrace):
			finished = false
		}
	case <-timer.C:
		p.log.Warn("shutdown timeout reached, releasing unfinished messages", "timeout", p.opt.ShutdownTimeout.String())
		cancelWork() // receives and target calls are cancelled; their messages are released
		select {
		case <-done:
		case <-time.After(stopGrace):
			finished = false
			p.log.Error("a batch did not return after its target call was cancelled; its messages are released and its verdicts will be refused")
		}
	}
	// A worker stuck in a target call that ignores its cancellation is left
	// to end with it; the others end now.
	pool.close(finished)
	p.mu.Lock()
	left := p.batches.drain()
	p.mu.Unlock()
	p.giveBack(left)
	released := p.set.close(time.Now().Add(settleMargin))
	if released > 0 {
		p.log.Info("released unfinished messages", "messages", released)
	}
	p.closeAll()
	p.log.Info("pipe stopped")
	return nil
}

// giveBack releases deliveries at once (Nak).
func (p *Pipe) giveBack(ds []*delivery) {
	if len(ds) == 0 {
		return
	}
	items := make([]settle, len(ds))
	for i, d := range ds {
		items[i] = settle{d: d, v: verbNak}
	}
	p.set.finalMany(items)
}

// closeAll releases what the source, enrichment and targets hold, once
// everything is settled.
func (p *Pipe) closeAll() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, c := range []any{p.opt.Source, p.opt.Enricher, p.opt.Target, p.opt.DeadLetter} {
		if cl, ok := c.(interface{ Close(context.Context) error }); ok && c != nil {
			if err := cl.Close(ctx); err != nil {
				p.log.Warn("closing a stage failed", "error", err)
			}
		}
	}
}

func (p *Pipe) openSource(ctx context.Context) (source.Info, error) {
	o, ok := p.opt.Source.(source.Opener)
	if !ok {
		return source.Info{ARN: "pipes:" + p.opt.Name}, nil
	}
	// A transient failure (an endpoint that cannot be reached) is tried
	// again soon; a permanent one (a missing queue, access denied) from 5 s.
	// Both back off to a minute between tries. The first failure, and one
	// that differs from the last, is an ERROR; the same one again a WARN.
	wait := backoff.Exponential{Base: 500 * time.Millisecond, Max: time.Minute}
	waitPermanent := backoff.Exponential{Base: 5 * time.Second, Max: time.Minute}
	start := time.Now()
	last := ""
	permanentAttempt := 0
	for attempt := 1; ; attempt++ {
		info, err := o.Open(ctx)
		if err == nil {
			p.mu.Lock()
			p.recvBackoff.err = nil
			p.mu.Unlock()
			return info, nil
		}
		delay := wait.Delay(attempt)
		if core.IsPermanent(err) {
			// A running pipe outlives a missing queue or a denied access
			// (the queue may be created, the role fixed): it backs off,
			// stays not ready, and says why.
			permanentAttempt++
			delay = waitPermanent.Delay(permanentAttempt)
		}
		if ctx.Err() != nil || p.opt.Drain && (core.IsPermanent(err) || time.Since(start)+delay > drainOpenTimeout) {
			// A drain is a job that ends: it says why it could not start.
			return source.Info{}, fmt.Errorf("opening the source: %w", err)
		}
		p.mu.Lock()
		p.recvBackoff.err = err
		p.mu.Unlock()
		if msg := err.Error(); msg != last {
			last = msg
			p.log.Error("opening the source failed, retrying", "error", err, "retry_in", delay.String())
		} else {
			p.log.Warn("opening the source still fails, retrying", "error", err, "attempt", attempt, "retry_in", delay.String())
		}
		if backoff.Sleep(ctx, delay) != nil {
			return source.Info{}, ctx.Err()
		}
	}
}

// adviseOnQueue logs the AWS recommendations the queue does not meet.
func (p *Pipe) adviseOnQueue(info source.Info) {
	switch {
	case info.OwnAdvice:
	case info.MaxReceiveCount == 0 && info.DeadLetterARN == "" && info.InProcess:
		p.exec.holdUntilFailure("the source queue has no redrive policy: failed messages are retried until they succeed; set one with a dead-letter queue")
	case info.MaxReceiveCount == 0 && info.DeadLetterARN == "":
		p.log.Warn("the source queue has no redrive policy: failed messages will be retried until they expire; set one with a dead-letter queue")
	case info.MaxReceiveCount > 0 && info.MaxReceiveCount < 5:
		p.log.Warn("the source queue's maxReceiveCount is below 5, the AWS recommendation: throttled retries may dead-letter messages early",
			"max_receive_count", info.MaxReceiveCount)
	}
	if t := p.opt.TargetTimeout; !info.OwnAdvice && !info.InProcess && t > 0 && info.VisibilityTimeout > 0 && info.VisibilityTimeout < 6*t {
		p.log.Warn("the visibility timeout is shorter than 6 × the target timeout (the AWS recommendation); the heartbeat extends it, but a crash would redeliver sooner",
			"visibility_timeout", info.VisibilityTimeout.String(), "target_timeout", t.String())
	}
}

// poolSize is the size of the worker pool at concurrency c: a receive and
// a batch for every slot, and one to spare.
func poolSize(c int) int { return 2*c + 1 }

// schedule runs the polling loop until poll is done or, with Drain, until
// the source is empty. Receives and batches run on pool under work, which
// outlives poll; the caller waits for them. Each round starts the batches
// and the receives there is room for, then waits for what may make more
// room: a signal (a receive or a batch returned), the scaler's tick, or
// whatever held a receive or a batch back.
func (p *Pipe) schedule(poll, recv, work context.Context, pool *workers) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		capAt := p.expireHeld(time.Now()) // before they would go again
		p.dispatch(work, pool)
		w, drained := p.poll(recv, pool, capAt)
		if drained {
			return
		}
		select {
		case <-poll.Done():
			return
		case <-p.wake:
		case <-w.budget:
		case <-w.errs:
		case <-w.rate:
		case <-w.probe:
		case <-w.held:
		case <-w.holdCap:
		case now := <-tick.C:
			p.rescale(now, pool)
		}
	}
}

// wakeups are what the polling loop waits for besides a signal and the
// scaler's tick: whatever held a receive or a held batch back (nil: not
// that).
type wakeups struct {
	budget  <-chan struct{}  // the budget has room again
	errs    <-chan time.Time // the receive backoff is over
	rate    <-chan time.Time // the rate limit has the tokens
	probe   <-chan time.Time // the next probe of an open circuit is due
	held    <-chan time.Time // a held batch is due
	holdCap <-chan time.Time // a held batch reaches its HoldLimiter's limit
}

// poll starts the receives there is room for and returns what to wait
// for next; drained: a drain is over.
func (p *Pipe) poll(recv context.Context, pool *workers, capAt time.Time) (w wakeups, drained bool) {
	p.mu.Lock()
	full := p.opt.DryRun && p.dry.filled()
	if full && p.opt.Drain {
		p.drained = true
	}
	drained = p.opt.Drain && p.drained
	if !drained {
		w = p.outageWakeupsLocked(time.Now(), capAt)
		p.startReceivesLocked(recv, pool, &w)
	}
	p.mu.Unlock()
	if full {
		p.log.Warn("the dry run keeps as many messages hidden as it may; polling pauses until the stop releases them", "held", dryRunHold)
	}
	return w, drained
}

// outageWakeupsLocked is when the next probe, the next held batch and the
// next HoldLimiter's limit (capAt, zero: none) are due. p.mu is held.
func (p *Pipe) outageWakeupsLocked(now, capAt time.Time) (w wakeups) {
	if d := p.circuit.probeWait(now); d > 0 {
		w.probe = time.After(d)
	} // else a probe's receive is under way: its return wakes the loop
	if !p.circuit.open && p.held.count() > 0 {
		if _, next := p.held.due(now); !next.IsZero() {
			w.held = time.After(next.Sub(now))
		}
	}
	if !capAt.IsZero() {
		w.holdCap = time.After(capAt.Sub(now))
	}
	return w
}

// startReceivesLocked starts receives while the pollers and the room let
// it, and the receive backoff, the rate limit and the budget do not hold
// them back; it notes in w what held the next one back. p.mu is held.
func (p *Pipe) startReceivesLocked(recv context.Context, pool *workers, w *wakeups) {
	for p.sched.canReceive() {
		room := p.roomLocked()
		if room <= 0 {
			return
		}
		now := time.Now()
		if d := p.recvBackoff.wait(now); d > 0 {
			w.errs = time.After(d)
			return
		}
		n := min(maxReceive, room)
		n, wait := p.rate.take(now, n, p.rate.need(n))
		if n == 0 {
			w.rate = time.After(wait)
			return
		}
		est, ok := p.reserveLocked(n, w)
		if !ok {
			p.rate.giveBack(now, n) // not received: not spent
			return
		}
		p.sched.startReceive(n)
		pool.run(func() { p.receive(recv, n, est) })
	}
}

// reserveLocked reserves the budget of a receive of n messages, and
// returns the bytes reserved; when the budget is full, false, and w says
// when it has room. The first receive goes alone: it tells how large
// messages are. p.mu is held.
func (p *Pipe) reserveLocked(n int, w *wakeups) (int64, bool) {
	if p.opt.Budget.Limit() <= 0 {
		return 0, true
	}
	if !p.sizes.known() && p.sched.receiving > 0 {
		return 0, false // its return signals
	}
	est := p.sizes.reserve(n)
	ok, ch := p.opt.Budget.Reserve(est)
	if !ok {
		w.budget = ch
	}
	return est, ok
}

// rescale applies the scaling controller's tick at now.
func (p *Pipe) rescale(now time.Time, pool *workers) {
	p.mu.Lock()
	c, reason := p.ctl.tick(now)
	before := p.sched.conc
	p.sched.conc = c
	p.mu.Unlock()
	if reason == "" {
		return
	}
	pool.setLimit(poolSize(c))
	p.followConcurrency(c)
	p.met.concurrency.Set(float64(c))
	p.observeScaled(before, c, reason)
	p.log.Info("concurrency changed", "from", before, "to", c, "reason", reason)
}

// roomLocked is how many more messages may be received now: those that can
// start in a free batch slot, less the outage messages held. Nothing is
// received that would wait for a slot, nor past a dry run's hold; while
// the circuit is open, only a probe batch's worth when a probe is due and
// nothing held or waiting can be the probe (a Deferrer's source holds
// nothing: its probe is a fresh batch).
func (p *Pipe) roomLocked() int {
	if p.stopping || p.paused {
		return 0
	}
	if c := &p.circuit; c.open {
		if !c.probeDue(time.Now()) || p.held.count() > 0 && !c.freshProbe || p.batches.pending() > 0 {
			return 0
		}
		return p.sched.probeRoom()
	}
	room := p.sched.room(p.batches.pending(), p.held.n)
	if p.opt.DryRun {
		room = min(room, dryRunHold-p.set.tracked()-p.sched.reserved)
	}
	return room
}

// receive takes up to n messages from the source (reservedBytes of
// budget reserved for them), tracks them in the settler and hands them to
// the batcher; a failure pauses the receives (recvBackoff).
func (p *Pipe) receive(ctx context.Context, n int, reservedBytes int64) {
	// The visibility timeout runs from the request, not from the answer.
	now := time.Now()
	msgs, err := p.opt.Source.Receive(ctx, n)
	ds, got := p.track(msgs, now)
	p.mu.Lock()
	defer p.signal()
	defer p.mu.Unlock()
	p.sched.receiveDone(n)
	p.rate.giveBack(time.Now(), n-len(msgs)) // what was not received is not spent
	p.opt.Budget.Settle(reservedBytes, int64(got))
	if err != nil {
		p.receiveFailedLocked(ctx, now, err)
		return
	}
	p.recvBackoff.succeeded()
	if p.stopping && len(ds) > 0 {
		// Received after the pipe was told to stop: give them back.
		p.mu.Unlock()
		p.giveBack(ds)
		p.mu.Lock()
		return
	}
	p.ctl.received(len(msgs), n)
	p.sched.received(len(msgs), n)
	if len(msgs) == 0 {
		p.receivedNothingLocked(ctx)
		return
	}
	p.batchLocked(ds, now, got)
}

// track has the settler track msgs, received at now, and returns their
// deliveries and their size in all.
func (p *Pipe) track(msgs []*source.Message, now time.Time) ([]*delivery, int) {
	got := 0
	ds := make([]*delivery, len(msgs))
	for i, m := range msgs {
		source.Unwrap(m, p.opt.Unwrap) // before the lock: it decodes JSON
		ds[i] = p.set.track(m, now)
		got += ds[i].size
	}
	p.met.inflight.Add(float64(len(msgs)))
	p.met.inflightBytes.Add(float64(got))
	return ds, got
}

// receiveFailedLocked notes a receive that started at start and failed
// with err, unless the stop cut it (ctx done). p.mu is held; it is let go
// while logging.
func (p *Pipe) receiveFailedLocked(ctx context.Context, start time.Time, err error) {
	if ctx.Err() != nil {
		return
	}
	d := p.recvBackoff.failed(start, time.Now(), err).Round(time.Millisecond)
	p.mu.Unlock()
	p.log.Error("receiving from the source failed", "error", err, "retry_in", d.String())
	p.mu.Lock()
}

// receivedNothingLocked notes an empty receive; with Drain, the pipe is
// drained when nothing is under way and the source says it is empty.
// p.mu is held; it is let go while asking the source.
func (p *Pipe) receivedNothingLocked(ctx context.Context) {
	p.met.emptyReceives.Inc()
	p.circuit.freshProbe = false // nothing fresh to probe with: a held batch is the probe
	if !p.opt.Drain || !p.quietLocked() {
		return
	}
	p.mu.Unlock()
	empty := p.opt.DryRun || p.sourceEmpty(ctx)
	p.mu.Lock()
	if empty && p.quietLocked() {
		p.drained = true
	}
}

// quietLocked reports whether nothing is under way, waiting or held.
// p.mu is held.
func (p *Pipe) quietLocked() bool {
	return p.sched.idle(p.batches.pending()) && p.held.n == 0
}

// batchLocked hands the deliveries of a receive at now (got bytes in
// all) to the batcher. p.mu is held.
func (p *Pipe) batchLocked(ds []*delivery, now time.Time, got int) {
	p.met.received.Add(float64(len(ds)))
	p.observeReceived(ds)
	for _, d := range ds {
		if ts, err := strconv.ParseInt(d.Message.Attributes[source.AttrSentTimestamp], 10, 64); err == nil {
			p.met.messageAge.Observe(now.Sub(time.UnixMilli(ts)).Seconds())
		}
		if started, gen := p.batches.add(d); started && p.opt.BatchWindow > 0 {
			time.AfterFunc(p.opt.BatchWindow, func() {
				p.mu.Lock()
				p.batches.closeOpenIf(gen)
				p.mu.Unlock()
				p.signal()
			})
		}
	}
	p.sizes.add(len(ds), got)
	if p.opt.BatchWindow <= 0 {
		p.batches.closeOpen()
	}
}

// sourceEmpty asks the source, when it can tell, whether messages are left
// (visible or in flight elsewhere, e.g. waiting out a visibility timeout).
func (p *Pipe) sourceEmpty(ctx context.Context) bool {
	c, ok := p.opt.Source.(interface {
		Pending(ctx context.Context) (int, error)
	})
	if !ok {
		return true
	}
	n, err := c.Pending(ctx)
	return err == nil && n == 0
}

// dispatch starts batches while slots are free: held outage batches first
// as they come due, then new ones. While the circuit is open it starts one
// probe batch when the probe is due: a held batch, else a new one.
func (p *Pipe) dispatch(ctx context.Context, pool *workers) {
	for {
		p.mu.Lock()
		if !p.sched.slotFree() {
			p.mu.Unlock()
			return
		}
		var b []*delivery
		var held *heldBatch
		probe := p.circuit.open && !p.stopping
		if probe {
			if b, held = p.probeBatchLocked(); b != nil {
				p.circuit.probing = true
			}
		} else {
			b, held = p.nextBatchLocked()
		}
		if b == nil {
			p.mu.Unlock()
			return
		}
		p.sched.inflight++
		p.mu.Unlock()
		pool.run(func() { p.runBatch(ctx, b, probe, held) })
	}
}

// nextBatchLocked is the batch to start next: a held batch that is due,
// else a new one; nil when none. p.mu is held.
func (p *Pipe) nextBatchLocked() ([]*delivery, *heldBatch) {
	if i, _ := p.held.due(time.Now()); i >= 0 {
		h := p.held.take(i)
		return h.ds, &h
	}
	return p.batches.next(), nil
}

// probeBatchLocked is the probe of an open circuit when one is due: a
// held batch, else a new one — after a held probe failed, a fresh one
// when one comes; nil when none. p.mu is held.
func (p *Pipe) probeBatchLocked() ([]*delivery, *heldBatch) {
	c := &p.circuit
	if !c.probeDue(time.Now()) {
		return nil, nil
	}
	var b []*delivery
	if c.freshProbe {
		if p.batches.pending() == 0 {
			return nil, nil // its receive is under way, or comes back empty
		}
		b = p.batches.next() // nil when its groups are held (FIFO)
	}
	if b == nil && p.held.count() > 0 {
		h := p.held.take(0)
		return h.ds, &h
	}
	if b == nil {
		b = p.batches.next()
	}
	return b, nil
}
