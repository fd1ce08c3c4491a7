package pipe

import (
	"time"

	"github.com/pipesproject/pipes/internal/core"
)

// tap is the pipe's Tap when someone watches, else nil. With no observer
// it costs one nil check.
func (p *Pipe) tap() core.Tap {
	if t := p.met.tap; t != nil && t.Tapping() {
		return t
	}
	return nil
}

// tapped hands t one event; sample is kept only with execution data.
func (p *Pipe) tapped(t core.Tap, stage, id, detail, sample string) {
	e := core.TapEvent{Stage: stage, MessageID: id, Detail: detail, At: time.Now()}
	if p.opt.IncludeExecutionData {
		e.Sample = sampleOf(sample)
	}
	t.Tapped(e)
}

// tapPayloads tells t of the payloads of events at stage.
func (p *Pipe) tapPayloads(t core.Tap, stage string, events []*Event) {
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
		p.tapped(t, core.TapOutcome, d.Message.MessageID, detail, "")
	}
}
