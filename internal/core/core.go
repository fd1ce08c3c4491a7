// Package core holds what pipe and the module's sources, targets and
// wrappers share but an embedder does not need: the error classes the
// runtime reads (Permanent, Throttled, Exhausted, TooOld, BatchFailure), a
// source's partial settle failure (SettleError) and a few names of the
// record and dead-letter shapes. It imports nothing of the module, so
// pipe can import it. pipe.Permanent and pipe.Throttled are its public
// doors to the two classes an embedder's target returns.
package core

import (
	"errors"
	"fmt"
	"sort"
	"time"
)

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as a client error that retrying will not fix (a 4xx
// answer other than 408 and 429, an invalid request, access denied).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err, or an error it wraps, was marked Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

type throttledError struct{ err error }

func (e *throttledError) Error() string { return e.err.Error() }
func (e *throttledError) Unwrap() error { return e.err }

// Throttled marks err as the target asking to slow down (HTTP 429, an SDK
// throttling code). A pipe halves its concurrency when it sees one.
func Throttled(err error) error {
	if err == nil {
		return nil
	}
	return &throttledError{err: err}
}

// IsThrottled reports whether err, or an error it wraps, was marked Throttled.
func IsThrottled(err error) bool {
	var t *throttledError
	return errors.As(err, &t)
}

type exhaustedError struct {
	err      error
	attempts int
}

func (e *exhaustedError) Error() string { return e.err.Error() }
func (e *exhaustedError) Unwrap() error { return e.err }

// Exhausted marks err as the last failure of an item whose in-runner
// retries ran out after attempts deliveries. With `on_exhausted:
// dead_letter` the pipe sends such items to its dead-letter target.
func Exhausted(err error, attempts int) error {
	if err == nil {
		return nil
	}
	return &exhaustedError{err: err, attempts: attempts}
}

// IsExhausted reports whether err says an item's retries ran out, and after
// how many attempts.
func IsExhausted(err error) (bool, int) {
	var e *exhaustedError
	if errors.As(err, &e) {
		return true, e.attempts
	}
	return false, 0
}

type batchFailure struct{ err error }

func (e *batchFailure) Error() string { return e.err.Error() }

func (e *batchFailure) Unwrap() error { return e.err }

// BatchFailure marks err as the failure of a whole target call: every item
// of the call failed with it. A target wrapper that hands such a failure
// back per item (the retry wrapper, once its attempts ran out) marks it,
// so that the pipe takes it for an outage, not for a verdict on each item.
func BatchFailure(err error) error {
	if err == nil || IsBatchFailure(err) {
		return err
	}
	return &batchFailure{err: err}
}

// IsBatchFailure reports whether err, or an error it wraps, was marked
// BatchFailure.
func IsBatchFailure(err error) bool {
	var b *batchFailure
	return errors.As(err, &b)
}

type tooOld struct{ err error }

func (e *tooOld) Error() string { return e.err.Error() }

func (e *tooOld) Unwrap() error { return e.err }

// TooOld marks err as the failure of an item that is not tried again
// because its message is older than the retry policy's max_event_age
// (Lambda's MaximumRecordAgeInSeconds). It is a verdict on the item even
// when err is a whole-call failure (BatchFailure): an event held through
// an outage honours its age when it is next tried, rather than being held
// for ever.
func TooOld(err error) error {
	if err == nil || IsTooOld(err) {
		return err
	}
	return &tooOld{err: err}
}

// IsTooOld reports whether err, or an error it wraps, was marked TooOld.
func IsTooOld(err error) bool {
	var t *tooOld
	return errors.As(err, &t)
}

// SettleError reports the messages a source could not settle, keyed by
// receipt handle (two receipts of one message are two entries). The
// messages not named were settled.
type SettleError struct {
	// Op is what was being done: "delete" or "change visibility".
	Op string
	// Failed maps receipt handles to why they failed.
	Failed map[string]error
	// SenderFault is true when at least one failure was the caller's fault
	// (e.g. a stale receipt handle) and retrying would not help.
	SenderFault bool
}

// Error names the operation, how many messages failed and the first reason.
func (e *SettleError) Error() string {
	ids := make([]string, 0, len(e.Failed))
	for id := range e.Failed {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var first error
	if len(ids) > 0 {
		first = e.Failed[ids[0]]
	}
	return fmt.Sprintf("%s failed for %d message(s): %v", e.Op, len(ids), first)
}

// DLQContext is the one attribute that carries the failure context, as a
// JSON object of the attributes above, when the original message
// attributes leave no room for them under SQS's limit of ten.
const DLQContext = "pipes-context"

// SampleLimit is the most bytes of a message body a Failure carries.
const SampleLimit = 512

// EventSourceRabbitMQ is the eventSource of Pipes RabbitMQ records.
const EventSourceRabbitMQ = "aws:rmq"

type retryAfterError struct {
	err error
	d   time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// RetryAfter marks err as the failure of an item that should be tried
// again after d (pipe.ItemFailure.RetryAfter). It returns err unchanged
// when d is not positive.
func RetryAfter(err error, d time.Duration) error {
	if err == nil || d <= 0 {
		return err
	}
	return &retryAfterError{err: err, d: d}
}

// RetryAfterOf returns the delay err was marked with by RetryAfter, or 0.
func RetryAfterOf(err error) time.Duration {
	var r *retryAfterError
	if errors.As(err, &r) {
		return r.d
	}
	return 0
}
