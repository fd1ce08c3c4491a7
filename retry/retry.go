// Package retry retries deliveries inside the runner, the way SNS retries
// deliveries to HTTP/S subscriptions: a Policy says how many attempts and
// how long to wait between them, and Wrap makes a pipe.Target that retries
// what failed before the items go back to the queue.
//
// Errors are classified by their markers: pipe.Permanent errors (client
// errors: 4xx other than 408/429, invalid request, access denied) are never
// retried; everything else is (server errors, timeouts, connection errors,
// and pipe.Throttled ones).
package retry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/pipesproject/pipes/internal/backoff"
	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

// The backoff functions of SNS delivery policies.
const (
	Linear      = "linear"
	Arithmetic  = "arithmetic"
	Geometric   = "geometric"
	Exponential = "exponential"
)

// geometricFloor stands in for a MinDelay of 0 in the geometric function,
// whose ratio max/min needs a start above zero.
const geometricFloor = time.Millisecond

// Policy is a delivery retry policy (a target's `retry:` block). The zero
// value makes one attempt and never retries. A Policy is a plain value,
// safe to copy and to use from many goroutines.
type Policy struct {
	// MaxAttempts is the number of deliveries of an item, the first one
	// included: 1 (or less) never retries.
	MaxAttempts int
	// Backoff names the function that spreads the delays from MinDelay to
	// MaxDelay: linear, arithmetic, geometric or exponential ("" is
	// exponential, pipes' default). See Delay for the formulas.
	Backoff string
	// MinDelay is the delay before the first retry.
	MinDelay time.Duration
	// MaxDelay is the delay before the last retry, and the cap of every
	// delay. A MaxDelay below MinDelay lowers MinDelay to it.
	MaxDelay time.Duration
	// MaxEventAge, when above 0, stops retrying items whose message was
	// sent (SQS SentTimestamp) longer ago than this.
	MaxEventAge time.Duration
	// Jitter draws each delay at random in [d/2, d] (equal jitter), so that
	// batches failing together do not retry together.
	Jitter bool
}

// Validate reports every problem of the policy at once; nil when it is
// usable. Wrap and Delay accept any policy (they clamp), so this is for
// configuration checks.
func (p Policy) Validate() error {
	var errs []error
	switch p.Backoff {
	case "", Linear, Arithmetic, Geometric, Exponential:
	default:
		errs = append(errs, fmt.Errorf("backoff %q is not linear, arithmetic, geometric or exponential", p.Backoff))
	}
	if p.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("max_attempts %d is below 1", p.MaxAttempts))
	}
	if p.MinDelay < 0 || p.MaxDelay < 0 || p.MaxEventAge < 0 {
		errs = append(errs, errors.New("delays and max_event_age must not be negative"))
	}
	if p.MaxDelay < p.MinDelay {
		errs = append(errs, fmt.Errorf("max_delay %s is below min_delay %s", p.MaxDelay, p.MinDelay))
	}
	return errors.Join(errs...)
}

// Delay is the wait before retry number attempt (1 is the first retry,
// after the first delivery failed). It never blocks.
//
// As in SNS's backoff phase, the MaxAttempts-1 retries go from MinDelay
// (retry 1) to MaxDelay (the last retry) along the named function. AWS
// publishes only a graph of the four functions, not their formulas; pipes
// uses these, with k = attempt-1, K = MaxAttempts-2 (k runs 0..K), and
// min, max the clamped delays:
//
//	linear:      min + (max-min) · k/K
//	arithmetic:  min + (max-min) · k(k+1) / (K(K+1))      increments grow 1, 2, 3, …
//	geometric:   min · (max/min)^(k/K)                    a constant ratio (min 0 counts as 1ms)
//	exponential: min + (max-min) · (2^k − 1) / (2^K − 1)  increments double
//
// With a single retry (K = 0) the delay is MinDelay. Attempts past the last
// retry get MaxDelay (SNS's post-backoff phase); attempt < 1 gets 0. The
// result is in [0, MaxDelay] and, without Jitter, never decreases with
// attempt. With Jitter it is drawn in [d/2, d].
func (p Policy) Delay(attempt int) time.Duration {
	if attempt < 1 {
		return 0
	}
	lo, hi := max(p.MinDelay, 0), max(p.MaxDelay, 0)
	lo = min(lo, hi)
	K := p.MaxAttempts - 2
	var d time.Duration
	switch {
	case attempt-1 > K: // past the last retry (or none planned): the cap
		d = hi
	case K == 0:
		d = lo
	default:
		d = interpolate(p.Backoff, lo, hi, attempt-1, K)
	}
	d = min(max(d, 0), hi)
	if p.Jitter && d > 1 {
		half := d / 2
		d = d - half + time.Duration(rand.Int64N(int64(half)+1))
	}
	return d
}

// interpolate places step k of 0..K between lo and hi (lo <= hi, K >= 1).
func interpolate(fn string, lo, hi time.Duration, k, K int) time.Duration {
	span := float64(hi - lo)
	var f float64
	switch fn {
	case Linear:
		f = float64(k) / float64(K)
	case Arithmetic:
		f = float64(k) * float64(k+1) / (float64(K) * float64(K+1))
	case Geometric:
		start := max(lo, min(geometricFloor, hi))
		if start <= 0 {
			return 0
		}
		v := float64(start) * math.Pow(float64(hi)/float64(start), float64(k)/float64(K))
		return durationOf(v, lo, hi)
	default: // exponential
		f = (math.Exp2(float64(k)) - 1) / (math.Exp2(float64(K)) - 1)
	}
	return durationOf(float64(lo)+span*f, lo, hi)
}

// durationOf rounds v to a duration within [lo, hi].
func durationOf(v float64, lo, hi time.Duration) time.Duration {
	switch {
	case math.IsNaN(v) || v <= float64(lo):
		return lo
	case v >= float64(hi):
		return hi
	}
	return time.Duration(v)
}

// Options are Wrap's hooks. The zero value is ready to use.
type Options struct {
	// Logger receives a debug line per retry; nil discards.
	Logger *slog.Logger
	// OnRetry, when set, is called before each retry with the number of
	// events retried (a metric hook). It must be safe for concurrent use.
	OnRetry func(n int)
	// Now tells the time, for MaxEventAge; nil is time.Now.
	Now func() time.Time
	// Sleep waits d or until ctx is done (then it returns ctx's error); nil
	// uses a timer. Tests give a fake.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Wrap returns a target that delivers through t and retries failures by p:
//
//   - A whole-batch error that is not pipe.Permanent retries the whole batch
//     after Delay; item failures that are not Permanent retry those items
//     only, as a smaller batch (every event of a failed message goes again).
//   - pipe.Permanent errors are returned at once, unchanged: a whole-batch
//     one on the first delivery as the whole-batch error, later ones (and
//     item failures) as item failures.
//   - When the attempts run out, or an item's message is older than
//     MaxEventAge, its last error is returned as an item failure wrapped
//     with pipe.Exhausted(err, attempts), so the pipe can dead-letter it. A
//     batch that failed whole on every attempt comes back as one exhausted
//     item failure per message and a nil error, not as a whole-batch error;
//     an item whose last attempt failed whole is marked pipe.BatchFailure
//     too (the pipe takes it for an outage, not a verdict on the item),
//     unless it was too old to be retried: that one is marked pipe.TooOld,
//     a verdict (an event held through an outage honours max_event_age).
//   - FIFO events (a non-empty Message.GroupID; a batch holds a group's
//     messages in order) follow "first failure fails the rest of the
//     group": once a message of a group fails, every later message of that
//     group in the batch counts as failed with it, whatever its own answer.
//     A retry delivers the failed message again together with all of them,
//     in batch order; when it ends failed (Permanent, Exhausted, or cut by
//     ctx), each of them is returned as an item failure matching
//     ErrEarlierInGroupFailed, neither Permanent nor Exhausted, so that it
//     goes back to the queue and is never dead-lettered for the other
//     message's error. Standard events (group "") are retried one by one
//     as above.
//   - If any attempt was throttled, every failure returned that is not
//     Permanent still satisfies pipe.IsThrottled (ErrEarlierInGroupFailed
//     ones excepted).
//   - When ctx is done, retrying stops: what failed is returned as is (not
//     Exhausted); a whole-batch error of the first delivery stays a
//     whole-batch error, so that the pipe releases the batch.
//
// Item failures that name no event of the batch are passed through. The
// returned target blocks while it waits between attempts, is safe for
// concurrent use when t is, and allocates nothing more than t when the
// first delivery succeeds.
func Wrap(t pipe.Target, p Policy, opts Options) pipe.Target {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Sleep == nil {
		opts.Sleep = backoff.Sleep
	}
	r := &retrier{t: t, p: p, o: opts}
	if _, ok := t.(pipe.PayloadAppender); ok {
		// The retrier never reads payloads: it keeps t's ability to be
		// handed records not encoded yet (one copy of each body).
		return appendingRetrier{r}
	}
	return r
}

// appendingRetrier is a retrier of a pipe.PayloadAppender target.
type appendingRetrier struct{ *retrier }

// AppendsPayloads marks pipe.PayloadAppender.
func (appendingRetrier) AppendsPayloads() {}

// FollowConcurrency tells t the pipe's concurrency when it follows it
// (pipe.ConcurrencyFollower).
func (r *retrier) FollowConcurrency(n int) {
	if f, ok := r.t.(pipe.ConcurrencyFollower); ok {
		f.FollowConcurrency(n)
	}
}

type retrier struct {
	t pipe.Target
	p Policy
	o Options
}

var _ pipe.Target = (*retrier)(nil)

// Deliver delivers events, retrying as Wrap says.
func (r *retrier) Deliver(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
	res, err := r.t.Deliver(ctx, events)
	if err == nil && len(res.Failures) == 0 {
		return res, nil
	}
	if err != nil && (core.IsPermanent(err) || ctx.Err() != nil) {
		return pipe.Result{}, err
	}
	return r.retry(ctx, events, res, err)
}

// run is the state of one Deliver that needs retries.
type run struct {
	final     []pipe.ItemFailure
	throttled bool
}

// retry goes on after a first delivery of events that failed (res, err).
func (r *retrier) retry(ctx context.Context, events []*pipe.Event, res pipe.Result, err error) (pipe.Result, error) {
	var st run
	pending := events
	for attempt := 1; ; attempt++ {
		o := st.classify(pending, res, err)
		if r.p.MaxEventAge > 0 && len(o.again) > 0 {
			now := r.o.Now()
			for _, ev := range pending {
				cause, ok := o.again[ev.ID()]
				if !ok || !tooOld(ev.Message, now, r.p.MaxEventAge) {
					continue
				}
				delete(o.again, ev.ID())
				// TooOld: a verdict even after a whole failure, so that an
				// event held through an outage is not held for ever.
				o.setFinal(ev.ID(), core.Exhausted(core.TooOld(fmt.Errorf("not retried: message older than max_event_age %s: %w", r.p.MaxEventAge, st.mark(cause))), attempt))
			}
		}
		o.chainGroups(pending)
		if len(o.again) == 0 {
			st.record(pending, o, nil)
			break
		}
		if ctx.Err() != nil {
			st.record(pending, o, st.mark)
			break
		}
		if attempt >= r.p.MaxAttempts {
			st.record(pending, o, func(e error) error { return core.Exhausted(st.mark(e), attempt) })
			break
		}
		next := pending[:0:0]
		for _, ev := range pending {
			if o.retried(ev.ID()) {
				next = append(next, ev)
			}
		}
		d := r.p.Delay(attempt)
		if r.o.OnRetry != nil {
			r.o.OnRetry(len(next))
		}
		r.o.Logger.DebugContext(ctx, "retrying delivery", "events", len(next), "retry", attempt, "delay", d.String())
		if ctx.Err() == nil {
			_ = r.o.Sleep(ctx, d) // a cut sleep shows as ctx.Err below
		}
		if ctx.Err() != nil {
			if attempt == 1 && err != nil {
				return pipe.Result{}, st.mark(err) // the first delivery failed whole
			}
			st.record(pending, o, st.mark)
			break
		}
		st.record(pending, o, nil) // the failures already final
		pending = next
		res, err = r.t.Deliver(ctx, pending)
	}
	return pipe.Result{Failures: st.final}, nil
}

// outcome is what one delivery left of pending, by message id.
type outcome struct {
	again   map[string]error  // to retry: the last error
	final   map[string]error  // failed for good
	follows map[string]string // later events of a FIFO group: the id of the group's first failure
}

func (o *outcome) setFinal(id string, err error) {
	if o.final == nil {
		o.final = map[string]error{}
	}
	o.final[id] = err
}

// retried reports whether the next attempt delivers message id again: it
// failed retryably, or it follows such a failure in its FIFO group.
func (o *outcome) retried(id string) bool {
	if _, ok := o.again[id]; ok {
		return true
	}
	head, ok := o.follows[id]
	if !ok {
		return false
	}
	_, ok = o.again[head]
	return ok
}

// chainGroups applies "first failure fails the rest of the group" to the
// FIFO events of pending (a non-empty GroupID, in group order): every
// message after the first failed one of its group, whatever its own
// outcome, follows that one: it goes again with it, or fails with it.
// Standard events (group "") are left as they are.
func (o *outcome) chainGroups(pending []*pipe.Event) {
	if len(o.again) == 0 && len(o.final) == 0 {
		return
	}
	var heads map[string]string // group -> its first failed message
	for _, ev := range pending {
		g := ev.Message.GroupID()
		if g == "" {
			continue
		}
		id := ev.ID()
		head, ok := heads[g]
		if !ok {
			_, again := o.again[id]
			_, final := o.final[id]
			if again || final {
				if heads == nil {
					heads = map[string]string{}
				}
				heads[g] = id
			}
			continue
		}
		if head == id {
			continue
		}
		delete(o.again, id)
		delete(o.final, id)
		if o.follows == nil {
			o.follows = map[string]string{}
		}
		o.follows[id] = head
	}
}

// ErrEarlierInGroupFailed is matched (errors.Is) by the failure of a FIFO
// event that did not fail itself: an earlier message of its group did, and
// the group's order forbids delivering it first. Such a failure is neither
// pipe.Permanent nor pipe.Exhausted, so the message goes back to the queue,
// never to a dead-letter target.
var ErrEarlierInGroupFailed = errors.New("an earlier message of its FIFO group failed")

// groupError is the failure of a message that follows a failed one in its
// FIFO group. It does not wrap the cause (only quotes it), so that the
// cause's markers (Permanent, Exhausted, Throttled) do not apply to it.
type groupError struct {
	group, head string
	cause       error
}

func (e *groupError) Error() string {
	return fmt.Sprintf("not delivered: message %s, earlier in FIFO group %q, failed: %v", e.head, e.group, e.cause)
}

func (e *groupError) Is(target error) bool { return target == ErrEarlierInGroupFailed }

// classify reads one delivery's outcome over pending: Permanent failures
// become final, failures of unknown ids are passed through, the rest are
// to retry.
func (st *run) classify(pending []*pipe.Event, res pipe.Result, err error) outcome {
	var o outcome
	if err != nil {
		st.throttled = st.throttled || core.IsThrottled(err)
		all := make(map[string]error, len(pending))
		permanent := core.IsPermanent(err)
		if !permanent {
			// Handed back per item when the attempts run out: the pipe
			// must still see an outage there, not a verdict on each item.
			err = core.BatchFailure(err)
		}
		for _, ev := range pending {
			all[ev.ID()] = err
		}
		if permanent {
			o.final = all
		} else {
			o.again = all
		}
		return o
	}
	if len(res.Failures) == 0 {
		return o
	}
	ids := make(map[string]bool, len(pending))
	for _, ev := range pending {
		ids[ev.ID()] = true
	}
	o.again = make(map[string]error, len(res.Failures))
	for _, f := range res.Failures {
		cause := f.Err
		if cause == nil {
			cause = errors.New("reported failed by the target")
		}
		st.throttled = st.throttled || core.IsThrottled(cause)
		switch _, final := o.final[f.ID]; {
		case !ids[f.ID]:
			st.final = append(st.final, f)
		case final: // already final
		case core.IsPermanent(cause):
			delete(o.again, f.ID)
			o.setFinal(f.ID, cause)
		default:
			o.again[f.ID] = cause
		}
	}
	return o
}

// record records the final failures of o once each, in the order of
// pending: o.final as they are, o.again with wrap applied when wrap is not
// nil (nil: they are retried), and the events following either in their
// FIFO group with a groupError.
func (st *run) record(pending []*pipe.Event, o outcome, wrap func(error) error) {
	if len(o.final) == 0 && (wrap == nil || len(o.again) == 0) {
		return
	}
	done := make(map[string]error, len(pending)) // id -> its final error, nil when none
	for _, ev := range pending {
		id := ev.ID()
		if _, ok := done[id]; ok {
			continue
		}
		var err error
		if e, ok := o.final[id]; ok {
			err = e
		} else if e, ok := o.again[id]; ok && wrap != nil {
			err = wrap(e)
		} else if head, ok := o.follows[id]; ok && done[head] != nil {
			err = &groupError{group: ev.Message.GroupID(), head: head, cause: done[head]}
		}
		done[id] = err
		if err != nil {
			st.fail(id, err)
		}
	}
}

// fail records a final failure.
func (st *run) fail(id string, err error) {
	st.final = append(st.final, pipe.ItemFailure{ID: id, Err: err})
}

// mark keeps the throttling of an earlier attempt visible on err.
func (st *run) mark(err error) error {
	if st.throttled && !core.IsThrottled(err) && !core.IsPermanent(err) {
		return pipe.Throttled(fmt.Errorf("%w (throttled on an earlier attempt)", err))
	}
	return err
}

// tooOld reports whether m was sent longer than maxAge before now. A
// message without a readable SentTimestamp is never too old.
func tooOld(m *source.Message, now time.Time, maxAge time.Duration) bool {
	if m == nil {
		return false
	}
	ms, err := strconv.ParseInt(m.Attributes[source.AttrSentTimestamp], 10, 64)
	if err != nil {
		return false
	}
	return now.Sub(time.UnixMilli(ms)) > maxAge
}
