package pipe

import (
	"encoding/json"
	"sort"
	"strconv"
	"time"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/source"
)

// SetObserver makes o the pipe's observer. Call it before Run: it is not
// safe to call while the pipe runs.
// When o is also a Tap, it is told of single messages while it is
// Tapping.
func (p *Pipe) SetObserver(o core.Observer) {
	p.met.obs = o
	p.met.tap, _ = o.(core.Tap)
}

// observeReceived tells the observer of a receive's messages.
func (p *Pipe) observeReceived(ds []*delivery) {
	o := p.met.obs
	if o == nil {
		return
	}
	var oldest time.Time
	for _, d := range ds {
		if ts, err := strconv.ParseInt(d.Message.Attributes[source.AttrSentTimestamp], 10, 64); err == nil {
			if t := time.UnixMilli(ts); oldest.IsZero() || t.Before(oldest) {
				oldest = t
			}
		}
	}
	o.Received(len(ds), oldest)
}

// observeBatch tells the observer of a batch's verdicts.
func (p *Pipe) observeBatch(batch []*delivery, v []verdict) {
	o := p.met.obs
	if o == nil {
		return
	}
	delivered, filtered := 0, 0
	now := time.Now()
	for i, d := range batch {
		switch v[i].outcome {
		case outSucceeded:
			delivered++
		case outFiltered:
			filtered++
		case outReleased:
		default:
			f := core.Failure{MessageID: d.Message.MessageID, Stage: v[i].stage, Err: v[i].err,
				Attempts: d.NumDelivered(), At: now}
			if p.opt.IncludeExecutionData {
				f.Sample = sampleOf(d.Message.Body)
				f.Attributes = attributeNames(d.Message)
			}
			o.Failed(f)
		}
	}
	o.Settled(delivered, filtered)
}

// attributeNames are the names of m's SQS message attributes or, for a
// record of another shape (RabbitMQ), of the headers in its
// basicProperties, sorted.
func attributeNames(m *source.Message) []string {
	var names []string
	for name := range m.MessageAttributes {
		names = append(names, name)
	}
	if m.Record != nil {
		if raw, ok := m.Record.Field("basicProperties"); ok {
			var props struct {
				Headers map[string]json.RawMessage `json:"headers"`
			}
			if json.Unmarshal(raw, &props) == nil {
				for name := range props.Headers {
					names = append(names, name)
				}
			}
		}
	}
	sort.Strings(names)
	return names
}

// sampleOf is the start of body, at most SampleLimit bytes, cut at a
// character boundary.
func sampleOf(body string) string {
	if len(body) <= core.SampleLimit {
		return body
	}
	cut := core.SampleLimit
	for cut > 0 && !utf8Start(body[cut]) {
		cut--
	}
	return body[:cut]
}

// utf8Start reports whether b begins a UTF-8 character.
func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// observeDeadLettered tells the observer of dead-lettered messages.
func (m *pipeMetrics) observeDeadLettered(n int) {
	if m.obs != nil && n > 0 {
		m.obs.DeadLettered(n)
	}
}

// observeScaled tells the observer of a change of concurrency.
func (p *Pipe) observeScaled(from, to int, reason string) {
	if o := p.met.obs; o != nil {
		o.Scaled(core.ScalingDecision{From: from, To: to, Reason: reason, At: time.Now()})
	}
}
