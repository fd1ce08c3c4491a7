package filter

import (
	"encoding/base64"
	"encoding/json"
	"strconv"

	"github.com/pipesproject/pipes/internal/jsonvalue"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

// recordField names a top-level field of the SQS record as patterns see it.
type recordField uint8

const (
	recNone recordField = iota // not a filterable field: never present
	recMessageID
	recReceiptHandle
	recBody
	recAttributes
	recMessageAttributes
	recMD5OfBody
	recMD5OfMessageAttributes
	recEnvelope
)

// recordFieldOf maps a top-level pattern key to the record field it names.
// The fields the poller adds (awsRegion, eventSource, eventSourceARN) are
// not filterable in Pipes (SPEC.md B §2.1): they map to recNone.
func recordFieldOf(key string) recordField {
	switch key {
	case "messageId":
		return recMessageID
	case "receiptHandle":
		return recReceiptHandle
	case "body":
		return recBody
	case "attributes":
		return recAttributes
	case "messageAttributes":
		return recMessageAttributes
	case "md5OfBody":
		return recMD5OfBody
	case "md5OfMessageAttributes":
		return recMD5OfMessageAttributes
	case "envelope":
		return recEnvelope
	}
	return recNone
}

// record is the view of one event that a match walks; it builds the
// generic message attributes only when a pattern asks for them.
type record struct {
	ev     *pipe.Event
	mattrs map[string]any

	numberText bool // decode the body keeping the text of numbers
	textDone   bool
	textBody   any
	textJSON   bool
}

func (r *record) messageAttributes() map[string]any {
	if r.mattrs == nil {
		r.mattrs = messageAttributesValue(r.ev.Message.MessageAttributes)
	}
	return r.mattrs
}

// messageAttributesValue is the generic JSON form of message attributes,
// as the record's JSON encodes them (binary values in base64).
func messageAttributesValue(attrs map[string]source.MessageAttribute) map[string]any {
	out := make(map[string]any, len(attrs))
	for name, a := range attrs {
		v := map[string]any{
			"dataType":         a.DataType,
			"stringListValues": stringsValue(a.StringListValues),
			"binaryListValues": bytesListValue(a.BinaryListValues),
		}
		if a.StringValue != nil {
			v["stringValue"] = *a.StringValue
		}
		if len(a.BinaryValue) > 0 {
			v["binaryValue"] = base64.StdEncoding.EncodeToString(a.BinaryValue)
		}
		out[name] = v
	}
	return out
}

func stringsValue(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func bytesListValue(bs [][]byte) []any {
	out := make([]any, len(bs))
	for i, b := range bs {
		out[i] = base64.StdEncoding.EncodeToString(b)
	}
	return out
}

// RecordValue returns the event's record as a generic JSON value
// (map[string]any, []any, string, float64, bool, nil), the way jq, expr and
// templates see it: every record field, with body decoded when it is valid
// JSON and the raw string otherwise. The body value is the event's shared
// decoded body: callers must not modify the result. Safe for concurrent use
// on the same event.
func RecordValue(ev *pipe.Event) map[string]any {
	m := ev.Message
	body, isJSON := ev.Body()
	if m.Record != nil {
		return shapedValue(m, body, isJSON)
	}
	attrs := make(map[string]any, len(m.Attributes))
	for k, v := range m.Attributes {
		attrs[k] = v
	}
	rec := map[string]any{
		"messageId":         m.MessageID,
		"receiptHandle":     m.ReceiptHandle,
		"body":              body,
		"attributes":        attrs,
		"messageAttributes": messageAttributesValue(m.MessageAttributes),
		"md5OfBody":         m.MD5OfBody,
		"eventSource":       m.EventSource,
		"eventSourceARN":    m.EventSourceARN,
		"awsRegion":         m.AWSRegion,
	}
	if m.MD5OfMessageAttributes != "" {
		rec["md5OfMessageAttributes"] = m.MD5OfMessageAttributes
	}
	if env, ok := envelopeValue(m); ok {
		rec["envelope"] = env
	}
	return rec
}

// shapedValue is the generic JSON form of a record of another shape than
// SQS's (RabbitMQ): its fields decoded, the body field decoded when the
// body is JSON and the record's base64 text otherwise.
func shapedValue(m *source.Message, body any, isJSON bool) map[string]any {
	rec := make(map[string]any, len(m.Record.Fields)+1)
	rec["messageId"] = m.MessageID
	for _, f := range m.Record.Fields {
		if f.Name == m.Record.BodyField && f.Value == nil {
			if isJSON {
				rec[f.Name] = body
			} else {
				rec[f.Name] = base64.StdEncoding.EncodeToString([]byte(m.Body))
			}
			continue
		}
		if v, ok := jsonvalue.Decode(string(f.Value), false); ok {
			rec[f.Name] = v
		}
	}
	return rec
}

// body returns the body as patterns see it. When a pattern compares exact
// numbers under body, numbers must keep their JSON text (SPEC.md B §4.1), so
// the body is decoded here with json.Number and the event gets the usual
// float64 form for the other stages; otherwise the event's shared decode
// is used.
func (r *record) body() (any, bool) {
	if !r.numberText {
		return r.ev.Body()
	}
	if !r.textDone {
		r.textDone = true
		r.textBody, r.textJSON = decodeWithNumberText(r.ev)
	}
	return r.textBody, r.textJSON
}

// decodeWithNumberText decodes the body keeping numbers as json.Number and
// hands the event the same value with float64 numbers, exactly as
// pipe.Event.Body would decode it (a number out of the float64 range makes
// the whole body a plain string there, so it does here too). If the event
// had already decoded its body, that costs one more decode.
func decodeWithNumberText(ev *pipe.Event) (any, bool) {
	raw := ev.Message.Body
	v, ok := decodeJSON(raw, true)
	var plain any
	if ok {
		plain, ok = withFloats(v)
	}
	if !ok {
		ev.SetBody(raw, false)
		return ev.Body()
	}
	ev.SetBody(plain, true)
	if _, isJSON := ev.Body(); !isJSON {
		return raw, false // decoded elsewhere, differently: follow the event
	}
	return v, true
}

// withFloats converts a json.Number tree to encoding/json's default form.
func withFloats(v any) (any, bool) {
	switch v := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		return f, err == nil
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			c, ok := withFloats(e)
			if !ok {
				return nil, false
			}
			out[k] = c
		}
		return out, true
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			c, ok := withFloats(e)
			if !ok {
				return nil, false
			}
			out[i] = c
		}
		return out, true
	}
	return v, true
}

// envelopeValue is the decoded envelope the pipe unwrapped the body from
// (source `unwrap:`), and false when there is none.
func envelopeValue(m *source.Message) (any, bool) {
	if len(m.Envelope) == 0 {
		return nil, false
	}
	return jsonvalue.Decode(string(m.Envelope), false)
}
