package pipe

import (
	"errors"

	"github.com/pipesproject/pipes/internal/core"
)

// Permanent marks err as a client error that retrying will not fix (a 4xx
// answer other than 408 and 429, an invalid request, access denied). A
// target that returns it for an item, in its ItemFailure or as the error
// of the whole call, has the item dead-lettered now: no retry, and the
// source's dead-letter path (the pipe's dead_letter target, else its
// queue's redrive) takes it.
func Permanent(err error) error { return core.Permanent(err) }

// Throttled marks err as the target asking to slow down (HTTP 429, an SDK
// throttling code). A pipe halves its concurrency when it sees one.
func Throttled(err error) error { return core.Throttled(err) }

// ErrReportedFailed is the reason of an item a target or enrichment named
// as failed (batchItemFailures, or an ItemFailure without an error). Such
// failures are the target's answer, not an outage: they never shrink
// concurrency nor open the circuit breaker.
var ErrReportedFailed = errors.New("reported in batchItemFailures")
