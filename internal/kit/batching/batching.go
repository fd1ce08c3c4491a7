// Package batching holds what pipes' batch-call targets share (the AWS
// ones through internal/kit/awsbatch): cutting a batch's entries into calls by count and
// bytes, making the calls in order or in parallel, retrying a refused call
// one entry at a time, and turning per-event errors into item failures.
package batching

import (
	"context"
	"sync"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/pipe"
)

// Split cuts entries into calls of at most maxCount entries and maxBytes
// bytes, as size weighs them; an entry larger than maxBytes goes alone.
// The calls share entries' backing array.
func Split[E any](entries []E, maxCount, maxBytes int, size func(E) int) [][]E {
	var chunks [][]E
	start, bytes := 0, 0
	for i, e := range entries {
		n := size(e)
		if i > start && (i-start == maxCount || bytes+n > maxBytes) {
			chunks = append(chunks, entries[start:i])
			start, bytes = i, 0
		}
		bytes += n
	}
	if start < len(entries) {
		chunks = append(chunks, entries[start:])
	}
	return chunks
}

// SplitBy returns a Split that cuts into calls of at most maxCount
// entries and maxBytes bytes, as size weighs them.
func SplitBy[E any](maxCount, maxBytes int, size func(E) int) func([]E) [][]E {
	return func(entries []E) [][]E { return Split(entries, maxCount, maxBytes, size) }
}

// Outcome is what became of one call's entries.
type Outcome struct {
	// Sent is true when the service took at least one entry.
	Sent bool
	// EntryFailed is true when the service refused at least one entry by
	// itself.
	EntryFailed bool
	// CallErr is the error of a call that failed as a whole.
	CallErr error
}

// Clean reports whether no entry and no call failed.
func (o Outcome) Clean() bool { return !o.EntryFailed && o.CallErr == nil }

// add counts one more call in o: o keeps its first call error.
func (o *Outcome) add(one Outcome) {
	o.Sent = o.Sent || one.Sent
	o.EntryFailed = o.EntryFailed || one.EntryFailed
	if o.CallErr == nil {
		o.CallErr = one.CallErr
	}
}

// Calls says how a target delivers a batch in calls that carry several
// entries each. It is read-only once built and safe for concurrent use
// when its functions are.
type Calls[E any] struct {
	// Build makes the entry of events[i]; its error fails that event
	// alone.
	Build func(i int, ev *pipe.Event) (E, error)
	// Split cuts the entries into calls (see Split and SplitBy).
	Split func(entries []E) [][]E
	// MaxParallel bounds the calls in flight; 1 makes them one after
	// another in batch order.
	MaxParallel int
	// Ordered (FIFO) stops at the first call that is not clean: the
	// entries after it are given to Skip instead of being sent.
	Ordered bool
	// Send makes one call for chunk, records each entry's error in errs
	// (by event index) and returns the call's outcome. With MaxParallel
	// above 1 it is called from several goroutines at once.
	Send func(ctx context.Context, chunk []E, errs []error) Outcome
	// Skip records in errs that entries were not sent because an earlier
	// call of an ordered batch failed.
	Skip func(entries []E, errs []error)
}

// Deliver builds the entries of events, makes their calls and blocks until
// every call has returned. It returns the item failures, keyed by message
// id, or, when every call failed as a whole, that error (see BatchError)
// for the caller to wrap. An empty batch makes no call.
func (c Calls[E]) Deliver(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
	if len(events) == 0 {
		return pipe.Result{}, nil
	}
	errs := make([]error, len(events))
	entries := Build(events, errs, c.Build)
	prepFailed := len(entries) < len(events)
	out := c.Run(ctx, c.Split(entries), errs)
	if err := BatchError(out, prepFailed); err != nil {
		return pipe.Result{}, err
	}
	return Result(events, errs), nil
}

// Run makes one call per chunk and returns their outcomes, by chunk. Calls
// are made one after another when MaxParallel is 1 or there is one chunk
// (and stop early when Ordered), else up to MaxParallel at a time. Run
// blocks until every call it started has returned.
func (c Calls[E]) Run(ctx context.Context, chunks [][]E, errs []error) []Outcome {
	out := make([]Outcome, len(chunks))
	if c.MaxParallel == 1 || len(chunks) == 1 {
		for i, chunk := range chunks {
			out[i] = c.Send(ctx, chunk, errs)
			if c.Ordered && !out[i].Clean() {
				for _, rest := range chunks[i+1:] {
					c.Skip(rest, errs)
				}
				break
			}
		}
		return out
	}
	sem := make(chan struct{}, c.MaxParallel)
	var wg sync.WaitGroup
	for i, chunk := range chunks {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i] = c.Send(ctx, chunk, errs)
		})
	}
	wg.Wait()
	return out
}

// OneByOne makes one call per entry of chunk, one after another, so that
// one bad entry fails alone, and merges their outcomes (keeping the first
// call error). When Ordered, the first call that is not clean stops it.
func (c Calls[E]) OneByOne(ctx context.Context, chunk []E, errs []error) Outcome {
	var o Outcome
	for i := range chunk {
		one := c.Send(ctx, chunk[i:i+1], errs)
		o.add(one)
		if c.Ordered && !one.Clean() {
			c.Skip(chunk[i+1:], errs)
			break
		}
	}
	return o
}

// BatchError returns the error a Deliver returns for the whole batch: a
// call error (a Throttled one when any call was throttled, so that the pipe
// slows down) when no call sent an entry and no entry failed by itself,
// prepFailed counting as one; else nil, and the failures are per item.
func BatchError(out []Outcome, prepFailed bool) error {
	var callErr error
	sent, entryFailed := false, prepFailed
	for _, o := range out {
		sent = sent || o.Sent
		entryFailed = entryFailed || o.EntryFailed
		if o.CallErr != nil && (callErr == nil || core.IsThrottled(o.CallErr) && !core.IsThrottled(callErr)) {
			callErr = o.CallErr
		}
	}
	if callErr != nil && !sent && !entryFailed {
		return callErr
	}
	return nil
}

// ByID reads an answer that names the chunk's entries by id (SQS's and
// SNS's Successful and Failed lists; id, sid and fid read the ids).
// refused is called for each entry named in failed, with its failure;
// unknown for each id in failed that names no entry of the chunk; missing
// for each entry named in neither list, which is not known to be sent.
func ByID[E, S, F any](chunk []E, id func(E) string, succeeded []S, sid func(S) string, failed []F, fid func(F) string,
	refused func(E, F), unknown func(id string), missing func(E)) Outcome {
	byID := make(map[string]E, len(chunk))
	for _, e := range chunk {
		byID[id(e)] = e
	}
	var o Outcome
	o.Sent = len(succeeded) > 0
	for _, f := range failed {
		e, ok := byID[fid(f)]
		if !ok {
			unknown(fid(f))
			continue
		}
		o.EntryFailed = true
		refused(e, f)
	}
	answered := make(map[string]bool, len(succeeded))
	for _, s := range succeeded {
		answered[sid(s)] = true
	}
	for _, f := range failed {
		answered[fid(f)] = true
	}
	for _, e := range chunk {
		if !answered[id(e)] {
			o.EntryFailed = true
			missing(e)
		}
	}
	return o
}

// Build makes the entries of a batch's events with build, in event order,
// and records in errs (errs[i] is events[i]'s) the error of each event
// build refused.
func Build[E any](events []*pipe.Event, errs []error, build func(i int, ev *pipe.Event) (E, error)) []E {
	entries := make([]E, 0, len(events))
	for i, ev := range events {
		e, err := build(i, ev)
		if err != nil {
			errs[i] = err
			continue
		}
		entries = append(entries, e)
	}
	return entries
}

// Result turns per-event errors (errs[i] is events[i]'s) into item
// failures, one per message id.
func Result(events []*pipe.Event, errs []error) pipe.Result {
	var r pipe.Result
	seen := map[string]bool{}
	for i, err := range errs {
		if err == nil {
			continue
		}
		id := events[i].ID()
		if seen[id] {
			continue
		}
		seen[id] = true
		r.Failures = append(r.Failures, pipe.ItemFailure{ID: id, Err: err})
	}
	return r
}
