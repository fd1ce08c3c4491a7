// Package awsbatch is the kit of pipes' AWS batch targets (SQS, SNS,
// EventBridge, Kinesis, Firehose): a target says how to build one request
// entry from an event and how to make one call of the service's batch API
// and read its answer; the kit does the rest, the same way for every
// service:
//
//   - entries are cut into calls by the API's limits (entries, bytes per
//     call, bytes per entry: an entry over its own limit fails alone,
//     permanently, unsent);
//   - calls run up to MaxParallel at a time, or in batch order when
//     Ordered (FIFO), where the first failed call stops the batch;
//   - a call refused as a whole is classified once (Throttled, Permanent
//     or retryable); a refusal that may be one entry's fault is retried
//     one entry per call, so that one bad entry fails alone;
//   - entries the service refuses, or its answer does not mention, fail
//     just their events, as item failures keyed by message id;
//   - when every call failed as a whole, Deliver returns that error
//     (Throttled when any call was throttled, so that the pipe slows down).
//
// A new AWS batch target is then its Config, its entry shape and its call.
package awsbatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/pipesproject/pipes/internal/keyerr"
	"github.com/pipesproject/pipes/internal/kit/awsclient"
	"github.com/pipesproject/pipes/internal/kit/batching"
	"github.com/pipesproject/pipes/pipe"
)

// Defaults of a batch target's Timeout and MaxParallel.
const (
	DefaultTimeout     = 30 * time.Second
	DefaultMaxParallel = 8
)

// Limits are a batch API's limits on one call.
type Limits struct {
	// Entries is the most entries one call carries.
	Entries int
	// Bytes is the most bytes of entries one call carries, as the entries'
	// Size weighs them. An entry larger than that goes alone, and the
	// service decides (unless EntryBytes refuses it first).
	Bytes int
	// EntryBytes, when above 0, is the most bytes of one entry: a larger
	// one fails, permanently, without being sent.
	EntryBytes int
}

// Split cuts entries into calls within l's Entries and Bytes; the calls
// share entries' backing array.
func Split[R any](entries []Entry[R], l Limits) [][]Entry[R] {
	return batching.Split(entries, l.Entries, l.Bytes, func(e Entry[R]) int { return e.Size })
}

// Entry is one request entry of a call and the event it came from.
type Entry[R any] struct {
	// Ev is the event's index in the batch; the kit sets it.
	Ev int
	// Req is the request entry, in the service SDK's type.
	Req R
	// Size is the entry's weight against Limits, counted as the service
	// counts it.
	Size int
}

// Reply is what a successful call's answer says of its entries.
type Reply struct {
	// Errs holds, by position in the call, each entry's error: nil when
	// the service took it, the entry's classified error when it refused
	// it, Unanswered when the answer does not mention it. It has one
	// element per entry of the call; a shorter Errs leaves the rest
	// Unanswered.
	Errs []error
	// Unknown are the ids of refusals that name no entry of the call
	// (logged, then ignored).
	Unknown []string
}

// Unanswered marks, in a Reply, an entry the answer does not mention: it
// is not known to be sent and fails, retryable.
var Unanswered = errors.New("the answer does not mention this entry")

// ID is the id of the entry of the batch's i-th event, for the APIs that
// name entries by id (SQS, SNS): unique within a call.
func ID(i int) string { return strconv.Itoa(i) }

// Opt is an optional string field of a request entry: nil for "".
func Opt(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// IDs are the ids of a call's entries, by position, for ByID.
func IDs[R any](reqs []R, id func(R) *string) []string {
	ids := make([]string, len(reqs))
	for i, r := range reqs {
		if p := id(r); p != nil {
			ids[i] = *p
		}
	}
	return ids
}

// ByID reads an answer that names entries by id (SQS's and SNS's
// Successful and Failed lists): ids are the call's entry ids, by position;
// sid and fid read the ids of the answer's lists; refused classifies one
// refusal.
func ByID[S, F any](ids []string, succeeded []S, sid func(S) string, failed []F, fid func(F) string, refused func(F) error) Reply {
	pos := make(map[string]int, len(ids))
	r := Reply{Errs: make([]error, len(ids))}
	for i, id := range ids {
		pos[id] = i
		r.Errs[i] = Unanswered
	}
	for _, s := range succeeded {
		if i, ok := pos[sid(s)]; ok {
			r.Errs[i] = nil
		}
	}
	for _, f := range failed {
		i, ok := pos[fid(f)]
		if !ok {
			r.Unknown = append(r.Unknown, fid(f))
			continue
		}
		r.Errs[i] = refused(f)
	}
	return r
}

// ByPosition reads an answer whose result entries answer the request
// entries by position (EventBridge, Kinesis, Firehose): refused returns
// the classified error of the result entry of the call's i-th entry (of
// n), nil when it was taken. Entries past the answer's end are
// Unanswered; answers past n are ignored.
func ByPosition[A any](n int, answers []A, refused func(i int, a A) error) Reply {
	r := Reply{Errs: make([]error, n)}
	for i := range r.Errs {
		r.Errs[i] = Unanswered
		if i < len(answers) {
			r.Errs[i] = refused(i, answers[i])
		}
	}
	return r
}

// Spec says how a target calls one AWS batch API.
type Spec[R any] struct {
	// Service names the service in errors and logs: "SQS".
	Service string
	// Resource names where the entries go (a queue URL, a stream name),
	// in errors and logs; ResourceKey is its log key ("queue").
	Resource, ResourceKey string
	// Describe says what a call of n entries does, for errors: "sending
	// 3 messages to https://…/orders".
	Describe func(n int) string
	// Limits are the API's.
	Limits Limits
	// Build makes the entry of events[i] (its Req and Size); its error
	// fails that event alone.
	Build func(i int, ev *pipe.Event) (Entry[R], error)
	// Call makes one call with reqs and reads its answer. Its error is the
	// call's, not yet classified. It is called from several goroutines at
	// once when MaxParallel is above 1.
	Call func(ctx context.Context, reqs []R) (Reply, error)
	// Classifier classifies a call's error.
	Classifier awsclient.Classifier
	// EntrySpecific are the API error codes of a refused call that may be
	// the fault of one of its entries rather than of the resource or the
	// caller's rights: such a call of several entries is retried one entry
	// per call.
	EntrySpecific map[string]bool
	// Timeout bounds each call, SDK retries included; default
	// DefaultTimeout.
	Timeout time.Duration
	// MaxParallel bounds the calls in flight per Deliver; default
	// DefaultMaxParallel. Ordered makes it 1.
	MaxParallel int
	// Ordered (a FIFO resource) makes calls one after another in batch
	// order and stops at the first that is not clean: the events after it
	// fail unsent.
	Ordered bool
	// Logger receives the kit's warnings; nil discards them.
	Logger *slog.Logger
}

// Batch delivers batches of events through one batch API. It is read-only
// once built and safe for concurrent use when its Spec's functions are.
type Batch[R any] struct {
	spec  Spec[R]
	calls batching.Calls[Entry[R]]
}

// New makes the Batch of s, with its defaults applied.
func New[R any](s Spec[R]) *Batch[R] {
	if s.Timeout == 0 {
		s.Timeout = DefaultTimeout
	}
	if s.MaxParallel == 0 {
		s.MaxParallel = DefaultMaxParallel
	}
	if s.Ordered {
		s.MaxParallel = 1
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	b := &Batch[R]{spec: s}
	b.calls = batching.Calls[Entry[R]]{
		Build: b.build(s.Build), Split: func(es []Entry[R]) [][]Entry[R] { return Split(es, s.Limits) },
		MaxParallel: s.MaxParallel, Ordered: s.Ordered, Send: b.send, Skip: b.skip,
	}
	return b
}

// Check reports what is wrong with a batch target's common settings.
func Check(timeout time.Duration, maxParallel int) []error {
	var problems []error
	if timeout < 0 {
		problems = append(problems, keyerr.New("timeout", fmt.Errorf("timeout %s is negative", timeout)))
	}
	if maxParallel < 0 {
		problems = append(problems, fmt.Errorf("max parallel %d is negative", maxParallel))
	}
	return problems
}

// Timeout is the bound of each call, for work a target does around its
// calls (an upload before them).
func (b *Batch[R]) Timeout() time.Duration { return b.spec.Timeout }

// MaxParallel is the bound of calls in flight per Deliver, for work a
// target does around its calls.
func (b *Batch[R]) MaxParallel() int { return b.spec.MaxParallel }

// Deliver builds one entry per event, makes the calls and blocks until
// every call has returned, a call's timeout has passed or ctx is done. An
// empty batch makes no call.
//
// Events whose entry the service refused, or that could not be built, come
// back as item failures keyed by their message id; the others were taken.
// When every call failed as a whole, Deliver returns that error instead
// (Throttled when any call was throttled), wrapped with Describe.
func (b *Batch[R]) Deliver(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
	return b.DeliverBuilt(ctx, events, nil)
}

// DeliverBuilt is Deliver with build instead of the Spec's Build, for
// entries that depend on work done per batch first (payloads offloaded to
// S3); nil is the Spec's.
func (b *Batch[R]) DeliverBuilt(ctx context.Context, events []*pipe.Event, build func(i int, ev *pipe.Event) (Entry[R], error)) (pipe.Result, error) {
	calls := b.calls
	if build != nil {
		calls.Build = b.build(build)
	}
	res, err := calls.Deliver(ctx, events)
	if err != nil {
		return pipe.Result{}, fmt.Errorf("%s: %w", b.spec.Describe(len(events)), err)
	}
	return res, nil
}

// build wraps a Spec's Build: it sets the entry's event index and refuses
// an entry over the API's limit of its own.
func (b *Batch[R]) build(build func(int, *pipe.Event) (Entry[R], error)) func(int, *pipe.Event) (Entry[R], error) {
	return func(i int, ev *pipe.Event) (Entry[R], error) {
		e, err := build(i, ev)
		if err != nil {
			return Entry[R]{}, err
		}
		if max := b.spec.Limits.EntryBytes; max > 0 && e.Size > max {
			return Entry[R]{}, pipe.Permanent(fmt.Errorf("message %s: its entry of %d bytes is over %s's limit of %d bytes per entry", ev.ID(), e.Size, b.spec.Service, max))
		}
		e.Ev = i
		return e, nil
	}
}

// skip fails entries not sent because an earlier call of their ordered
// batch failed.
func (b *Batch[R]) skip(rest []Entry[R], errs []error) {
	for _, e := range rest {
		errs[e.Ev] = fmt.Errorf("not sent to %s: an earlier message of this FIFO batch failed", b.spec.Resource)
	}
}

// send makes one call for chunk and records each entry's error in errs.
func (b *Batch[R]) send(ctx context.Context, chunk []Entry[R], errs []error) batching.Outcome {
	reqs := make([]R, len(chunk))
	for i, e := range chunk {
		reqs[i] = e.Req
	}
	callCtx, cancel := context.WithTimeout(ctx, b.spec.Timeout)
	defer cancel()
	reply, err := b.spec.Call(callCtx, reqs)
	if err != nil {
		err = b.spec.Classifier.Classify(err)
		if len(chunk) > 1 && awsclient.EntrySpecific(err, b.spec.EntrySpecific) && ctx.Err() == nil {
			return b.calls.OneByOne(ctx, chunk, errs)
		}
		for _, e := range chunk {
			errs[e.Ev] = fmt.Errorf("%s: %w", b.spec.Describe(len(chunk)), err)
		}
		return batching.Outcome{CallErr: err}
	}
	for _, id := range reply.Unknown {
		b.spec.Logger.Warn(b.spec.Service+" answered a failure for an entry that was not sent", b.spec.ResourceKey, b.spec.Resource, "entry", id)
	}
	var o batching.Outcome
	for i, e := range chunk {
		err := Unanswered
		if i < len(reply.Errs) {
			err = reply.Errs[i]
		}
		switch {
		case err == nil:
			o.Sent = true
		case errors.Is(err, Unanswered):
			o.EntryFailed = true
			errs[e.Ev] = fmt.Errorf("%s: %s's answer does not mention entry %d of %d", b.spec.Describe(len(chunk)), b.spec.Service, i+1, len(chunk))
		default:
			o.EntryFailed = true
			errs[e.Ev] = err
		}
	}
	return o
}
