package pipe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/pipesproject/pipes/internal/backoff"
	"github.com/pipesproject/pipes/internal/budget"
	"github.com/pipesproject/pipes/internal/core"
)

// Limits fixed by Pipes and SQS.
const (
	// MaxBatchBytes is the payload above which a batch is handed on early
	// (the 6 MB synchronous invocation quota).
	MaxBatchBytes = 6 << 20
	// MaxReceive is the most messages one ReceiveMessage returns.
	MaxReceive = 10
	// MaxVisibility is SQS's 12-hour ceiling on a message's invisibility,
	// counted from its receive.
	MaxVisibility = 12 * time.Hour
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
	// dryRunHold caps the messages a dry run keeps hidden: polling pauses
	// there, so watching a live queue never grows memory without bound.
	dryRunHold = 10000
	// Circuit breaker: after breakerTrips batches in a row fail whole with
	// retryable errors (connection refused, timeouts, 5xx, 429), polling
	// stops and one probe batch at a time goes to the target, at growing
	// intervals; only a probe that the target answers closes it again.
	// Outage batches are never a verdict, open or not (outage.go).
	breakerTrips    = 3
	breakerProbeMin = time.Second
	breakerProbeMax = time.Minute
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
	if limit <= 0 || limit > MaxVisibility-time.Minute {
		limit = MaxVisibility - time.Minute
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
	Source Source
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
// start it with Run. The pipe keeps the scheduling state only: batches are
// formed by its batcher and every message is settled by its settler.
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

	mu          sync.Mutex
	info        SourceInfo
	visibility  time.Duration
	set         *settler
	batches     batcher
	ctl         *controller
	conc        int
	inflight    int // batches at the target
	reserved    int // messages asked for by receives under way
	receiving   int // receives under way
	pollers     int // receives that may be under way: grows on full receives, shrinks on empty ones
	errUntil    time.Time
	errAt       time.Time // when the last counted receive error came back
	lastErr     error
	errCount    int     // receive rounds that failed in a row
	tokens      float64 // rate limit bucket
	tokensAt    time.Time
	avgSize     float64 // running mean of message sizes, for budget reservations
	sizeSamples int
	dryHeld     int // dry run: messages kept hidden until the stop
	started     bool
	stopping    bool
	paused      bool // Pause: no receive starts (control.go)
	drained     bool
	circuit     breaker
}

// breaker is the pipe's circuit breaker on target outages, and the
// outage batches the pipe holds.
type breaker struct {
	streak  int // batches in a row that failed whole with retryable errors
	open    bool
	probing bool // a probe batch is at the target
	// freshProbe: a held batch was the last probe and failed; the next is
	// a fresh batch when the source has one, so that a held batch that
	// fails on its own (a poison batch) does not keep the circuit open
	// and polling paused while the target works for other messages.
	freshProbe bool
	every      time.Duration
	probeAt    time.Time
	held       []heldBatch // outage batches held, invisible, to go again
	heldN      int         // messages in held
	err        error
	// answeredStart is when the latest-started batch the target answered
	// started: a batch that failed whole before it is in a target that
	// works (bisect.go).
	answeredStart time.Time
	// convicted are messages found to fail whole on their own while the
	// target worked (bisect.go), bounded.
	convicted convictions
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
	return p.started && !p.stopping && p.errCount < 3 && !p.circuit.open
}

// LastError is why the pipe is not ready: the source's last error while it
// keeps failing, or the target's while the circuit is open; nil when both
// work.
func (p *Pipe) LastError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lastErr == nil && p.circuit.open {
		return fmt.Errorf("target failing, polling paused (circuit open, next probe in %s): %w",
			time.Until(p.circuit.probeAt).Round(time.Second), p.circuit.err)
	}
	return p.lastErr
}

// Concurrency is the number of batches the pipe may have in flight now.
func (p *Pipe) Concurrency() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conc
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
	p.conc = p.ctl.cur
	p.batches = newBatcher(info.FIFO, p.opt.BatchSize)
	p.set = newSettler(p.settlerConfig(), min(64, max(8, p.opt.MaxConcurrency)))
	p.started = true
	p.mu.Unlock()
	p.met.concurrency.Set(float64(p.conc))
	p.followConcurrency(p.conc)
	p.adviseOnQueue(info)
	p.log.Info("pipe started", "source", info.ARN, "fifo", info.FIFO, "visibility_timeout", p.visibility.String(),
		"batch_size", p.opt.BatchSize, "batch_window", p.opt.BatchWindow.String(), "concurrency", p.conc,
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
	pool := newWorkers(poolSize(p.conc))
	p.schedule(ctx, recv, work, pool)
	if _, ok := p.opt.Source.(CancelSafe); ok {
		cancelRecv()
	}

	// Polling has stopped: hand on what was received, let batches finish.
	deadline := time.Now().Add(p.opt.ShutdownTimeout)
	p.mu.Lock()
	p.stopping = true
	p.batches.closeOpen()
	held := p.releaseHeldLocked()
	if p.circuit.open {
		// The target is down: what waits for a batch is given back now
		// rather than sent to fail.
		held = append(held, p.batches.drain()...)
	}
	polls, inflight := p.receiving, p.inflight
	p.mu.Unlock()
	p.giveBack(held)
	if _, safe := p.opt.Source.(CancelSafe); polls > 0 && !safe {
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
			left := p.inflight + p.batches.pending() + p.receiving
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
		if cl, ok := c.(Closer); ok && c != nil {
			if err := cl.Close(ctx); err != nil {
				p.log.Warn("closing a stage failed", "error", err)
			}
		}
	}
}

func (p *Pipe) openSource(ctx context.Context) (SourceInfo, error) {
	o, ok := p.opt.Source.(Opener)
	if !ok {
		return SourceInfo{ARN: "pipes:" + p.opt.Name}, nil
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
			p.lastErr = nil
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
			return SourceInfo{}, fmt.Errorf("opening the source: %w", err)
		}
		p.mu.Lock()
		p.lastErr = err
		p.mu.Unlock()
		if msg := err.Error(); msg != last {
			last = msg
			p.log.Error("opening the source failed, retrying", "error", err, "retry_in", delay.String())
		} else {
			p.log.Warn("opening the source still fails, retrying", "error", err, "attempt", attempt, "retry_in", delay.String())
		}
		if backoff.Sleep(ctx, delay) != nil {
			return SourceInfo{}, ctx.Err()
		}
	}
}

// adviseOnQueue logs the AWS recommendations the queue does not meet.
func (p *Pipe) adviseOnQueue(info SourceInfo) {
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
// outlives poll; the caller waits for them.
func (p *Pipe) schedule(poll, recv, work context.Context, pool *workers) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	dryFull := false
	for {
		capAt := p.expireHeld(time.Now()) // before they would go again
		p.dispatch(work, pool)
		var budgetWait <-chan struct{}
		var errWait, rateWait, probeWait, heldWait, capWait <-chan time.Time
		p.mu.Lock()
		if p.opt.DryRun && p.dryHeld >= dryRunHold && !dryFull {
			dryFull = true
			if p.opt.Drain {
				p.drained = true
			}
			p.mu.Unlock()
			p.log.Warn("the dry run keeps as many messages hidden as it may; polling pauses until the stop releases them", "held", dryRunHold)
			p.mu.Lock()
		}
		if p.opt.Drain && p.drained {
			p.mu.Unlock()
			return
		}
		if p.circuit.open && !p.circuit.probing {
			if d := time.Until(p.circuit.probeAt); d > 0 {
				probeWait = time.After(d)
			} // else a probe's receive is under way: its return wakes the loop
		}
		if !p.circuit.open && len(p.circuit.held) > 0 {
			if _, next := p.dueHeldLocked(time.Now()); !next.IsZero() {
				heldWait = time.After(time.Until(next))
			}
		}
		if !capAt.IsZero() {
			capWait = time.After(time.Until(capAt))
		}
		for {
			want := p.pollersLocked()
			room := p.roomLocked()
			if p.receiving >= want || room <= 0 {
				break
			}
			if d := time.Until(p.errUntil); d > 0 {
				errWait = time.After(d)
				break
			}
			n := min(MaxReceive, room)
			if p.opt.RateLimit > 0 {
				// Receive a full call's worth at a time (up to a second of
				// tokens), pacing the calls rather than shrinking them: a
				// receive of one message costs as much as one of ten.
				need := min(n, max(1, int(p.opt.RateLimit)))
				avail := p.takeTokensLocked(n, need)
				if avail < need {
					rateWait = time.After(time.Duration((float64(need) - p.tokens) / p.opt.RateLimit * float64(time.Second)))
					break
				}
				n = avail
			}
			var est int64
			if p.opt.Budget.Limit() > 0 {
				ok, ch := p.sizeSamples > 0 || p.receiving == 0, (<-chan struct{})(nil)
				if ok { // else the first receive tells how large messages are
					est = int64(n) * max(int64(p.avgSize), 256)
					ok, ch = p.opt.Budget.Reserve(est)
				}
				if !ok {
					budgetWait = ch
					if p.opt.RateLimit > 0 {
						p.tokens += float64(n) // not received: not spent
					}
					break
				}
			}
			p.receiving++
			p.reserved += n
			pool.run(func() { p.receive(recv, n, est) })
		}
		p.mu.Unlock()
		select {
		case <-poll.Done():
			return
		case <-p.wake:
		case <-budgetWait:
		case <-errWait:
		case <-rateWait:
		case <-probeWait:
		case <-heldWait:
		case <-capWait:
		case now := <-tick.C:
			p.mu.Lock()
			c, reason := p.ctl.tick(now)
			before := p.conc
			p.conc = c
			p.mu.Unlock()
			if reason != "" {
				pool.setLimit(poolSize(c))
				p.followConcurrency(c)
				p.met.concurrency.Set(float64(c))
				p.observeScaled(before, c, reason)
				p.log.Info("concurrency changed", "from", before, "to", c, "reason", reason)
			}
		}
	}
}

// takeTokensLocked takes up to n whole tokens from the rate limit bucket
// when at least need are there, and returns how many it took (0 when fewer
// than need are there).
func (p *Pipe) takeTokensLocked(n, need int) int {
	now := time.Now()
	burst := max(p.opt.RateLimit, MaxReceive)
	if p.tokensAt.IsZero() {
		p.tokens = burst
	} else {
		p.tokens = min(burst, p.tokens+now.Sub(p.tokensAt).Seconds()*p.opt.RateLimit)
	}
	p.tokensAt = now
	took := min(n, int(p.tokens))
	if took < need {
		return 0
	}
	p.tokens -= float64(took)
	return took
}

// pollersLocked is how many receives may be under way. It starts at one
// and doubles with every full receive (a backlog), up to one per free batch
// slot; a receive that comes back short keeps it, an empty one halves it.
// So an idle pipe long-polls with a single receive (3 calls a minute) and
// one message arriving does not wake a hundred pollers.
func (p *Pipe) pollersLocked() int {
	return max(1, min(p.pollers, p.conc))
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
		if c.probing || len(c.held) > 0 && !c.freshProbe || p.batches.pending() > 0 || time.Now().Before(c.probeAt) {
			return 0
		}
		return p.opt.BatchSize - p.reserved
	}
	room := (p.conc-p.inflight)*p.opt.BatchSize - p.batches.pending() - p.reserved - p.circuit.heldN
	if p.opt.DryRun {
		room = min(room, dryRunHold-p.set.tracked()-p.reserved)
	}
	return room
}

func (p *Pipe) receive(ctx context.Context, n int, reservedBytes int64) {
	// The visibility timeout runs from the request, not from the answer.
	now := time.Now()
	msgs, err := p.opt.Source.Receive(ctx, n)
	got := 0
	ds := make([]*delivery, len(msgs))
	for i, m := range msgs {
		unwrap(m, p.opt.Unwrap) // before the lock: it decodes JSON
		ds[i] = p.set.track(m, now)
		got += ds[i].size
	}
	p.met.inflight.Add(float64(len(msgs)))
	p.met.inflightBytes.Add(float64(got))
	p.mu.Lock()
	defer p.signal()
	defer p.mu.Unlock()
	p.receiving--
	p.reserved -= n
	if p.opt.RateLimit > 0 {
		p.tokens += float64(n - len(msgs)) // what was not received is not spent
	}
	p.opt.Budget.Settle(reservedBytes, int64(got))
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		p.lastErr = err
		// Receives under way together fail together (a lost connection):
		// one that started before the last counted failure came back is
		// of the same round, and does not grow the backoff again — else
		// five pollers turn a short outage into a 20 s stall.
		if !now.Before(p.errAt) {
			p.errCount++
			p.errAt = time.Now()
			d := backoff.Exponential{Base: 200 * time.Millisecond, Max: 20 * time.Second, Jitter: backoff.Equal}.Delay(p.errCount)
			p.errUntil = now.Add(d)
		}
		d := max(time.Until(p.errUntil), 0).Round(time.Millisecond)
		p.mu.Unlock()
		p.log.Error("receiving from the source failed", "error", err, "retry_in", d.String())
		p.mu.Lock()
		return
	}
	p.errCount = 0
	p.lastErr = nil
	if p.stopping && len(ds) > 0 {
		// Received after the pipe was told to stop: give them back.
		p.mu.Unlock()
		p.giveBack(ds)
		p.mu.Lock()
		return
	}
	p.ctl.received(len(msgs), n)
	switch {
	case len(msgs) == 0:
		p.pollers = max(1, p.pollers/2)
	case len(msgs) >= n:
		p.pollers = min(max(1, p.pollers)*2, p.conc)
	}
	if len(msgs) == 0 {
		p.met.emptyReceives.Inc()
		p.circuit.freshProbe = false // nothing fresh to probe with: a held batch is the probe
		if p.opt.Drain && p.inflight == 0 && p.batches.pending() == 0 && p.receiving == 0 && p.circuit.heldN == 0 {
			p.mu.Unlock()
			empty := p.opt.DryRun || p.sourceEmpty(ctx)
			p.mu.Lock()
			if empty && p.inflight == 0 && p.batches.pending() == 0 && p.receiving == 0 && p.circuit.heldN == 0 {
				p.drained = true
			}
		}
		return
	}
	p.met.received.Add(float64(len(msgs)))
	p.observeReceived(ds)
	for _, d := range ds {
		if ts, err := strconv.ParseInt(d.Message.Attributes[AttrSentTimestamp], 10, 64); err == nil {
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
	p.sizeSamples++
	avg := float64(got) / float64(len(msgs))
	if p.sizeSamples == 1 {
		p.avgSize = avg
	} else {
		p.avgSize = 0.8*p.avgSize + 0.2*avg
	}
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
		if p.inflight >= p.conc {
			p.mu.Unlock()
			return
		}
		var b []*delivery
		var held *heldBatch
		probe := false
		switch {
		case p.circuit.open && !p.stopping:
			if p.circuit.probing || time.Now().Before(p.circuit.probeAt) {
				p.mu.Unlock()
				return
			}
			if p.circuit.freshProbe { // after a held probe failed: a fresh one, when one comes
				if p.batches.pending() == 0 {
					p.mu.Unlock()
					return // its receive is under way, or comes back empty
				}
				b = p.batches.next() // nil when its groups are held (FIFO)
			}
			if b == nil && len(p.circuit.held) > 0 {
				h := p.takeHeldLocked(0)
				b, held = h.ds, &h
			} else if b == nil {
				b = p.batches.next()
			}
			probe = b != nil
			p.circuit.probing = probe
		default:
			if i, _ := p.dueHeldLocked(time.Now()); i >= 0 {
				h := p.takeHeldLocked(i)
				b, held = h.ds, &h
			} else {
				b = p.batches.next()
			}
		}
		if b == nil {
			p.mu.Unlock()
			return
		}
		p.inflight++
		p.mu.Unlock()
		pool.run(func() { p.runBatch(ctx, b, probe, held) })
	}
}

// releaseHeldLocked takes the outage batches the pipe holds.
func (p *Pipe) releaseHeldLocked() []*delivery {
	var out []*delivery
	for _, h := range p.circuit.held {
		out = append(out, h.ds...)
		out = append(out, h.rest...)
	}
	p.circuit.held, p.circuit.heldN = nil, 0
	return out
}
