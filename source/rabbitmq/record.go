package rabbitmq

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/source"
)

// TimestampLayout is how records show the AMQP timestamp, as Pipes does
// ("Jan 1, 1970, 12:33:41 AM", UTC).
const TimestampLayout = "Jan 2, 2006, 3:04:05 PM"

// appendProperties appends the record's basicProperties of a delivery:
// every AMQP property in a fixed order, null when unset, as encoding/json
// would encode them (record_internal_test.go holds that reference and a
// fuzz test of the two). amqp091 does not tell an unset deliveryMode or
// priority from 0: 0 is shown as null (0 is no valid delivery mode).
// clusterId is not in AMQP 0-9-1 deliveries: always null. It spares the
// reflection of json.Marshal, once per message.
func appendProperties(b []byte, d *amqp.Delivery) ([]byte, error) {
	b = append(b, `{"contentType":`...)
	b = appendOptString(b, d.ContentType)
	b = append(b, `,"contentEncoding":`...)
	b = appendOptString(b, d.ContentEncoding)
	b = append(b, `,"headers":`...)
	if len(d.Headers) > 0 {
		h, err := json.Marshal(headersJSON(d.Headers))
		if err != nil {
			return b, err
		}
		b = append(b, h...)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"deliveryMode":`...)
	b = appendOptOctet(b, d.DeliveryMode)
	b = append(b, `,"priority":`...)
	b = appendOptOctet(b, d.Priority)
	b = append(b, `,"correlationId":`...)
	b = appendOptString(b, d.CorrelationId)
	b = append(b, `,"replyTo":`...)
	b = appendOptString(b, d.ReplyTo)
	b = append(b, `,"expiration":`...)
	b = appendOptString(b, d.Expiration)
	b = append(b, `,"messageId":`...)
	b = appendOptString(b, d.MessageId)
	b = append(b, `,"timestamp":`...)
	if d.Timestamp.IsZero() {
		b = append(b, "null"...)
	} else {
		// The layout's words, digits and punctuation need no escaping.
		b = append(b, '"')
		b = d.Timestamp.UTC().AppendFormat(b, TimestampLayout)
		b = append(b, '"')
	}
	b = append(b, `,"type":`...)
	b = appendOptString(b, d.Type)
	b = append(b, `,"userId":`...)
	b = appendOptString(b, d.UserId)
	b = append(b, `,"appId":`...)
	b = appendOptString(b, d.AppId)
	b = append(b, `,"clusterId":null,"bodySize":`...)
	b = strconv.AppendInt(b, int64(len(d.Body)), 10)
	return append(b, '}'), nil
}

// appendOptString appends s as a JSON string, null when empty.
func appendOptString(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendString(b, s)
}

// appendOptOctet appends n, null when 0.
func appendOptOctet(b []byte, n uint8) []byte {
	if n == 0 {
		return append(b, "null"...)
	}
	return strconv.AppendUint(b, uint64(n), 10)
}

// appendString appends s as encoding/json encodes a string: as it is when
// every byte is printable ASCII that needs no escape (the common case),
// else through json.Marshal (its escapes, HTML-safe, and invalid UTF-8 as
// U+FFFD).
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// HeadersJSON maps AMQP headers as records show them (see headersJSON);
// nil for none. It is safe for concurrent use.
func HeadersJSON(t amqp.Table) map[string]any {
	if len(t) == 0 {
		return nil
	}
	return headersJSON(t)
}

// headersJSON maps an AMQP table as Pipes shows it: strings and byte
// arrays as {"bytes":[…]}, numbers as numbers, tables and arrays
// recursively, timestamps as the record's timestamp string.
func headersJSON(t amqp.Table) map[string]any {
	out := make(map[string]any, len(t))
	for k, v := range t {
		out[k] = headerJSON(v)
	}
	return out
}

// byteArray is {"bytes":[…]} with the bytes as numbers 0..255.
type byteArray struct {
	Bytes []int `json:"bytes"`
}

func bytesOf(b []byte) byteArray {
	out := make([]int, len(b))
	for i, c := range b {
		out[i] = int(c)
	}
	return byteArray{Bytes: out}
}

func headerJSON(v any) any {
	switch v := v.(type) {
	case nil:
		return nil
	case string:
		return bytesOf([]byte(v))
	case []byte:
		return bytesOf(v)
	case bool, int, int8, int16, int32, int64, uint8, uint16, uint32, uint64:
		return v
	case float32:
		return finite(float64(v))
	case float64:
		return finite(v)
	case amqp.Decimal:
		return decimal(v)
	case time.Time:
		return v.UTC().Format(TimestampLayout)
	case amqp.Table:
		return headersJSON(v)
	case map[string]any:
		return headersJSON(amqp.Table(v))
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = headerJSON(e)
		}
		return out
	default:
		return bytesOf([]byte(fmt.Sprint(v)))
	}
}

// finite is f, or null for NaN and infinities (JSON has no such numbers).
func finite(f float64) any {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return f
}

// decimal writes an AMQP decimal exactly.
func decimal(d amqp.Decimal) json.Number {
	neg := d.Value < 0
	digits := strconv.FormatInt(int64(d.Value), 10)
	if neg {
		digits = digits[1:]
	}
	if s := int(d.Scale); s > 0 {
		for len(digits) <= s {
			digits = "0" + digits
		}
		digits = digits[:len(digits)-s] + "." + digits[len(digits)-s:]
	}
	if neg {
		digits = "-" + digits
	}
	return json.Number(digits)
}

// newRecord is the Pipes RabbitMQ record of a delivery, its fields in
// order; id is its messageId. The fields' JSON shares one buffer.
func newRecord(d *amqp.Delivery, id string, arnJSON, keyJSON json.RawMessage) (*source.Record, error) {
	b := make([]byte, 0, 320+len(id))
	b = appendString(b, id)
	idEnd := len(b)
	b, err := appendProperties(b, d)
	if err != nil {
		return nil, fmt.Errorf("encoding the properties of a delivery: %w", err)
	}
	redelivered := json.RawMessage("false")
	if d.Redelivered {
		redelivered = json.RawMessage("true")
	}
	return &source.Record{
		Fields: []source.RecordField{
			{Name: "messageId", Value: b[:idEnd:idEnd]},
			{Name: "eventSource", Value: eventSourceJSON},
			{Name: "eventSourceArn", Value: arnJSON},
			{Name: "eventSourceKey", Value: keyJSON},
			{Name: "basicProperties", Value: b[idEnd:len(b):len(b)]},
			{Name: "redelivered", Value: redelivered},
			{Name: "data"},
		},
		BodyField:    "data",
		Unfilterable: unfilterable,
		// Every value above is written by a JSON encoder (or is a
		// literal): the pipe need not check them per message.
		FieldsValid: true,
	}, nil
}

// eventSourceJSON is the record's eventSource.
var eventSourceJSON = json.RawMessage(`"` + core.EventSourceRabbitMQ + `"`)

// unfilterable are the fields the poller adds, which filters do not see.
var unfilterable = []string{"eventSource", "eventSourceArn", "eventSourceKey"}

// attempts counts m's deliveries, this one included (see Source.Attempts).
func attempts(d *amqp.Delivery, queue string) int {
	copied, hasCopied := intHeader(d.Headers[AttemptsHeader])
	if n, ok := intHeader(d.Headers["x-delivery-count"]); ok {
		// A quorum queue counts from the copy's publish: add the
		// failures before it, which the copy carries.
		return max(copied, 0) + max(n, 0) + 1
	}
	n, ok := copied, hasCopied
	if !ok {
		n = deaths(d.Headers, queue)
	}
	n = max(n, 0) + 1
	if d.Redelivered {
		n++
	}
	return n
}

// deaths is the x-death count of the queue: how often the message was
// dead-lettered from it (and came back through a dead-letter cycle).
func deaths(h amqp.Table, queue string) int {
	list, _ := h["x-death"].([]any)
	n := 0
	for _, e := range list {
		t, ok := e.(amqp.Table)
		if !ok || t["queue"] != queue {
			continue
		}
		if c, ok := intHeader(t["count"]); ok && c > 0 {
			n += c
		}
	}
	return n
}

// intHeader reads an integer header value of any AMQP integer type.
func intHeader(v any) (int, bool) {
	switch v := v.(type) {
	case int:
		return v, true
	case int8:
		return int(v), true
	case int16:
		return int(v), true
	case int32:
		return int(v), true
	case int64:
		return int(min(max(v, math.MinInt32), math.MaxInt32)), true
	case uint8:
		return int(v), true
	case uint16:
		return int(v), true
	case uint32:
		return int(v), true
	case uint64:
		return int(min(v, math.MaxInt32)), true
	case string:
		n, err := strconv.Atoi(v)
		return n, err == nil
	}
	return 0, false
}

// DefaultCycleLimit is how many times a message may come back to its
// queue after being rejected from it (x-death reason rejected) before the
// source takes it for a dead-letter cycle, when max_receive_count is unset.
const DefaultCycleLimit = 10

// deadLetterCycle tells whether the delivery went round a dead-letter
// cycle through queue: its x-death history has queue with reason rejected
// limit times or more, and the message is back in queue. RabbitMQ drops
// only cycles without a rejection, so a cycle through a failing consumer
// spins for ever. The description names the queues of the history, oldest
// first: "orders (rejected ×10) → orders-retry (expired ×10) → orders".
func deadLetterCycle(h amqp.Table, queue string, limit int) (string, bool) {
	list, _ := h["x-death"].([]any)
	rejected := 0
	var hops []string
	for i := len(list) - 1; i >= 0; i-- { // x-death is most recent first
		t, ok := list[i].(amqp.Table)
		if !ok {
			continue
		}
		q, _ := t["queue"].(string)
		reason, _ := t["reason"].(string)
		c, _ := intHeader(t["count"])
		if q == queue && reason == "rejected" {
			rejected = c
		}
		hops = append(hops, fmt.Sprintf("%s (%s ×%d)", q, reason, c))
	}
	if rejected < limit || limit <= 0 {
		return "", false
	}
	return strings.Join(append(hops, queue), " → "), true
}
