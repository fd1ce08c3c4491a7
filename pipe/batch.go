package pipe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sourcegraph/conc"
)

// Outcome is what happened to one message; the pipe settles it accordingly.
type Outcome int

// The outcomes of a message.
const (
	// Succeeded: the target took it; it is deleted.
	Succeeded Outcome = iota + 1
	// Filtered: it did not pass the filter; it is deleted.
	Filtered
	// FailedRetry: it failed; it stays in the queue and comes back after its
	// visibility timeout (or the retry backoff), so the queue's redrive
	// policy dead-letters it in the end.
	FailedRetry
	// Released: it was not finished at shutdown; it is made visible at once.
	Released
)

// String is the outcome's name as logs and metrics show it.
func (o Outcome) String() string {
	switch o {
	case Succeeded:
		return "succeeded"
	case Filtered:
		return "filtered"
	case FailedRetry:
		return "failed"
	case Released:
		return "released"
	}
	return "undecided"
}

type verdict struct {
	outcome Outcome
	stage   string
	err     error
}

// runBatch takes one batch through filter, transformer and target, then
// settles every message exactly once, whatever happens (panics included).
func (p *Pipe) runBatch(ctx context.Context, items []*item, del *deleter) {
	start := time.Now()
	v := make([]verdict, len(items))
	var targetErr error
	defer func() {
		if r := recover(); r != nil {
			err := fmt.Errorf("panic in pipe %s: %v", p.opt.Name, r)
			p.log.Error("batch panicked; its undecided messages fail", "error", err)
			for i := range v {
				if v[i].outcome == 0 {
					v[i] = verdict{outcome: FailedRetry, stage: "runtime", err: err}
				}
			}
			targetErr = err
		}
		p.finishBatch(ctx, items, v, targetErr, del, start)
	}()
	targetErr = p.process(ctx, items, v)
}

// process decides the verdicts of a batch; it returns the whole-batch error
// of the enrichment or the target, if any.
func (p *Pipe) process(ctx context.Context, items []*item, v []verdict) error {
	byID := make(map[string][]int, len(items))
	events := make([]*Event, 0, len(items))
	for i, it := range items {
		ev, err := NewEvent(it.msg)
		if err != nil {
			v[i] = verdict{outcome: FailedRetry, stage: "runtime", err: err}
			continue
		}
		byID[ev.ID()] = append(byID[ev.ID()], i)
		if p.opt.Filter != nil {
			ok, err := p.opt.Filter.Match(ctx, ev)
			if err != nil {
				v[i] = verdict{outcome: FailedRetry, stage: "filter", err: err}
				continue
			}
			if !ok {
				v[i] = verdict{outcome: Filtered}
				continue
			}
		}
		events = append(events, ev)
	}
	// fail decides every undecided item of a message.
	fail := func(id, stage string, err error, outcome Outcome) {
		for _, i := range byID[id] {
			if v[i].outcome == 0 {
				v[i] = verdict{outcome: outcome, stage: stage, err: err}
			}
		}
	}
	shutdownOr := func(o Outcome) Outcome {
		if ctx.Err() != nil {
			return Released // cut short by shutdown: give back at once
		}
		return o
	}
	if p.opt.Enricher != nil && len(events) > 0 {
		out, res, err := p.opt.Enricher.Enrich(ctx, events)
		if err != nil {
			for _, ev := range events {
				fail(ev.ID(), "enrichment", err, shutdownOr(FailedRetry))
			}
			return err
		}
		for _, f := range res.Failures {
			reason := f.Err
			if reason == nil {
				reason = errors.New("reported failed by the enrichment")
			}
			fail(f.ID, "enrichment", reason, FailedRetry)
		}
		kept := out[:0:0]
		handed := map[string]bool{}
		for _, ev := range out {
			if ev == nil || ev.Message == nil {
				continue
			}
			if idx := byID[ev.ID()]; len(idx) > 0 && v[idx[0]].outcome == 0 {
				kept = append(kept, ev)
				handed[ev.ID()] = true
			}
		}
		// Messages the enrichment answered nothing for are done (Pipes: an
		// empty answer means the target is not called).
		for _, ev := range events {
			if !handed[ev.ID()] {
				fail(ev.ID(), "", nil, Filtered)
			}
		}
		events = kept
	}
	if p.opt.Transformer != nil {
		kept := events[:0]
		for _, ev := range events {
			payload, err := p.opt.Transformer.Transform(ctx, ev)
			if err != nil {
				fail(ev.ID(), "transform", err, FailedRetry)
				continue
			}
			ev.Payload = payload
			kept = append(kept, ev)
		}
		events = kept
	}
	// A message fails whole: drop the other events of failed messages.
	kept := events[:0]
	for _, ev := range events {
		if v[byID[ev.ID()][0]].outcome == 0 {
			kept = append(kept, ev)
		}
	}
	events = kept
	if len(events) == 0 {
		return nil
	}
	p.met.batches.Inc()
	p.exec.invoking(ctx, events)
	t0 := time.Now()
	res, err := p.opt.Target.Deliver(ctx, events)
	p.met.targetDuration.Observe(time.Since(t0).Seconds())
	if err != nil {
		for _, ev := range events {
			fail(ev.ID(), "target", err, shutdownOr(FailedRetry))
		}
		return err
	}
	for _, f := range res.Failures {
		reason := f.Err
		if reason == nil {
			reason = errors.New("reported failed by the target")
		}
		fail(f.ID, "target", reason, shutdownOr(FailedRetry))
	}
	for _, ev := range events {
		fail(ev.ID(), "", nil, Succeeded)
	}
	return nil
}

// applyFIFO fails, in each message group, every message after the group's
// first failure, so that order is kept when they come back.
func applyFIFO(items []*item, v []verdict) {
	var failedGroups map[string]error
	for i, it := range items {
		g := it.msg.GroupID()
		if err, ok := failedGroups[g]; ok {
			if v[i].outcome != FailedRetry && v[i].outcome != Released {
				// Not wrapped: this message did not fail itself, so it must not
				// be dead-lettered for the earlier one's error.
				v[i] = verdict{outcome: FailedRetry, stage: "fifo", err: fmt.Errorf("an earlier message of group %q failed: %v", g, err)}
			}
			continue
		}
		if v[i].outcome == FailedRetry || v[i].outcome == Released {
			if failedGroups == nil {
				failedGroups = map[string]error{}
			}
			failedGroups[g] = v[i].err
		}
	}
}

// finishBatch settles a batch by its verdicts and frees its slot.
func (p *Pipe) finishBatch(ctx context.Context, items []*item, v []verdict, targetErr error, del *deleter, start time.Time) {
	fifo := p.info.FIFO
	if fifo {
		applyFIFO(items, v)
	}
	var toDelete, toFail, toRelease, toDead []*item
	var deadV []verdict
	failed := 0
	throttled := IsThrottled(targetErr)
	for i, it := range items {
		switch v[i].outcome {
		case Succeeded:
			p.met.delivered.Inc()
			toDelete = append(toDelete, it)
		case Filtered:
			p.met.filtered.Inc()
			toDelete = append(toDelete, it)
		case Released:
			toRelease = append(toRelease, it)
		default:
			failed++
			throttled = throttled || IsThrottled(v[i].err)
			p.countFailure(v[i].stage)
			p.exec.itemFailed(ctx, it.msg, v[i].stage, v[i].err)
			if p.deadLetterable(v[i].err) {
				toDead = append(toDead, it)
				deadV = append(deadV, v[i])
				continue
			}
			toFail = append(toFail, it)
		}
	}
	switch {
	case targetErr != nil:
		p.met.execFailed.Inc()
		p.exec.batchFailed(ctx, len(items), targetErr)
	case failed > 0:
		p.met.execPartial.Inc()
	}
	p.exec.batchDone(ctx, len(items), len(toDelete), failed, time.Since(start))
	if p.opt.DryRun {
		// Nothing is deleted: what would be is kept hidden (heartbeat) and
		// released when the pipe stops.
		toDelete = nil
	}
	del.add(toDelete)
	settleCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if len(toFail) > 0 && !p.opt.DryRun { // a dry run keeps them hidden too
		if b := p.opt.RetryBackoff; b != nil {
			p.delayFailed(settleCtx, toFail, *b)
		} else {
			p.untrack(toFail)
		}
	}
	if len(toDead) > 0 {
		p.deadLetter(settleCtx, toDead, deadV, del)
	}
	if len(toRelease) > 0 {
		p.changeVisibility(settleCtx, toRelease, 0)
		p.met.released.Add(float64(len(toRelease)))
		p.untrack(toRelease)
	}

	p.mu.Lock()
	p.inflight--
	if fifo {
		for _, it := range items {
			delete(p.busy, it.msg.GroupID())
		}
		// Messages of a failed group received meanwhile must not overtake
		// the failed one: give them back too.
		var held []*item
		for i, it := range items {
			if v[i].outcome == FailedRetry || v[i].outcome == Released {
				if q := p.groups[it.msg.GroupID()]; q != nil && len(q.items) > 0 {
					held = append(held, q.items...)
					p.pending -= len(q.items)
					q.items = nil
				}
			}
		}
		if len(held) > 0 {
			p.mu.Unlock()
			p.changeVisibility(settleCtx, held, 0)
			p.met.released.Add(float64(len(held)))
			p.untrack(held)
			p.mu.Lock()
		}
	}
	p.ctl.batchDone(targetErr != nil || failed == len(items) && failed > 0, throttled)
	p.mu.Unlock()
	p.signal()
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

// delayFailed gives failed items their retry backoff as visibility.
func (p *Pipe) delayFailed(ctx context.Context, items []*item, b Backoff) {
	byDelay := map[time.Duration][]*item{}
	for _, it := range items {
		d := b.Delay(it.msg.ReceiveCount())
		byDelay[d] = append(byDelay[d], it)
	}
	for d, group := range byDelay {
		p.changeVisibility(ctx, group, d)
	}
	p.untrack(items)
}

func (p *Pipe) changeVisibility(ctx context.Context, items []*item, d time.Duration) {
	msgs := make([]*Message, len(items))
	for i, it := range items {
		msgs[i] = it.msg
	}
	if err := p.opt.Source.ChangeVisibility(ctx, msgs, d); err != nil {
		p.log.Error("changing visibility failed; the messages come back after their current visibility timeout",
			"error", err, "visibility", d.String())
	}
}

// deleter gathers the messages to delete across batches and deletes them
// in calls of up to 10, waiting at most deleteLinger for a call to fill.
type deleter struct {
	p    *Pipe
	in   chan []*item
	once sync.Once
	done chan struct{}
}

func newDeleter(p *Pipe) *deleter {
	return &deleter{p: p, in: make(chan []*item, 1024), done: make(chan struct{})}
}

func (d *deleter) add(items []*item) {
	if len(items) > 0 {
		d.in <- items
	}
}

// close stops taking work; run returns once everything given is deleted.
func (d *deleter) close() {
	d.once.Do(func() { close(d.in) })
	<-d.done
}

func (d *deleter) run(ctx context.Context) {
	defer close(d.done)
	// Deletes must go through even when the pipe's work is cut short.
	ctx = context.WithoutCancel(ctx)
	var flushes conc.WaitGroup
	defer flushes.Wait()
	sem := make(chan struct{}, 64)
	flush := func(batch []*item) {
		sem <- struct{}{}
		flushes.Go(func() {
			defer func() { <-sem }()
			d.delete(ctx, batch)
		})
	}
	var buf []*item
	var linger <-chan time.Time
	for {
		select {
		case items, ok := <-d.in:
			if !ok {
				if len(buf) > 0 {
					flush(buf)
				}
				return
			}
			buf = append(buf, items...)
			for len(buf) >= MaxReceive {
				flush(buf[:MaxReceive:MaxReceive])
				buf = buf[MaxReceive:]
			}
			if len(buf) > 0 && linger == nil {
				linger = time.After(deleteLinger)
			} else if len(buf) == 0 {
				linger = nil
			}
		case <-linger:
			linger = nil
			if len(buf) > 0 {
				flush(buf)
				buf = nil
			}
		}
	}
}

func (d *deleter) delete(ctx context.Context, items []*item) {
	p := d.p
	msgs := make([]*Message, len(items))
	for i, it := range items {
		msgs[i] = it.msg
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := p.opt.Source.Delete(ctx, msgs)
	failed, all := settleFailures(err)
	n := len(items)
	if all {
		n = 0
	} else {
		n -= len(failed)
	}
	p.met.deleted.Add(float64(n))
	if err != nil {
		bad := len(items) - n
		p.met.deleteFailures.Add(float64(bad))
		var se *SettleError
		if errors.As(err, &se) && se.SenderFault {
			p.met.possibleDupes.Add(float64(bad))
		}
		p.log.Error("deleting messages failed; they will be delivered again", "error", err, "messages", bad)
	}
	p.untrack(items)
}

// execLog writes the execution logs at Pipes' levels: off, error (failures
// only), info (and batch summaries), trace (and every event).
type execLog struct {
	log     *slog.Logger
	level   int
	payload bool
}

const (
	levelOff = iota
	levelError
	levelInfo
	levelTrace
)

func newExecLog(log *slog.Logger, level string, payload bool) execLog {
	l := levelError
	switch level {
	case "off":
		l = levelOff
	case "info":
		l = levelInfo
	case "trace":
		l = levelTrace
	}
	return execLog{log: log, level: l, payload: payload}
}

func (e execLog) invoking(ctx context.Context, events []*Event) {
	if e.level < levelTrace {
		return
	}
	for _, ev := range events {
		attrs := []any{"message_id", ev.ID(), "receive_count", ev.Message.ReceiveCount()}
		if e.payload {
			attrs = append(attrs, "payload", string(ev.Payload))
		}
		e.log.Log(ctx, slog.LevelDebug, "target invocation", attrs...)
	}
}

func (e execLog) itemFailed(ctx context.Context, m *Message, stage string, err error) {
	if e.level < levelError {
		return
	}
	e.log.Log(ctx, slog.LevelError, "message failed", "message_id", m.MessageID, "stage", stage,
		"receive_count", m.ReceiveCount(), "error", err)
}

func (e execLog) batchFailed(ctx context.Context, n int, err error) {
	if e.level < levelError {
		return
	}
	e.log.Log(ctx, slog.LevelError, "batch failed", "messages", n, "error", err)
}

func (e execLog) batchDone(ctx context.Context, n, ok, failed int, took time.Duration) {
	if e.level < levelInfo {
		return
	}
	e.log.Log(ctx, slog.LevelInfo, "batch done", "messages", n, "settled_ok", ok, "failed", failed, "duration", took.String())
}
