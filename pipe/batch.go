package pipe

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/source"
)

// outcome is what happened to one message; the pipe settles it accordingly.
type outcome int

// The outcomes of a message.
const (
	// outSucceeded: the target took it; it is deleted.
	outSucceeded outcome = iota + 1
	// outFiltered: it did not pass the filter; it is deleted.
	outFiltered
	// outFailedRetry: it failed; it stays in the queue and comes back after its
	// visibility timeout (or the retry backoff), so the queue's redrive
	// policy dead-letters it in the end.
	outFailedRetry
	// outReleased: it was not finished at shutdown; it is made visible at once.
	outReleased
)

// String is the outcome's name as logs and metrics show it.
func (o outcome) String() string {
	switch o {
	case outSucceeded:
		return "succeeded"
	case outFiltered:
		return "filtered"
	case outFailedRetry:
		return "failed"
	case outReleased:
		return "released"
	}
	return "undecided"
}

type verdict struct {
	outcome outcome
	stage   string
	err     error
	// outage: a failure that is no verdict on the message (outageOf, or
	// following one in its FIFO group): it is held or deferred, uncounted.
	outage bool
	// judged: a whole failure bisect made a verdict on this message (it
	// fails on its own while the target works): it tells nothing of the
	// target.
	judged bool
}

// runBatch takes one batch through filter, enrichment, transformer and
// target, then settles every message exactly once, whatever happens
// (panics included).
// A held outage batch goes again with h, what the pipe held of it (nil for
// a new batch).
func (p *Pipe) runBatch(ctx context.Context, batch []*delivery, probe bool, h *heldBatch) {
	start := time.Now()
	ctx = p.exec.begin(ctx, len(batch))
	ctx, span := p.startBatchSpan(ctx, batch)
	v := make([]verdict, len(batch))
	targetErr := p.process(ctx, batch, v)
	sctx, endSettle := p.stage(ctx, "settle")
	p.settleBatch(sctx, batch, v, targetErr, start, probe, h)
	endSettle(nil)
	endBatchSpan(span, v, targetErr)
}

// process decides the verdicts of a batch; it returns the whole-batch error
// of the enrichment or the target, if any. A panic fails the messages not
// decided yet and becomes the batch's error.
//
// Its steps before and after the target call are functions of their own,
// so that its frame under the target call is small: a batch waits for its target's answer in a
// parked goroutine, and the runtime halves a parked goroutine's stack at a
// collection only when a quarter of it holds what is in use (issue 20).
func (p *Pipe) process(ctx context.Context, batch []*delivery, v []verdict) (batchErr error) {
	defer func() {
		if r := recover(); r != nil {
			batchErr = p.panicked(r, v)
		}
	}()
	j := judgement{v: v}
	events, err := p.prepare(ctx, batch, &j)
	if err != nil || len(events) == 0 {
		return err
	}
	p.met.batches.Inc()
	p.exec.invoking(ctx, events)
	if tap := p.tap(); tap != nil {
		p.tapPayloads(tap, core.TapTarget, events)
	}
	t0 := time.Now()
	tctx, endTarget := p.stage(ctx, "target")
	res, err := p.opt.Target.Deliver(tctx, events)
	endTarget(err)
	p.met.targetDuration.Observe(time.Since(t0).Seconds())
	return p.judgeTarget(ctx, &j, events, res, err)
}

// panicked fails the undecided verdicts for a panic r, and returns the
// batch's error.
func (p *Pipe) panicked(r any, v []verdict) error {
	err := fmt.Errorf("panic in pipe %s: %v", p.opt.Name, r)
	p.log.Error("batch panicked; its undecided messages fail", "error", err)
	for i := range v {
		if v[i].outcome == 0 {
			v[i] = verdict{outcome: outFailedRetry, stage: "runtime", err: err}
		}
	}
	return err
}

// judgement is a batch's verdicts and which of them each message id has.
// A batch of up to scanIDs messages finds an id's items by a scan of the
// batch (no map per batch: issue 20); a larger one by a map.
type judgement struct {
	v     []verdict
	batch []*delivery
	known []bool           // the items registered, by index (small batches)
	byID  map[string][]int // large batches
}

// scanIDs is the largest batch whose ids are found by a scan.
const scanIDs = 32

// init makes j ready for batch.
func (j *judgement) init(batch []*delivery) {
	j.batch = batch
	if len(batch) <= scanIDs {
		j.known = make([]bool, len(batch))
		return
	}
	j.byID = make(map[string][]int, len(batch))
}

// register says item i has the message id id.
func (j *judgement) register(id string, i int) {
	if j.byID == nil {
		j.known[i] = true
		return
	}
	j.byID[id] = append(j.byID[id], i)
}

// first is the first item registered with id, or -1.
func (j *judgement) first(id string) int {
	if j.byID == nil {
		for i, d := range j.batch {
			if j.known[i] && d.Message.MessageID == id {
				return i
			}
		}
		return -1
	}
	if idx := j.byID[id]; len(idx) > 0 {
		return idx[0]
	}
	return -1
}

// fail decides every undecided item of a message.
func (j *judgement) fail(id, stage string, err error, outcome outcome) {
	decide := func(i int) {
		if j.v[i].outcome == 0 {
			j.v[i] = verdict{outcome: outcome, stage: stage, err: err}
		}
	}
	if j.byID == nil {
		for i, d := range j.batch {
			if j.known[i] && d.Message.MessageID == id {
				decide(i)
			}
		}
		return
	}
	for _, i := range j.byID[id] {
		decide(i)
	}
}

// undecided reports whether the message of ev has no verdict yet.
func (j *judgement) undecided(ev *Event) bool {
	return j.v[j.first(ev.ID())].outcome == 0
}

// shutdownOr is o, or outReleased when ctx was cut short by shutdown: the
// message is given back at once.
func shutdownOr(ctx context.Context, o outcome) outcome {
	if ctx.Err() != nil {
		return outReleased
	}
	return o
}

// prepare makes the events of a batch and takes them through filter,
// enrichment and transformer; it returns those for the target and the
// enrichment's whole-batch error, if any.
func (p *Pipe) prepare(ctx context.Context, batch []*delivery, j *judgement) ([]*Event, error) {
	v := j.v
	j.init(batch)
	events := make([]*Event, 0, len(batch))
	split := false
	tap := p.tap()
	endFilter := p.filterStage(ctx)
	for i, d := range batch {
		m := d.Message
		if tap != nil {
			p.tapped(tap, core.TapReceived, m.MessageID, "", m.Body)
		}
		if m.UnwrapErr != nil {
			v[i] = verdict{outcome: outFailedRetry, stage: "unwrap", err: m.UnwrapErr}
			continue
		}
		if m.Split == nil {
			ev, err := p.newEvent(m)
			if err != nil {
				v[i] = verdict{outcome: outFailedRetry, stage: "runtime", err: err}
				continue
			}
			j.register(ev.ID(), i)
			if p.opt.Filter != nil {
				ok, err := p.opt.Filter.Match(ctx, ev)
				if err != nil {
					v[i] = verdict{outcome: outFailedRetry, stage: "filter", err: err}
					continue
				}
				if !ok {
					v[i] = verdict{outcome: outFiltered}
					if tap != nil {
						p.tapped(tap, core.TapFilter, m.MessageID, "filtered out", "")
					}
					continue
				}
			}
			if tap != nil {
				p.tapped(tap, core.TapFilter, m.MessageID, "passed", "")
			}
			events = append(events, ev)
			continue
		}
		split = true
		j.register(m.MessageID, i)
		v[i] = p.splitEvents(ctx, m, &events)
	}
	endFilter(nil)
	if split { // a failed record fails its message: drop its other records
		kept := events[:0]
		for _, ev := range events {
			if j.undecided(ev) {
				kept = append(kept, ev)
			}
		}
		events = kept
	}
	if p.opt.Enricher != nil && len(events) > 0 {
		ectx, endEnrich := p.stage(ctx, "enrichment")
		out, res, err := p.opt.Enricher.Enrich(ectx, events)
		endEnrich(err)
		if err != nil {
			for _, ev := range events {
				j.fail(ev.ID(), "enrichment", err, shutdownOr(ctx, outFailedRetry))
			}
			return nil, err
		}
		for _, f := range res.Failures {
			reason := f.Err
			if reason == nil {
				reason = ErrReportedFailed
			}
			j.fail(f.ID, "enrichment", core.RetryAfter(reason, f.RetryAfter), outFailedRetry)
		}
		kept := out[:0:0]
		handed := map[string]bool{}
		for _, ev := range out {
			if ev == nil || ev.Message == nil {
				continue
			}
			if i := j.first(ev.ID()); i >= 0 && v[i].outcome == 0 {
				kept = append(kept, ev)
				handed[ev.ID()] = true
			}
		}
		// Messages the enrichment answered nothing for are done (Pipes: an
		// empty answer means the target is not called).
		for _, ev := range events {
			if !handed[ev.ID()] {
				j.fail(ev.ID(), "", nil, outFiltered)
			}
		}
		events = kept
		if tap := p.tap(); tap != nil {
			p.tapPayloads(tap, core.TapEnrichment, events)
		}
	}
	if p.opt.Transformer != nil {
		kept := events[:0]
		for _, ev := range events {
			payload, err := p.opt.Transformer.Transform(ctx, ev)
			if err != nil {
				j.fail(ev.ID(), "transform", err, outFailedRetry)
				continue
			}
			ev.RecordJSON = payload
			kept = append(kept, ev)
		}
		events = kept
	}
	// A message fails whole: drop the other events of failed messages.
	kept := events[:0]
	for _, ev := range events {
		if j.undecided(ev) {
			kept = append(kept, ev)
		}
	}
	return kept, nil
}

// judgeTarget decides the verdicts of the events the target was given by
// its answer, and returns its whole-batch error, if any.
func (p *Pipe) judgeTarget(ctx context.Context, j *judgement, events []*Event, res Result, err error) error {
	if err != nil {
		for _, ev := range events {
			j.fail(ev.ID(), "target", err, shutdownOr(ctx, outFailedRetry))
		}
		return err
	}
	for _, f := range res.Failures {
		reason := f.Err
		if reason == nil {
			reason = ErrReportedFailed
		}
		j.fail(f.ID, "target", core.RetryAfter(reason, f.RetryAfter), shutdownOr(ctx, outFailedRetry))
	}
	for _, ev := range events {
		j.fail(ev.ID(), "", nil, outSucceeded)
	}
	return nil
}

// splitEvents adds the events of a message that stands for several
// records (Message.Split) that pass the filter, and returns the message's
// verdict so far: none while any record goes on, outFiltered when none does,
// a failure when one could not be encoded or filtered.
func (p *Pipe) splitEvents(ctx context.Context, m *source.Message, events *[]*Event) verdict {
	passed := 0
	for _, r := range m.Split {
		ev, err := NewEvent(r)
		if err != nil {
			return verdict{outcome: outFailedRetry, stage: "runtime", err: err}
		}
		if p.opt.Filter != nil {
			ok, err := p.opt.Filter.Match(ctx, ev)
			if err != nil {
				return verdict{outcome: outFailedRetry, stage: "filter", err: err}
			}
			if !ok {
				continue
			}
		}
		*events = append(*events, ev)
		passed++
	}
	if passed == 0 {
		return verdict{outcome: outFiltered}
	}
	return verdict{}
}

// applyFIFO fails, in each message group, every message after the group's
// first failure, so that order is kept when they come back. A group whose
// first failure is an outage holds its later messages with it, uncounted;
// one whose first failure is a verdict fails them (stage fifo), their own
// outages included. It returns the groups that failed.
func applyFIFO(batch []*delivery, v []verdict) map[string]bool {
	type head struct {
		err    error
		outage bool
	}
	var heads map[string]head
	for i, d := range batch {
		g := d.Message.GroupID()
		if h, ok := heads[g]; ok {
			switch {
			case v[i].outcome == outReleased:
			case h.outage:
				if v[i].outcome != outFailedRetry {
					v[i] = verdict{outcome: outFailedRetry, stage: "fifo", err: fmt.Errorf("an earlier message of group %q failed: %v", g, h.err)}
				}
				v[i].outage = true
			case v[i].outcome != outFailedRetry || v[i].outage:
				// Not wrapped: this message did not fail itself, so it must not
				// be dead-lettered for the earlier one's error.
				v[i] = verdict{outcome: outFailedRetry, stage: "fifo", err: fmt.Errorf("an earlier message of group %q failed: %v", g, h.err)}
			}
			continue
		}
		if v[i].outcome == outFailedRetry || v[i].outcome == outReleased {
			if heads == nil {
				heads = map[string]head{}
			}
			heads[g] = head{err: v[i].err, outage: v[i].outage}
		}
	}
	groups := make(map[string]bool, len(heads))
	for g, h := range heads {
		if !h.outage {
			groups[g] = true
		}
	}
	return groups
}

// settleBatch turns a batch's verdicts into final verbs for the settler
// (the only place that decides them), frees the batch's slot and tells the
// scaling controller and the circuit breaker how the batch went:
//
//	succeeded, filtered  → Ack
//	released (shutdown)  → Nak (visible at once)
//	outage               → no verdict: Defer (a Deferrer source), else
//	                       held by the pipe (leased) and sent again after
//	                       a backoff; Nak when the pipe is stopping
//	failed               → Term when it is dead-letterable (a client
//	                       error, or retries exhausted with on_exhausted:
//	                       dead_letter), else NakWithDelay(retry_backoff)
//	                       when set, else retry when its lease ends
//
// An outage is a message whose target call (or enrichment call) failed
// whole with a retryable error, also when the retry wrapper hands that back
// per item once its attempts ran out (outageOf): it says nothing of the
// message, so it neither uses up a receive or delivery count nor is
// dead-lettered, from the first such batch on, open circuit or not. A dry
// run gives no verb to what would be acked or retried: it stays hidden
// (heartbeat) until the pipe stops and releases it.
func (p *Pipe) settleBatch(ctx context.Context, batch []*delivery, v []verdict, batchErr error, start time.Time, probe bool, h *heldBatch) {
	s := settling{batch: batch, v: v, err: batchErr, start: start, h: h}
	p.judgeOutages(&s)
	p.giveVerbs(ctx, &s)
	s.discountHalf(probe)
	p.reportBatch(ctx, &s)
	p.mu.Lock()
	p.sched.inflight--
	p.tripLocked(s.state, probe, start, firstErr(batchErr, v))
	if probe {
		p.circuit.freshProbe = h != nil && p.circuit.open
	}
	giveBack := p.placeLocked(ctx, &s)
	p.ctl.batchDone(s.state == targetDown, s.throttled)
	p.mu.Unlock()
	p.met.deadLettered.Add(float64(s.onWayToDLQ))
	p.met.observeDeadLettered(s.onWayToDLQ)
	s.nak(giveBack)
	p.set.finalMany(s.items)
	p.signal()
}

// settling is a batch on its way from its verdicts to its verbs
// (settleBatch).
type settling struct {
	batch []*delivery
	v     []verdict
	err   error // the batch's whole error
	start time.Time
	h     *heldBatch // the held batch it went as; nil: a new batch
	tries int        // its whole failures in a row, before this one
	rest  []*delivery
	// split: bisect splits its outages in halves; noSign: what failed
	// tells of the batch, not of the target (bisect).
	split, noSign bool
	failedGroups  map[string]bool // FIFO: the groups with a verdict

	items                     []settle
	outages                   []*delivery // no verdict yet: held, deferred or released
	acked, failed, onWayToDLQ int
	state                     targetState
	throttled                 bool
}

// discountHalf keeps the whole failure of a half that bisect split off
// from counting towards the breaker (heldBatch.half), unless it was the
// probe of an open circuit, whose failures space the probes out.
func (s *settling) discountHalf(probe bool) {
	if !probe && s.h != nil && s.h.half && s.state == targetDown {
		s.state = targetUnknown
	}
}

// nak adds a release (Nak, visible at once) of each of ds.
func (s *settling) nak(ds []*delivery) {
	for _, d := range ds {
		s.items = append(s.items, settle{d: d, v: verbNak})
	}
}

// saw notes that the target was down, unless it answered for another
// message.
func (s *settling) sawDown() {
	if s.state == targetUnknown {
		s.state = targetDown
	}
}

// judgeOutages marks a batch's outages, has bisect judge them, and keeps
// FIFO order.
func (p *Pipe) judgeOutages(s *settling) {
	v := s.v
	for i := range v {
		v[i].outage = v[i].outcome == outFailedRetry && outageOf(s.err, v[i].stage, v[i].err)
	}
	s.throttled = core.IsThrottled(s.err)
	if s.h != nil {
		s.tries, s.rest = s.h.tries, s.h.rest // FIFO bisection: held after this batch
	}
	split, judged, evidence := p.bisect(s.batch, v, s.h)
	s.split, s.noSign = split, judged || split && evidence
	if p.info.FIFO {
		s.failedGroups = applyFIFO(s.batch, v)
	}
}

// giveVerbs gives each message its verb, but for the outages, and notes
// what the batch tells of the target.
func (p *Pipe) giveVerbs(ctx context.Context, s *settling) {
	s.items = make([]settle, 0, len(s.batch))
	for i, d := range s.batch {
		switch s.v[i].outcome {
		case outSucceeded:
			p.met.delivered.Inc()
			s.items = append(s.items, settle{d: d, v: verbAck})
			s.acked++
			s.state = targetAnswered
		case outFiltered:
			p.met.filtered.Inc()
			s.items = append(s.items, settle{d: d, v: verbAck})
			s.acked++
		case outReleased:
			s.items = append(s.items, settle{d: d, v: verbNak})
		default:
			p.failedVerb(ctx, s, d, s.v[i])
		}
	}
	if s.noSign {
		s.state = targetUnknown
	}
}

// failedVerb gives a failed message its verb (Term when dead-letterable,
// else a retry), or sets it aside with the outages.
func (p *Pipe) failedVerb(ctx context.Context, s *settling, d *delivery, v verdict) {
	s.failed++
	s.throttled = s.throttled || core.IsThrottled(v.err)
	p.countFailure(v.stage)
	p.exec.itemFailed(ctx, d.Message, v.stage, v.err)
	if v.outage {
		s.outages = append(s.outages, d)
		s.sawDown()
		return
	}
	switch {
	case v.stage != "target" || v.judged:
	case core.IsBatchFailure(v.err): // too old to be held again: the call failed whole
		s.sawDown()
	default:
		s.state = targetAnswered
	}
	if p.deadLetterable(v.err) {
		s.items = append(s.items, settle{d: d, v: verbTerm, reason: atStage(v.stage, v.err)})
		return
	}
	s.items = append(s.items, p.failItem(d, v.err))
	if p.info.MaxReceiveCount > 0 && d.NumDelivered() >= p.info.MaxReceiveCount {
		s.onWayToDLQ++ // its last allowed receive failed: the redrive policy moves it
	}
}

// reportBatch counts and logs how the batch went.
func (p *Pipe) reportBatch(ctx context.Context, s *settling) {
	p.observeBatch(s.batch, s.v)
	p.tapOutcomes(s.batch, s.v)
	switch {
	case s.err != nil:
		p.met.execFailed.Inc()
		p.exec.batchFailed(ctx, len(s.batch), s.err)
	case s.failed > 0:
		p.met.execPartial.Inc()
	}
	p.exec.batchDone(ctx, len(s.batch), s.acked, s.failed, time.Since(s.start))
}

// placeLocked finds the outages and what follows the batch in a FIFO
// bisection their way, leaves out what a dry run gives no verb, and tells
// the batcher the batch is done; it returns what the batcher gives back.
// p.mu is held.
func (p *Pipe) placeLocked(ctx context.Context, s *settling) []*delivery {
	release := p.stopping || ctx.Err() != nil
	busy := p.placeOutagesLocked(s, release)
	busy = append(busy, p.placeRestLocked(s, release)...)
	if p.opt.DryRun {
		s.items = p.dry.keep(s.items)
	}
	return p.batches.done(p.doneDeliveries(s.batch, busy), s.failedGroups)
}

// placeOutagesLocked gives the outages their way: released when
// stopping, split in halves (bisect), deferred by a Deferrer source, else
// held. It returns those held: their FIFO groups stay busy. p.mu is held.
func (p *Pipe) placeOutagesLocked(s *settling, release bool) (busy []*delivery) {
	switch {
	case len(s.outages) == 0:
		return nil
	case release:
		s.nak(s.outages)
		return nil
	case s.split:
		p.splitLocked(s.outages, s.rest)
	case p.set.def != nil && !p.info.FIFO && !p.opt.DryRun:
		// Back about when the next probe goes (the circuit is open),
		// else after the backoff of a first retry: a copy comes back
		// as a new delivery, so nothing counts its outages.
		delay := p.circuit.deferFor(time.Now(), outageRetry.Delay(s.tries+1))
		for _, d := range s.outages {
			s.items = append(s.items, settle{d: d, v: verbDefer, delay: delay})
		}
		return nil
	default:
		failedAt := s.start
		if s.h != nil {
			failedAt = s.h.failedAt
		}
		p.holdLocked(s.outages, s.tries+1, failedAt, s.rest, s.h != nil && s.h.half)
	}
	s.rest = nil // held with them
	return s.outages
}

// placeRestLocked gives their way to the messages that follow the batch
// in its group (FIFO bisection): released when stopping, failed with a
// verdict in the group, else held to go next. It returns those held.
// p.mu is held.
func (p *Pipe) placeRestLocked(s *settling, release bool) (busy []*delivery) {
	if len(s.rest) == 0 {
		return nil
	}
	switch {
	case release:
		s.nak(s.rest)
	case s.failedGroups[s.rest[0].Message.GroupID()]: // a verdict in the group: what follows fails with it
		for _, d := range s.rest {
			p.countFailure("fifo")
			s.items = append(s.items, p.failItem(d, nil))
		}
	default:
		p.keepLocked(heldBatch{ds: s.rest, at: time.Now(), tries: s.tries, failedAt: s.h.failedAt, half: s.h.half})
		return s.rest
	}
	return nil
}

// doneDeliveries is what of batch the batcher is done with: on FIFO, all
// but the groups with a message held (busy), so that nothing of them
// overtakes.
func (p *Pipe) doneDeliveries(batch, busy []*delivery) []*delivery {
	if !p.info.FIFO || len(busy) == 0 {
		return batch
	}
	held := map[string]bool{}
	for _, d := range busy {
		held[d.Message.GroupID()] = true
	}
	done := make([]*delivery, 0, len(batch))
	for _, d := range batch {
		if !held[d.Message.GroupID()] {
			done = append(done, d)
		}
	}
	return done
}

// failItem is the verb of a failure err that is to be retried:
// NakWithDelay by the item's RetryAfter when its target gave one, else by
// retry_backoff when set, else a retry when the lease ends.
func (p *Pipe) failItem(d *delivery, err error) settle {
	if delay := core.RetryAfterOf(err); delay > 0 {
		return settle{d: d, v: verbNak, delay: delay}
	}
	if p.opt.RetryBackoff != nil {
		return settle{d: d, v: verbNak, delay: p.opt.RetryBackoff.Delay(d.NumDelivered())}
	}
	return settle{d: d, v: verbRetry}
}

// outageOf reports whether an item failure tells of a target (or an
// enrichment) that cannot be reached or works no more (connection refused,
// timeouts, 5xx, 429): a retryable failure of the whole call, also when the
// retry wrapper hands it back per item once its attempts ran out
// (Exhausted and BatchFailure) — unless the item is too old to be tried
// again (TooOld: max_event_age). Items the target named in its answer are
// not an outage, nor are client errors.
func outageOf(batchErr error, stage string, err error) bool {
	if stage != "target" && stage != "enrichment" || core.IsPermanent(err) || errors.Is(err, ErrReportedFailed) {
		return false
	}
	if batchErr != nil {
		return true
	}
	exhausted, _ := core.IsExhausted(err)
	return stage == "target" && exhausted && core.IsBatchFailure(err) && !core.IsTooOld(err)
}

// firstErr is the batch's error, or its first item's.
func firstErr(err error, v []verdict) error {
	if err != nil {
		return err
	}
	for _, x := range v {
		if x.err != nil {
			return x.err
		}
	}
	return nil
}

// tripLocked feeds the circuit breaker what a batch that started at start
// told of the target (breaker.record), and says what it did: opened,
// closed (the held batches go first, now) or a failed probe. p.mu is
// held.
func (p *Pipe) tripLocked(state targetState, probe bool, start time.Time, err error) {
	c := &p.circuit
	now := time.Now()
	switch c.record(state, probe, start, now, p.stopping, err) {
	case circuitClosed:
		p.met.circuitOpen.Set(0)
		p.held.goNow(now) // the target works: they go first, now
		p.log.Info("target works again: circuit closed, polling resumes", "held_batches", p.held.count())
	case circuitOpened:
		p.met.circuitOpen.Set(1)
		p.log.Error("target keeps failing: circuit open, polling paused; failed batches are held and probed",
			"batches_failed_in_a_row", c.streak, "error", err, "next_probe", c.every.String())
	case circuitProbeFailed:
		p.log.Warn("probe batch failed, circuit stays open", "error", err, "next_probe", c.every.String())
	}
}

func (p *Pipe) countFailure(stage string) {
	switch stage {
	case "filter":
		p.met.failedFilter.Inc()
	case "transform":
		p.met.failedTransform.Inc()
	case "target", "fifo":
		p.met.failedTarget.Inc()
	case "enrichment":
		p.met.failedEnrichment.Inc()
	default:
		p.met.failedOther.Inc()
	}
}
