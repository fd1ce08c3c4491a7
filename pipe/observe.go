package pipe

import (
	"encoding/json"
	"sort"
	"strconv"
	"time"

	"github.com/pipesproject/pipes/internal/core"
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
	// included (delivery.NumDelivered).
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

// SetObserver makes o the pipe's observer. Call it before Run: it is not
// safe to call while the pipe runs.
func (p *Pipe) SetObserver(o Observer) { p.met.obs = o }

// observeReceived tells the observer of a receive's messages.
func (p *Pipe) observeReceived(ds []*delivery) {
	o := p.met.obs
	if o == nil {
		return
	}
	var oldest time.Time
	for _, d := range ds {
		if ts, err := strconv.ParseInt(d.Message.Attributes[AttrSentTimestamp], 10, 64); err == nil {
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
		case Succeeded:
			delivered++
		case Filtered:
			filtered++
		case Released:
		default:
			f := Failure{MessageID: d.Message.MessageID, Stage: v[i].stage, Err: v[i].err,
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
func attributeNames(m *Message) []string {
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
		o.Scaled(ScalingDecision{From: from, To: to, Reason: reason, At: time.Now()})
	}
}
