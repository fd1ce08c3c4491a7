package pipe

import (
	"bytes"
	"encoding/json"
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

// tapPayloads tells t of the payloads of events at stage, without the
// message's lease (withoutLease).
func (p *Pipe) tapPayloads(t core.Tap, stage string, events []*Event) {
	for _, ev := range events {
		sample := ""
		if p.opt.IncludeExecutionData {
			b := withoutLease(ev.PayloadBytes(), ev.Message.ReceiptHandle)
			sample = string(b[:min(len(b), core.SampleLimit+4)])
		}
		p.tapped(t, stage, ev.ID(), "", sample)
	}
}

// leaseMasked stands in the tail's samples for a receipt handle found
// elsewhere than the record's own member.
const leaseMasked = "xxxxx"

// withoutLease is payload for the live tail: an SQS record without its
// "receiptHandle" member (the message's lease: whoever holds it may
// delete the message or change its visibility), and the handle masked
// wherever else it appears (an input template that copied it). A
// RabbitMQ delivery tag is no lease outside its channel and stays. The
// member is looked for among the first members that begin within the
// sample's bytes; payload is not changed (a copy is returned when
// something was taken out).
func withoutLease(payload []byte, handle string) []byte {
	if handle == "" || !bytes.Contains(payload, []byte(handle)) {
		return payload
	}
	out := payload
	if start, end, ok := memberSpan(payload, "receiptHandle", core.SampleLimit+4); ok {
		out = append(append(make([]byte, 0, len(payload)-(end-start)), payload[:start]...), payload[end:]...)
	}
	if bytes.Contains(out, []byte(handle)) {
		out = bytes.ReplaceAll(out, []byte(handle), []byte(leaseMasked))
	}
	return out
}

// memberSpan finds the top-level member named key of the JSON object b,
// among the members that begin before limit, and returns the bytes to cut
// to drop it: with the comma before it, or, when it is the first member,
// the comma after it. ok is false when b is not an object or the member
// is not found there.
func memberSpan(b []byte, key string, limit int) (start, end int, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return 0, 0, false
	}
	for first := true; dec.More(); first = false {
		at := int(dec.InputOffset()) // after '{', or after the last value (before its comma)
		if at > limit {
			return 0, 0, false
		}
		k, err := dec.Token()
		if err != nil {
			return 0, 0, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return 0, 0, false
		}
		if name, _ := k.(string); name != key {
			continue
		}
		end := int(dec.InputOffset())
		if first {
			// `{"key":v, "next"…`: the comma after goes with it.
			rest := bytes.TrimLeft(b[end:], " \t\r\n")
			if len(rest) > 0 && rest[0] == ',' {
				end = len(b) - len(rest) + 1
			}
		}
		return at, end, true
	}
	return 0, 0, false
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
