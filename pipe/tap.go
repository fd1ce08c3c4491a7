package pipe

import (
	"time"

	"github.com/pipesproject/pipes/internal/core"
)

// Tap is the optional ability of an Observer to watch single messages
// pass a pipe's stages: a live tail. The pipe finds it by type assertion
// in SetObserver. Before each stage of a batch it asks Tapping (which must
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

// tap is the pipe's Tap when someone watches, else nil. With no observer
// it costs one nil check.
func (p *Pipe) tap() Tap {
	if t := p.met.tap; t != nil && t.Tapping() {
		return t
	}
	return nil
}

// tapped hands t one event; sample is kept only with execution data.
func (p *Pipe) tapped(t Tap, stage, id, detail, sample string) {
	e := TapEvent{Stage: stage, MessageID: id, Detail: detail, At: time.Now()}
	if p.opt.IncludeExecutionData {
		e.Sample = sampleOf(sample)
	}
	t.Tapped(e)
}

// tapPayloads tells t of the payloads of events at stage.
func (p *Pipe) tapPayloads(t Tap, stage string, events []*Event) {
	for _, ev := range events {
		sample := ""
		if p.opt.IncludeExecutionData {
			b := ev.PayloadBytes()
			sample = string(b[:min(len(b), core.SampleLimit+4)])
		}
		p.tapped(t, stage, ev.ID(), "", sample)
	}
}

// tapOutcomes tells the tap, if anyone watches, how each message of a
// batch was settled.
func (p *Pipe) tapOutcomes(batch []*delivery, v []verdict) {
	t := p.tap()
	if t == nil {
		return
	}
	for i, d := range batch {
		detail := v[i].outcome.String()
		if v[i].outcome == outFailedRetry && v[i].err != nil {
			detail += ": " + v[i].stage + ": " + v[i].err.Error()
		}
		p.tapped(t, TapOutcome, d.Message.MessageID, detail, "")
	}
}
