package pipe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/pipesproject/pipes/budget"
	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/source"
	"github.com/sourcegraph/conc"
)

// Settling tuning.
const (
	// ackLinger is how long a partial ack call waits for company.
	ackLinger = 20 * time.Millisecond
	// settleCallTimeout bounds every call the settler makes to the source,
	// so one hung call never stalls the others for long.
	settleCallTimeout = 10 * time.Second
	// leaseCapMargin keeps extensions a little inside SQS's 12 h from the
	// receive (the server counts from its own receive time).
	leaseCapMargin = 5 * time.Second
)

// settler is the one place a pipe's messages are settled. Every received
// message becomes a delivery it tracks; the runtime gives each one final
// verb (Ack, Nak, NakWithDelay, Term, or "retry when the lease ends"),
// and the settler turns those into batched source calls on a fixed set of
// long-lived workers: acks gathered across batches, ten per call, waiting
// at most ackLinger; naks grouped by delay; dead-letter sends. Its
// heartbeat extends the leases of deliveries not settled yet.
//
// Calls of one receipt never overlap: a final verb given while an
// extension of the same delivery is under way waits for it to return, and
// no extension starts after a final verb. So a late heartbeat can never
// undo a settle.
type settler struct {
	src  source.Source
	ext  source.Extender   // nil: leases do not end on their own
	term source.Terminator // nil: no native dead-lettering
	def  source.Deferrer   // nil: outages are held by the pipe
	// onKept is told of deferred deliveries the source kept (could not
	// defer): they are the pipe's to hold again.
	onKept  func([]*delivery)
	dead    *deadLetterer
	vis     time.Duration
	backoff *Backoff // failed dead-letter sends: retry delay by receive count
	log     *slog.Logger
	met     *pipeMetrics
	budget  *budget.Budget
	onErr   func(error)

	obs source.AckObserver // nil: no one to tell of deletes

	mu      sync.Mutex
	cond    *sync.Cond
	open    map[*delivery]struct{} // received, not settled
	acks    []*delivery            // final Ack, waiting for a call
	queue   []job
	closing bool      // no new extensions; acks flushed at once
	closed  bool      // workers exit once the queue is empty
	hard    time.Time // once closing: no call outlives it

	// calls is the parent of every call's context: cancelled at the hard
	// deadline, so calls under way then end too.
	calls       context.Context
	cancelCalls context.CancelFunc

	kick    chan struct{}
	stop    chan struct{}
	workers conc.WaitGroup
	loop    conc.WaitGroup
}

// job is one source call (or dead-letter send) for up to ten deliveries.
type job struct {
	op    jobOp
	ds    []*delivery
	delay time.Duration
}

type jobOp uint8

const (
	opAck jobOp = iota + 1
	opNak
	opExtend
	opTerm
	opDefer
)

// settlerConfig is what a settler works with.
type settlerConfig struct {
	src     source.Source
	vis     time.Duration
	backoff *Backoff
	dead    *deadLetterer
	log     *slog.Logger
	met     *pipeMetrics
	budget  *budget.Budget
	// onErr, when set, is told of every failed call (besides the log).
	onErr func(error)
	// onKept, when set, is told of deliveries a Deferrer kept.
	onKept func([]*delivery)
}

func (p *Pipe) settlerConfig() settlerConfig {
	c := settlerConfig{src: p.opt.Source, vis: p.visibility, backoff: p.opt.RetryBackoff, log: p.log, met: p.met, budget: p.opt.Budget,
		onKept: p.undeferred}
	if p.opt.DeadLetter != nil {
		c.dead = &deadLetterer{target: p.opt.DeadLetter, pipe: p.opt.Name, sourceARN: p.info.ARN}
	}
	return c
}

func newSettler(c settlerConfig, workers int) *settler {
	s := &settler{
		src:     c.src,
		vis:     c.vis,
		backoff: c.backoff,
		dead:    c.dead,
		log:     c.log,
		met:     c.met,
		budget:  c.budget,
		onErr:   c.onErr,
		onKept:  c.onKept,
		open:    map[*delivery]struct{}{},
		kick:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
	}
	s.cond = sync.NewCond(&s.mu)
	s.calls, s.cancelCalls = context.WithCancel(context.Background())
	if e, ok := c.src.(source.Extender); ok {
		s.ext = e
	}
	if t, ok := c.src.(source.Terminator); ok {
		s.term = t
	}
	if d, ok := c.src.(source.Deferrer); ok {
		s.def = d
	}
	if o, ok := c.src.(source.AckObserver); ok {
		s.obs = o
	}
	for range max(workers, 1) {
		s.workers.Go(s.work)
	}
	s.loop.Go(s.run)
	return s
}

// track makes the delivery of a message received at receivedAt.
func (s *settler) track(m *source.Message, receivedAt time.Time) *delivery {
	d := &delivery{Message: m, s: s, size: m.Size(), receivedAt: receivedAt, leaseEnd: receivedAt.Add(s.vis)}
	if n, err := m.RecordLen(); err == nil {
		d.recordSize = n
	} else {
		d.recordSize = d.size
	}
	if c, ok := s.src.(source.AttemptCounter); ok {
		d.attempts = c.Attempts(m)
	}
	s.mu.Lock()
	s.open[d] = struct{}{}
	s.mu.Unlock()
	return d
}

// tracked is the number of deliveries not settled yet.
func (s *settler) tracked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.open)
}

// settle is one final verb for one delivery.
type settle struct {
	d      *delivery
	v      verb
	delay  time.Duration
	reason error
}

// final gives d its final verb.
func (s *settler) final(d *delivery, v verb, delay time.Duration, reason error) error {
	if s.finalMany([]settle{{d: d, v: v, delay: delay, reason: reason}}) > 0 {
		return errSettled
	}
	return nil
}

// finalMany gives each delivery its final verb in one step, grouping the
// calls, and returns how many were refused as already settled.
func (s *settler) finalMany(items []settle) (refused int) {
	ready := make([]*delivery, 0, len(items))
	s.mu.Lock()
	for _, it := range items {
		d := it.d
		if d.final != verbNone {
			refused++
			continue
		}
		d.final, d.delay, d.reason = it.v, it.delay, it.reason
		if d.extending {
			d.deferred = true // applied when the extension returns
			continue
		}
		ready = append(ready, d)
	}
	done := s.dispatchLocked(ready)
	s.mu.Unlock()
	if refused > 0 {
		s.met.doubleSettles.Add(float64(refused))
		s.log.Error("a settling verb was refused: the delivery was settled already (a batch outlived the shutdown timeout, or a bug)", "deliveries", refused)
	}
	s.done(done)
	return refused
}

// dispatchLocked queues the calls of deliveries whose final verb is set,
// grouped by verb and delay, and returns those that need no call.
func (s *settler) dispatchLocked(ds []*delivery) (done []*delivery) {
	var naks, defers map[time.Duration][]*delivery
	var terms, retries []*delivery
	for _, d := range ds {
		switch d.final {
		case verbDefer:
			if defers == nil {
				defers = map[time.Duration][]*delivery{}
			}
			defers[d.delay] = append(defers[d.delay], d)
		case verbAck:
			s.acks = append(s.acks, d)
		case verbNak:
			if naks == nil {
				naks = map[time.Duration][]*delivery{}
			}
			naks[d.delay] = append(naks[d.delay], d)
		case verbTerm:
			terms = append(terms, d)
		case verbRetry:
			retries = append(retries, d)
		}
	}
	for delay, group := range naks {
		s.pushLocked(opNak, group, delay)
	}
	for delay, group := range defers {
		if s.def == nil {
			s.pushLocked(opNak, group, 0) // never asked of a source without Defer
			continue
		}
		s.pushLocked(opDefer, group, delay)
	}
	s.pushLocked(opTerm, terms, 0)
	if s.ext != nil {
		done = retries // the lease it has brings it back: no call
	} else {
		s.pushLocked(opNak, retries, s.vis)
	}
	s.flushAcksLocked(false)
	return done
}

// pushLocked queues calls for ds, ten deliveries per call.
func (s *settler) pushLocked(op jobOp, ds []*delivery, delay time.Duration) {
	for len(ds) > 0 {
		n := min(len(ds), maxReceive)
		s.queue = append(s.queue, job{op: op, ds: ds[:n:n], delay: delay})
		s.cond.Signal() // one worker per job
		ds = ds[n:]
	}
}

// flushAcksLocked queues full ack calls, and the partial one when all is
// true or the settler is closing; otherwise it asks the loop to flush the
// partial one after ackLinger.
func (s *settler) flushAcksLocked(all bool) {
	full := len(s.acks) / maxReceive * maxReceive
	if all || s.closing {
		full = len(s.acks)
	}
	if full > 0 {
		s.pushLocked(opAck, s.acks[:full:full], 0)
		s.acks = append([]*delivery(nil), s.acks[full:]...)
	}
	if len(s.acks) > 0 {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// touch extends d's lease now (InProgress).
func (s *settler) touch(d *delivery) {
	if s.ext == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !extendable(d) || d.extending || d.stale || s.closing {
		return
	}
	if ext := s.extensionLocked(d, time.Now()); ext > 0 {
		d.extending = true
		s.queue = append(s.queue, job{op: opExtend, ds: []*delivery{d}, delay: ext})
		s.cond.Signal()
	}
}

// extendable reports whether d's lease is still kept: until its final
// verb, and while an Ack or a Term of it waits for its call (a slow delete
// or dead-letter send must not let the message be delivered again). An
// extension racing a delete is harmless; a Nak is never extended over.
func extendable(d *delivery) bool {
	return !d.settled && (d.final == verbNone || d.final == verbAck || d.final == verbTerm || d.final == verbDefer)
}

// extensionLocked is how long d's lease may be extended from now: the
// visibility, less what would pass the 12 h cap from the receive; 0 when
// the cap is reached.
func (s *settler) extensionLocked(d *delivery, now time.Time) time.Duration {
	left := maxVisibility - leaseCapMargin - now.Sub(d.receivedAt)
	if left >= s.vis {
		return s.vis
	}
	if ext := left.Truncate(time.Second); ext >= time.Second {
		return ext
	}
	return 0
}

// run is the settler's clock: it flushes partial acks after ackLinger and
// beats the heartbeat.
func (s *settler) run() {
	every := min(max(s.vis/10, 10*time.Millisecond), 5*time.Second)
	hb := time.NewTicker(every)
	defer hb.Stop()
	var linger <-chan time.Time
	for {
		select {
		case <-s.stop:
			return
		case <-s.kick:
			if linger == nil {
				linger = time.After(ackLinger)
			}
		case <-linger:
			linger = nil
			s.mu.Lock()
			s.flushAcksLocked(true)
			s.mu.Unlock()
		case now := <-hb.C:
			s.heartbeat(now)
		}
	}
}

// heartbeat extends, in batched calls, the leases of the deliveries not
// settled yet whose lease ends within a third of the visibility, up to the
// 12 h cap from their receive.
func (s *settler) heartbeat(now time.Time) {
	if s.ext == nil {
		return
	}
	groups := map[time.Duration][]*delivery{}
	capped := 0
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return
	}
	for d := range s.open {
		if !extendable(d) || d.extending || d.stale || d.leaseEnd.Sub(now) > s.vis/3 {
			continue
		}
		ext := s.extensionLocked(d, now)
		if ext == 0 {
			if !d.capped {
				d.capped = true
				capped++
			}
			continue
		}
		d.extending = true
		groups[ext] = append(groups[ext], d)
	}
	for ext, ds := range groups {
		s.pushExtendLocked(ds, ext)
	}
	s.mu.Unlock()
	if capped > 0 {
		s.log.Warn("messages reached the 12 h visibility cap from their receive and can no longer be extended: they may be delivered again while still being worked on",
			"messages", capped)
	}
}

func (s *settler) pushExtendLocked(ds []*delivery, ext time.Duration) {
	for len(ds) > 0 {
		n := min(len(ds), maxReceive)
		s.queue = append(s.queue, job{op: opExtend, ds: ds[:n:n], delay: ext})
		s.cond.Signal()
		ds = ds[n:]
	}
}

// work runs queued calls until the settler is closed and the queue empty.
func (s *settler) work() {
	for {
		s.mu.Lock()
		for len(s.queue) == 0 && !s.closed {
			s.cond.Wait()
		}
		if len(s.queue) == 0 {
			s.mu.Unlock()
			return
		}
		j := s.queue[0]
		s.queue[0] = job{}
		s.queue = s.queue[1:]
		s.mu.Unlock()
		s.do(j)
	}
}

// callCtx bounds one call: settleCallTimeout, and never past the hard
// deadline once the pipe is stopping.
func (s *settler) callCtx() (context.Context, context.CancelFunc) {
	s.mu.Lock()
	hard := s.hard
	s.mu.Unlock()
	deadline := time.Now().Add(settleCallTimeout)
	if !hard.IsZero() && hard.Before(deadline) {
		deadline = hard
	}
	return context.WithDeadline(s.calls, deadline)
}

func messagesOf(ds []*delivery) []*source.Message {
	msgs := make([]*source.Message, len(ds))
	for i, d := range ds {
		msgs[i] = d.Message
	}
	return msgs
}

func (s *settler) do(j job) {
	ctx, cancel := s.callCtx()
	defer cancel()
	switch j.op {
	case opAck:
		err := s.src.Ack(ctx, messagesOf(j.ds))
		bad, stale := s.failed(j.ds, err)
		s.met.deleted.Add(float64(len(j.ds) - bad))
		if err != nil {
			s.report(err)
			s.met.deleteFailures.Add(float64(bad))
			s.met.possibleDupes.Add(float64(stale))
			s.log.Error("deleting messages failed; they will be delivered again", "error", err, "messages", bad)
		}
		s.done(j.ds)
		if s.obs != nil { // settled first: no heartbeat touches a deleted receipt meanwhile
			s.observeAcks(ctx, j.ds, err)
		}
	case opNak:
		err := s.src.Nak(ctx, messagesOf(j.ds), j.delay)
		s.met.released.Add(float64(len(j.ds)))
		if err != nil {
			s.report(err)
			bad, _ := s.failed(j.ds, err)
			s.log.Error("giving messages back failed; they come back when their current visibility ends",
				"error", err, "messages", bad, "delay", j.delay.String())
		}
		s.done(j.ds)
	case opExtend:
		start := time.Now()
		err := s.ext.Extend(ctx, messagesOf(j.ds), j.delay)
		s.extended(j, start, err)
	case opTerm:
		s.terminate(ctx, j.ds)
	case opDefer:
		s.deferred(ctx, j)
	}
}

// deferred gives an outage's deliveries back through the Deferrer; those
// it kept lose their verb and go back to the pipe (onKept), or, once the
// settler is closing, are released.
func (s *settler) deferred(ctx context.Context, j job) {
	kept, err := s.def.Defer(ctx, messagesOf(j.ds), j.delay)
	if err != nil {
		s.report(err)
		s.log.Warn("deferring an outage's messages failed for some; the pipe holds those the source kept and sends them again itself",
			"error", err, "messages", len(j.ds), "kept", len(kept), "delay", j.delay.String())
	}
	keep := make(map[*source.Message]bool, len(kept))
	for _, m := range kept {
		keep[m] = true
	}
	var back, gone, ready []*delivery
	s.mu.Lock()
	closing := s.closing
	for _, d := range j.ds {
		if !keep[d.Message] {
			gone = append(gone, d)
			continue
		}
		d.final, d.delay = verbNone, 0
		if !closing {
			back = append(back, d)
			continue
		}
		d.final = verbNak
		if d.extending {
			d.deferred = true // after the extension under way, never under it
			continue
		}
		ready = append(ready, d)
	}
	s.met.released.Add(float64(len(gone)))
	done := s.dispatchLocked(ready)
	s.mu.Unlock()
	s.done(done)
	s.done(gone)
	if len(back) > 0 {
		if s.onKept != nil {
			s.onKept(back)
		} else {
			s.regive(back, verbNak)
		}
	}
}

// observeAcks tells the AckObserver of the deliveries of an Ack call that
// were deleted (err names those that were not), leaving out those sent to
// the dead-letter target.
func (s *settler) observeAcks(ctx context.Context, ds []*delivery, err error) {
	var se *core.SettleError
	if err != nil && !errors.As(err, &se) {
		return // nothing is known to be deleted
	}
	deleted := make([]*source.Message, 0, len(ds))
	s.mu.Lock()
	for _, d := range ds {
		if d.deadLettered || se != nil && se.Failed[d.Message.ReceiptHandle] != nil {
			continue
		}
		deleted = append(deleted, d.Message)
	}
	s.mu.Unlock()
	if len(deleted) > 0 {
		s.obs.Acked(ctx, deleted)
	}
}

// report tells onErr of a failed call.
func (s *settler) report(err error) {
	if s.onErr != nil {
		s.onErr(err)
	}
}

// failed counts the deliveries err says were not settled, and among them
// those whose receipt the source refused as stale.
func (s *settler) failed(ds []*delivery, err error) (bad, stale int) {
	if err == nil {
		return 0, 0
	}
	var se *core.SettleError
	if !errors.As(err, &se) {
		return len(ds), 0
	}
	for _, d := range ds {
		if se.Failed[d.Message.ReceiptHandle] != nil {
			bad++
		}
	}
	if se.SenderFault {
		stale = bad
	}
	return bad, stale
}

// extended records an extension's outcome and applies the final verbs that
// waited for it.
func (s *settler) extended(j job, start time.Time, err error) {
	var se *core.SettleError
	all := err != nil && !errors.As(err, &se)
	n, stale := 0, 0
	s.mu.Lock()
	var deferred []*delivery
	for _, d := range j.ds {
		d.extending = false
		switch {
		case all:
		case se != nil && se.Failed[d.Message.ReceiptHandle] != nil:
			if se.SenderFault {
				d.stale = true // retrying every tick would fail every tick
				stale++
			}
		default:
			d.leaseEnd = start.Add(j.delay)
			n++
		}
		if d.deferred {
			d.deferred = false
			deferred = append(deferred, d)
		}
	}
	done := s.dispatchLocked(deferred)
	s.mu.Unlock()
	s.done(done)
	s.met.extended.Add(float64(n))
	if err != nil {
		s.report(err)
		s.log.Error("extending visibility failed; those messages may be delivered again", "error", err,
			"messages", len(j.ds)-n, "stale_receipts", stale)
	}
}

// terminate gives up on deliveries: the pipe's dead-letter target (then
// ack; a failed send is retried later, never made visible at once), else
// the source's own dead-lettering, else the queue's redrive policy.
func (s *settler) terminate(ctx context.Context, ds []*delivery) {
	switch {
	case s.dead != nil:
		sent, back, err := s.dead.send(ctx, ds)
		s.met.deadLettered.Add(float64(len(sent)))
		s.mu.Lock()
		for _, d := range sent {
			d.deadLettered = true
		}
		s.mu.Unlock()
		s.regive(sent, verbAck)
		if len(back) > 0 {
			s.log.Error("sending to the dead-letter target failed; the messages are retried later instead",
				"messages", len(back), "error", err)
			s.regive(back, verbRetry)
		}
		s.met.observeDeadLettered(len(sent))
	case s.term != nil:
		err := s.term.Term(ctx, messagesOf(ds))
		bad, _ := s.failed(ds, err)
		s.met.deadLettered.Add(float64(len(ds) - bad))
		s.met.observeDeadLettered(len(ds) - bad)
		if err != nil {
			s.log.Error("dead-lettering messages failed; they come back when their current lease ends", "error", err, "messages", bad)
		}
		s.done(ds)
	default:
		s.regive(ds, verbRetry)
	}
}

// regive replaces the final verb of deliveries the settler holds (a Term
// that became an Ack or a retry). A retry gets the retry backoff when the
// pipe has one.
func (s *settler) regive(ds []*delivery, v verb) {
	if len(ds) == 0 {
		return
	}
	s.mu.Lock()
	ready := ds[:0:0]
	for _, d := range ds {
		d.final, d.delay = v, 0
		if v == verbRetry && s.backoff != nil {
			d.final, d.delay = verbNak, s.backoff.Delay(d.NumDelivered())
		}
		if d.extending {
			d.deferred = true // after the extension under way, never under it
			continue
		}
		ready = append(ready, d)
	}
	done := s.dispatchLocked(ready)
	s.mu.Unlock()
	s.done(done)
}

// done forgets settled deliveries and gives their bytes back.
func (s *settler) done(ds []*delivery) {
	bytes := 0
	n := 0
	s.mu.Lock()
	for _, d := range ds {
		if d.settled {
			continue
		}
		d.settled = true
		delete(s.open, d)
		bytes += d.size
		n++
	}
	s.mu.Unlock()
	s.budget.Give(int64(bytes))
	s.met.inflight.Sub(float64(n))
	s.met.inflightBytes.Sub(float64(bytes))
}

// close releases (Nak, at once) every delivery without a final verb,
// flushes what is queued, and returns once every call has returned; no
// call outlives hard. It returns how many deliveries it released.
func (s *settler) close(hard time.Time) int {
	close(s.stop)
	s.loop.Wait()
	var left []settle
	s.mu.Lock()
	s.closing = true
	s.hard = hard
	stopCalls := time.AfterFunc(time.Until(hard), s.cancelCalls)
	defer stopCalls.Stop()
	defer s.cancelCalls()
	for d := range s.open {
		if d.final == verbNone {
			left = append(left, settle{d: d, v: verbNak})
		}
	}
	s.mu.Unlock()
	s.finalMany(left)
	s.mu.Lock()
	s.flushAcksLocked(true)
	s.closed = true
	s.cond.Broadcast()
	s.mu.Unlock()
	s.workers.Wait()
	return len(left)
}

// deadLetterer sends items to a pipe's dead-letter target with their
// failure context as message attributes.
type deadLetterer struct {
	target    Target
	pipe      string
	sourceARN string
}

// send delivers ds to the dead-letter target and says which were sent and
// which were not (with the first error). A panic of the target fails the
// send; it never escapes.
func (dl *deadLetterer) send(ctx context.Context, ds []*delivery) (sent, back []*delivery, err error) {
	events := make([]*Event, len(ds))
	now := time.Now()
	for i, d := range ds {
		events[i] = deadLetterEvent(d, dl.pipe, dl.sourceARN, now)
	}
	res, err := deliverSafely(ctx, dl.target, events)
	failed := map[string]error{}
	if err != nil {
		for _, ev := range events {
			failed[ev.ID()] = err
		}
	}
	for _, f := range res.Failures {
		failed[f.ID] = f.Err
		if err == nil {
			err = f.Err
		}
	}
	for _, d := range ds {
		if _, bad := failed[d.Message.MessageID]; bad {
			back = append(back, d)
		} else {
			sent = append(sent, d)
		}
	}
	return sent, back, err
}

// deliverSafely calls t, turning a panic into an error.
func deliverSafely(ctx context.Context, t Target, events []*Event) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = Result{}, fmt.Errorf("target panicked: %v", r)
		}
	}()
	return t.Deliver(ctx, events)
}
