package pipe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/sourcegraph/conc"
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
	// deleteLinger is how long a partial delete batch waits for company.
	deleteLinger = 20 * time.Millisecond
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

// Delay is the visibility to give an item received receiveCount times.
func (b Backoff) Delay(receiveCount int) time.Duration {
	d := float64(b.Base)
	for i := 1; i < receiveCount && d < float64(b.Max); i++ {
		d *= max(b.Factor, 1)
	}
	limit := b.Max
	if limit <= 0 || limit > MaxVisibility-time.Minute {
		limit = MaxVisibility - time.Minute
	}
	d = min(d, float64(limit))
	if b.Jitter && d > 0 {
		d = rand.Float64() * d
	}
	return time.Duration(d).Round(time.Second)
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
	Budget *Budget
	// Metrics receives the pipe's series (nil: a private, unregistered set).
	Metrics *Metrics
	// Logger receives the pipe's logs (nil: discard).
	Logger *slog.Logger
	// LogLevel is Pipes' execution log level: off, error, info or trace.
	LogLevel string
	// IncludeExecutionData adds payloads to trace logs.
	IncludeExecutionData bool
}

// Pipe moves messages from a source to a target. Create it with New and
// start it with Run.
type Pipe struct {
	opt  Options
	log  *slog.Logger
	exec execLog
	met  *pipeMetrics
	wake chan struct{}

	mu          sync.Mutex
	info        SourceInfo
	visibility  time.Duration
	ctl         *controller
	conc        int
	inflight    int // batches at the target
	pending     int // messages received and not yet in a running batch
	reserved    int // messages asked for by receives under way
	receiving   int // receives under way
	pollers     int // receives that may be under way: grows on full receives, shrinks on empty ones
	open        []*item
	openBytes   int
	openTimer   *time.Timer
	openSeq     uint64
	ready       [][]*item
	groups      map[string]*groupQueue // FIFO: pending messages by group
	groupOrder  []string
	busy        map[string]bool // FIFO: groups with a batch in flight
	tracked     map[*item]struct{}
	errUntil    time.Time
	lastErr     error
	tokens      float64 // rate limit bucket
	tokensAt    time.Time
	avgSize     float64 // running mean of message sizes, for budget reservations
	sizeSamples int
	errCount    int
	stopping    bool
	ready2      bool
	drained     bool
}

type item struct {
	msg          *Message
	size         int
	receivedAt   time.Time
	visibleUntil time.Time
}

type groupQueue struct{ items []*item }

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
	return &Pipe{
		opt:     opt,
		log:     log,
		exec:    newExecLog(log, opt.LogLevel, opt.IncludeExecutionData),
		met:     opt.Metrics.forPipe(opt.Name),
		wake:    make(chan struct{}, 1),
		groups:  map[string]*groupQueue{},
		busy:    map[string]bool{},
		tracked: map[*item]struct{}{},
	}, nil
}

// Name is the pipe's name.
func (p *Pipe) Name() string { return p.opt.Name }

// Ready reports whether the pipe has opened its source and is polling.
// It is false too while the source keeps failing (three receives in a
// row); LastError says why.
func (p *Pipe) Ready() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ready2 && !p.stopping && p.errCount < 3
}

// LastError is the source's last error while it keeps failing, nil when it
// works.
func (p *Pipe) LastError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
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
// in-flight batches finish within ShutdownTimeout, releases (visibility 0)
// what did not finish, flushes deletes and returns. It returns nil on a
// clean stop and an error only when the source cannot be opened for good.
// Run must be called once.
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
		p.visibility = 30 * time.Second
	}
	p.ctl = newController(p.opt.InitialConcurrency, p.opt.MaxConcurrency, p.opt.ScaleUpPerMinute, now)
	p.conc = p.ctl.cur
	p.ready2 = true
	p.mu.Unlock()
	p.met.concurrency.Set(float64(p.conc))
	p.adviseOnQueue(info)
	p.log.Info("pipe started", "source", info.ARN, "fifo", info.FIFO, "visibility_timeout", p.visibility.String(),
		"batch_size", p.opt.BatchSize, "batch_window", p.opt.BatchWindow.String(), "concurrency", p.conc,
		"max_concurrency", p.opt.MaxConcurrency)

	// work outlives ctx by up to ShutdownTimeout: in-flight batches, deletes
	// and heartbeats go on after polling stops.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	poll, stopPoll := context.WithCancel(ctx)
	defer stopPoll()

	del := newDeleter(p)
	hb, stopHeartbeat := context.WithCancel(work)
	defer stopHeartbeat()
	var bg conc.WaitGroup
	bg.Go(func() { del.run(work) })
	bg.Go(func() { p.heartbeat(hb) })
	var batches, receives conc.WaitGroup
	p.schedule(poll, work, &batches, &receives, del)

	// Polling has stopped: hand on what was received, let batches finish.
	p.mu.Lock()
	p.stopping = true
	p.closeOpenLocked()
	p.mu.Unlock()
	p.dispatch(work, &batches, del)
	done := make(chan struct{})
	go func() {
		// Wait for batches, new ones dispatched as slots free, and for the
		// receives under way: they are not cut short, since a long poll
		// abandoned on the client may still take messages on the server;
		// what they return now is released at once.
		for {
			p.mu.Lock()
			left := p.inflight + p.pending + p.receiving
			p.mu.Unlock()
			if left == 0 {
				break
			}
			select {
			case <-p.wake:
				p.dispatch(work, &batches, del)
			case <-time.After(50 * time.Millisecond):
				p.dispatch(work, &batches, del)
			case <-work.Done():
			}
			if work.Err() != nil {
				break
			}
		}
		batches.Wait()
		receives.Wait()
		close(done)
	}()
	timer := time.NewTimer(p.opt.ShutdownTimeout)
	select {
	case <-done:
		timer.Stop()
	case <-timer.C:
		p.log.Warn("shutdown timeout reached, releasing unfinished messages", "timeout", p.opt.ShutdownTimeout.String())
		cancelWork() // batches see their target calls cancelled and release their items
		<-done
	}
	stopHeartbeat()
	del.close()
	bg.Wait()
	p.releaseRemaining()
	p.closeAll()
	p.log.Info("pipe stopped")
	return nil
}

// closeAll releases what the source, enrichment and targets hold, once
// everything is settled.
func (p *Pipe) closeAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
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
	delay := 500 * time.Millisecond
	for {
		info, err := o.Open(ctx)
		if err == nil {
			p.mu.Lock()
			p.lastErr = nil
			p.mu.Unlock()
			return info, nil
		}
		if ctx.Err() != nil || p.opt.Drain && IsPermanent(err) {
			return SourceInfo{}, fmt.Errorf("opening the source of pipe %s: %w", p.opt.Name, err)
		}
		// A running pipe outlives a missing queue or a denied access (the
		// queue may be created, the role fixed): it backs off, stays not
		// ready, and says why.
		if IsPermanent(err) {
			delay = max(delay, 5*time.Second)
		}
		p.mu.Lock()
		p.lastErr = err
		p.mu.Unlock()
		p.log.Error("opening the source failed, retrying", "error", err, "retry_in", delay.String())
		select {
		case <-ctx.Done():
			return SourceInfo{}, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Minute)
	}
}

// adviseOnQueue logs the AWS recommendations the queue does not meet.
func (p *Pipe) adviseOnQueue(info SourceInfo) {
	if info.MaxReceiveCount == 0 && info.DeadLetterARN == "" {
		p.log.Warn("the source queue has no redrive policy: failed messages will be retried until they expire; set one with a dead-letter queue")
	} else if info.MaxReceiveCount > 0 && info.MaxReceiveCount < 5 {
		p.log.Warn("the source queue's maxReceiveCount is below 5, the AWS recommendation: throttled retries may dead-letter messages early",
			"max_receive_count", info.MaxReceiveCount)
	}
	if t := p.opt.TargetTimeout; t > 0 && info.VisibilityTimeout > 0 && info.VisibilityTimeout < 6*t {
		p.log.Warn("the visibility timeout is shorter than 6 × the target timeout (the AWS recommendation); the heartbeat extends it, but a crash would redeliver sooner",
			"visibility_timeout", info.VisibilityTimeout.String(), "target_timeout", t.String())
	}
}

// schedule runs the polling loop until poll is done or, with Drain, until
// the source is empty. Receives and batches run under work, which outlives
// poll; the caller waits for them.
func (p *Pipe) schedule(poll, work context.Context, batches, receives *conc.WaitGroup, del *deleter) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		p.dispatch(work, batches, del)
		var budgetWait <-chan struct{}
		var errWait, rateWait <-chan time.Time
		p.mu.Lock()
		if p.opt.Drain && p.drained {
			p.mu.Unlock()
			return
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
				avail := p.takeTokensLocked(n)
				if avail < 1 {
					rateWait = time.After(time.Duration((1 - p.tokens) / p.opt.RateLimit * float64(time.Second)))
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
			receives.Go(func() { p.receive(work, n, est) })
		}
		p.mu.Unlock()
		select {
		case <-poll.Done():
			return
		case <-p.wake:
		case <-budgetWait:
		case <-errWait:
		case <-rateWait:
		case now := <-tick.C:
			p.mu.Lock()
			c, reason := p.ctl.tick(now)
			before := p.conc
			p.conc = c
			p.mu.Unlock()
			if reason != "" {
				p.met.concurrency.Set(float64(c))
				p.log.Info("concurrency changed", "from", before, "to", c, "reason", reason)
			}
		}
	}
}

// takeTokensLocked takes up to n whole tokens from the rate limit bucket
// and returns how many it took.
func (p *Pipe) takeTokensLocked(n int) int {
	now := time.Now()
	burst := max(p.opt.RateLimit, MaxReceive)
	if p.tokensAt.IsZero() {
		p.tokens = burst
	} else {
		p.tokens = min(burst, p.tokens+now.Sub(p.tokensAt).Seconds()*p.opt.RateLimit)
	}
	p.tokensAt = now
	took := min(n, int(p.tokens))
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
// start in a free batch slot. Nothing is received that would wait for a slot.
func (p *Pipe) roomLocked() int {
	if p.stopping {
		return 0
	}
	return (p.conc-p.inflight)*p.opt.BatchSize - p.pending - p.reserved
}

func (p *Pipe) receive(ctx context.Context, n int, reservedBytes int64) {
	// The visibility timeout runs from the request, not from the answer.
	now := time.Now()
	msgs, err := p.opt.Source.Receive(ctx, n)
	for _, m := range msgs {
		unwrap(m, p.opt.Unwrap) // before the lock: it decodes JSON
	}
	p.mu.Lock()
	defer p.signal()
	defer p.mu.Unlock()
	p.receiving--
	p.reserved -= n
	if p.opt.RateLimit > 0 {
		p.tokens += float64(n - len(msgs)) // what was not received is not spent
	}
	got := 0
	for _, m := range msgs {
		got += m.Size()
	}
	p.opt.Budget.Settle(reservedBytes, int64(got))
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		p.errCount++
		p.lastErr = err
		d := min(time.Duration(1<<min(p.errCount, 8))*100*time.Millisecond, 20*time.Second)
		d = d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
		p.errUntil = now.Add(d)
		p.mu.Unlock()
		p.log.Error("receiving from the source failed", "error", err, "retry_in", d.String())
		p.mu.Lock()
		return
	}
	p.errCount = 0
	p.lastErr = nil
	if p.stopping && len(msgs) > 0 {
		// Received after the pipe was told to stop: give them back.
		p.mu.Unlock()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		if err := p.opt.Source.ChangeVisibility(rctx, msgs, 0); err != nil {
			p.log.Error("releasing messages received while stopping failed; they come back after their visibility timeout", "error", err)
		}
		cancel()
		p.met.released.Add(float64(len(msgs)))
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
		if p.opt.Drain && p.inflight == 0 && p.pending == 0 && p.receiving == 0 {
			p.mu.Unlock()
			empty := p.opt.DryRun || p.sourceEmpty(ctx)
			p.mu.Lock()
			if empty && p.inflight == 0 && p.pending == 0 && p.receiving == 0 {
				p.drained = true
			}
		}
		return
	}
	p.met.received.Add(float64(len(msgs)))
	var bytes int
	for _, m := range msgs {
		it := &item{msg: m, size: m.Size(), receivedAt: now, visibleUntil: now.Add(p.visibility)}
		bytes += it.size
		p.tracked[it] = struct{}{}
		p.pending++
		if ts, err := strconv.ParseInt(m.Attributes[AttrSentTimestamp], 10, 64); err == nil {
			p.met.messageAge.Observe(now.Sub(time.UnixMilli(ts)).Seconds())
		}
		p.addLocked(it)
	}
	p.sizeSamples++
	avg := float64(bytes) / float64(len(msgs))
	if p.sizeSamples == 1 {
		p.avgSize = avg
	} else {
		p.avgSize = 0.8*p.avgSize + 0.2*avg
	}
	p.met.inflight.Add(float64(len(msgs)))
	p.met.inflightBytes.Add(float64(bytes))
	if p.opt.BatchWindow <= 0 {
		p.closeOpenLocked()
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

// addLocked puts a received item into the open batch (standard queues) or
// its group's queue (FIFO).
func (p *Pipe) addLocked(it *item) {
	if p.info.FIFO {
		g := it.msg.GroupID()
		q := p.groups[g]
		if q == nil {
			q = &groupQueue{}
			p.groups[g] = q
			p.groupOrder = append(p.groupOrder, g)
		}
		q.items = append(q.items, it)
		return
	}
	if len(p.open) > 0 && p.openBytes+it.size > MaxBatchBytes {
		p.closeOpenLocked()
	}
	p.open = append(p.open, it)
	p.openBytes += it.size
	if len(p.open) >= p.opt.BatchSize {
		p.closeOpenLocked()
		return
	}
	if len(p.open) == 1 && p.opt.BatchWindow > 0 {
		seq := p.openSeq
		p.openTimer = time.AfterFunc(p.opt.BatchWindow, func() {
			p.mu.Lock()
			if p.openSeq == seq {
				p.closeOpenLocked()
			}
			p.mu.Unlock()
			p.signal()
		})
	}
}

func (p *Pipe) closeOpenLocked() {
	if p.openTimer != nil {
		p.openTimer.Stop()
		p.openTimer = nil
	}
	if len(p.open) == 0 {
		return
	}
	p.ready = append(p.ready, p.open)
	p.openSeq++
	p.open = nil
	p.openBytes = 0
}

// nextBatchLocked takes the next batch to run, or nil.
func (p *Pipe) nextBatchLocked() []*item {
	if !p.info.FIFO {
		if len(p.ready) == 0 {
			return nil
		}
		b := p.ready[0]
		p.ready[0] = nil
		p.ready = p.ready[1:]
		return b
	}
	// FIFO: take groups in order of arrival, skipping those with a batch in
	// flight, keeping each group's order; a group's messages go in one batch.
	var b []*item
	bytes := 0
	kept := p.groupOrder[:0]
	for _, g := range p.groupOrder {
		q := p.groups[g]
		if len(q.items) == 0 {
			delete(p.groups, g)
			continue
		}
		kept = append(kept, g)
		if p.busy[g] || len(b) >= p.opt.BatchSize {
			continue
		}
		took := 0
		for _, it := range q.items {
			if len(b) >= p.opt.BatchSize || (len(b) > 0 && bytes+it.size > MaxBatchBytes) {
				break
			}
			b = append(b, it)
			bytes += it.size
			took++
		}
		if took > 0 {
			q.items = q.items[took:]
			p.busy[g] = true
		}
	}
	p.groupOrder = kept
	return b
}

// dispatch starts batches while slots are free.
func (p *Pipe) dispatch(ctx context.Context, batches *conc.WaitGroup, del *deleter) {
	for {
		p.mu.Lock()
		if p.inflight >= p.conc {
			p.mu.Unlock()
			return
		}
		b := p.nextBatchLocked()
		if b == nil {
			p.mu.Unlock()
			return
		}
		p.inflight++
		p.pending -= len(b)
		p.mu.Unlock()
		batches.Go(func() { p.runBatch(ctx, b, del) })
	}
}

// heartbeat extends the visibility of every tracked message (in a batch or
// still waiting for one) once 2/3 of its visibility has passed.
func (p *Pipe) heartbeat(ctx context.Context) {
	// Tick well inside the last third of the visibility, so a due message
	// is never missed between two ticks.
	every := min(max(p.visibility/10, 10*time.Millisecond), 5*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.extendDue(ctx, time.Now())
		}
	}
}

func (p *Pipe) extendDue(ctx context.Context, now time.Time) {
	p.mu.Lock()
	var due []*item
	for it := range p.tracked {
		if it.visibleUntil.Sub(now) <= p.visibility/3 && now.Sub(it.receivedAt) < MaxVisibility-p.visibility {
			due = append(due, it)
		}
	}
	vis := p.visibility
	p.mu.Unlock()
	if len(due) == 0 {
		return
	}
	msgs := make([]*Message, len(due))
	for i, it := range due {
		msgs[i] = it.msg
	}
	err := p.opt.Source.ChangeVisibility(ctx, msgs, vis)
	failed, all := settleFailures(err)
	p.mu.Lock()
	n := 0
	for _, it := range due {
		if all || failed[it.msg.MessageID] != nil {
			continue
		}
		it.visibleUntil = now.Add(vis)
		n++
	}
	p.mu.Unlock()
	p.met.extended.Add(float64(n))
	if err != nil && ctx.Err() == nil {
		p.log.Error("extending visibility failed; those messages may be delivered again", "error", err)
	}
}

// settleFailures returns the ids a settle call failed for, or all=true when
// the error is not a *SettleError (nothing is known to have been settled).
func settleFailures(err error) (failed map[string]error, all bool) {
	if err == nil {
		return nil, false
	}
	var se *SettleError
	if errors.As(err, &se) {
		return se.Failed, false
	}
	return nil, true
}

// untrack forgets settled items and gives their bytes back.
func (p *Pipe) untrack(items []*item) {
	var bytes int
	p.mu.Lock()
	for _, it := range items {
		if _, ok := p.tracked[it]; ok {
			delete(p.tracked, it)
			bytes += it.size
		}
	}
	p.mu.Unlock()
	p.opt.Budget.Give(int64(bytes))
	p.met.inflight.Sub(float64(len(items)))
	p.met.inflightBytes.Sub(float64(bytes))
}

// releaseRemaining gives back, with visibility 0, whatever is still tracked
// after shutdown (messages of batches cut short, or never started).
func (p *Pipe) releaseRemaining() {
	p.mu.Lock()
	var left []*item
	for it := range p.tracked {
		left = append(left, it)
	}
	p.mu.Unlock()
	if len(left) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msgs := make([]*Message, len(left))
	for i, it := range left {
		msgs[i] = it.msg
	}
	if err := p.opt.Source.ChangeVisibility(ctx, msgs, 0); err != nil {
		p.log.Error("releasing unfinished messages failed; they come back after their visibility timeout", "error", err)
	}
	p.met.released.Add(float64(len(left)))
	p.untrack(left)
}
