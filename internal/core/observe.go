package core

import (
	"context"
	"time"
)

// Observer is told what a pipe does, at the points where the pipe counts
// it in its metrics: a status page or a test watches a pipe through it.
// Its methods are called from the pipe's goroutines, some under the
// pipe's lock: they must be safe for concurrent use, must not block and
// must not call back into the pipe. A pipe without an observer pays one
// nil check per call site and allocates nothing for it.
type Observer interface {
	// Received is called for every receive that returned messages: n
	// messages, the oldest of them sent at oldest (zero when the source
	// gives no SentTimestamp).
	Received(n int, oldest time.Time)
	// Settled is called once per batch with how many of its messages were
	// delivered (the target took them) and filtered out.
	Settled(delivered, filtered int)
	// Failed is called for every message that failed in a batch.
	Failed(f Failure)
	// DeadLettered is called with the messages dead-lettered: sent to the
	// dead-letter target, handed to the broker's dead-lettering, or failed
	// on their last receive allowed by the queue's redrive policy.
	DeadLettered(n int)
	// Scaled is called when the pipe's concurrency changes, with why.
	Scaled(d ScalingDecision)
}

// Failure is one message that failed, as an Observer sees it.
type Failure struct {
	// MessageID is the message's id in its source.
	MessageID string
	// Stage is where it failed: filter, enrichment, transform, target,
	// fifo or runtime.
	Stage string
	// Err is why.
	Err error
	// Attempts is how many times the message was delivered, this time
	// included.
	Attempts int
	// At is when the failure was settled.
	At time.Time
	// Sample is the start of the body, at most SampleLimit bytes, only when
	// the pipe's logging includes execution data (else nil).
	Sample string
	// Attributes are the names of the message's attributes (SQS message
	// attributes, RabbitMQ headers), sorted, without their values, and
	// only with Sample.
	Attributes []string
}

// ScalingDecision is a change of a pipe's concurrency.
type ScalingDecision struct {
	From, To int
	// Reason says why, as the logs put it ("messages keep coming").
	Reason string
	At     time.Time
}

// BatchSpan is the span of one batch, from StartBatch. Its methods are
// called by the batch's goroutine only.
type BatchSpan interface {
	// Stage starts the child span of a stage of the batch ("filter",
	// "enrichment", "target", "settle") and returns a context carrying it
	// and the function that ends it with the stage's error (nil: it went
	// well; per-item failures are in the batch's outcome counts).
	Stage(ctx context.Context, name string) (context.Context, func(err error))
	// End ends the batch span with what happened to its messages.
	End(BatchOutcome)
}

// BatchOutcome counts what happened to the messages of a batch, for its
// span.
type BatchOutcome struct {
	// Messages is the batch's size.
	Messages int
	// Delivered, Filtered, Failed and Released count the messages by
	// outcome (Succeeded, Filtered, FailedRetry, Released).
	Delivered, Filtered, Failed, Released int
	// Err is the batch's whole error (the enrichment's or the target's
	// call failed), if any.
	Err error
}

// Status is a snapshot of a pipe's scheduling state, for status pages.
type Status struct {
	// Started: the source is open and the pipe polls (or did).
	Started bool
	// Stopping: the pipe was told to stop and lets its batches finish.
	Stopping bool
	// Paused: polling is paused (Pause).
	Paused bool
	// Ready is what Ready reports.
	Ready bool
	// CircuitOpen: the target keeps failing and polling is held.
	CircuitOpen bool
	// Concurrency is the batches the pipe may have in flight now;
	// MaxConcurrency its ceiling.
	Concurrency, MaxConcurrency int
	// InFlight is the batches at the target now.
	InFlight int
	// Receiving is the receives under way.
	Receiving int
	// Err is what LastError reports.
	Err error
}

// Tap is the optional ability of an Observer to watch single messages
// pass a pipe's stages: a live tail. The pipe finds it by type assertion
// when it is given the observer. Before each stage of a batch it asks Tapping (which must
// be cheap: an atomic load); only when it says yes does it build the
// stage's TapEvents and hand them to Tapped. Both are called from the
// pipe's goroutines: they must be safe for concurrent use, must not block
// and must not call back into the pipe.
type Tap interface {
	// Tapping reports whether anyone watches now.
	Tapping() bool
	// Tapped is told of one message at one stage.
	Tapped(e TapEvent)
}

// Stages of a TapEvent, in the order a message passes them.
const (
	TapReceived   = "received"   // the record as the source gave it
	TapFilter     = "filter"     // the filter's verdict
	TapEnrichment = "enrichment" // the payload after the enrichment
	TapTarget     = "target"     // the target's input
	TapOutcome    = "outcome"    // how the message was settled
)

// TapEvent is one message at one stage, as a Tap sees it.
type TapEvent struct {
	// Stage is one of TapReceived, TapFilter, TapEnrichment, TapTarget and
	// TapOutcome.
	Stage string
	// MessageID is the message's id in its source.
	MessageID string
	// Detail is the stage's verdict: "passed" or "filtered out" (filter),
	// the outcome (succeeded, filtered, failed, released), with the failed
	// stage and error after a colon.
	Detail string
	// Sample is the start of the record or payload (at most SampleLimit
	// bytes), only when the pipe's logging includes execution data.
	Sample string
	// At is when the stage was passed.
	At time.Time
}
