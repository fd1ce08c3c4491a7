package pipe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/source/memory"
	"github.com/pipesproject/pipes/source/rabbitmq"
)

// sqsShape is the SQS record as encoding/json writes it.
type sqsShape struct {
	MessageID              string                             `json:"messageId"`
	ReceiptHandle          string                             `json:"receiptHandle"`
	Body                   string                             `json:"body"`
	Attributes             map[string]string                  `json:"attributes"`
	MessageAttributes      map[string]source.MessageAttribute `json:"messageAttributes"`
	MD5OfBody              string                             `json:"md5OfBody"`
	MD5OfMessageAttributes string                             `json:"md5OfMessageAttributes,omitempty"`
	EventSource            string                             `json:"eventSource"`
	EventSourceARN         string                             `json:"eventSourceARN"`
	AWSRegion              string                             `json:"awsRegion"`
	Envelope               json.RawMessage                    `json:"envelope,omitempty"`
}

// referenceJSON is m's record written with encoding/json alone: the SQS
// shape through json.Marshal of a struct; a Record's fields in order, each
// name through json.Marshal, the body as json.Marshal writes a []byte, and
// every other value checked with json.Valid and written as it is (as the
// record keeps it: a decoded record's values keep their spacing).
func referenceJSON(m *source.Message) ([]byte, error) {
	if m.Record == nil {
		j := sqsShape{MessageID: m.MessageID, ReceiptHandle: m.ReceiptHandle, Body: m.Body,
			Attributes: m.Attributes, MessageAttributes: m.MessageAttributes, MD5OfBody: m.MD5OfBody,
			MD5OfMessageAttributes: m.MD5OfMessageAttributes, EventSource: m.EventSource,
			EventSourceARN: m.EventSourceARN, AWSRegion: m.AWSRegion, Envelope: m.Envelope}
		if j.Attributes == nil {
			j.Attributes = map[string]string{}
		}
		if j.MessageAttributes == nil {
			j.MessageAttributes = map[string]source.MessageAttribute{}
		}
		return json.Marshal(j)
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range m.Record.Fields {
		if i > 0 {
			b.WriteByte(',')
		}
		name, err := json.Marshal(f.Name)
		if err != nil {
			return nil, err
		}
		b.Write(name)
		b.WriteByte(':')
		v := []byte(f.Value)
		if f.Name == m.Record.BodyField && f.Value == nil {
			if v, err = json.Marshal([]byte(m.Body)); err != nil {
				return nil, err
			}
		} else if !json.Valid(v) {
			return nil, &json.SyntaxError{}
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// sameRecordAsReference fails t unless m's JSON is referenceJSON's, or
// both fail.
func sameRecordAsReference(t *testing.T, m *source.Message) {
	t.Helper()
	want, wantErr := referenceJSON(m)
	got, err := m.JSON()
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("error %v, the reference's %v", err, wantErr)
	}
	if err != nil {
		return
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoded\n%q\nreference\n%q", got, want)
	}
	if m.Record != nil && cap(got) != len(got) {
		// Sized exactly, or at most to the allocator's size class.
		if c := cap(append([]byte(nil), make([]byte, len(got))...)); cap(got) > c {
			t.Errorf("buffer of %d bytes for a record of %d", cap(got), len(got))
		}
	}
	if !json.Valid(got) {
		t.Fatalf("encoded invalid JSON %q", got)
	}
}

// rabbitDeliveries are deliveries of every property and header kind.
func rabbitDeliveries() map[string]amqp.Delivery {
	return map[string]amqp.Delivery{
		"none":  {},
		"bench": {MessageId: "bench-1", ContentType: "application/json", DeliveryMode: 2, Timestamp: time.Unix(1764633600, 0), Body: []byte(`{"kind":"order"}`)},
		"every property": {ContentType: "text/plain", ContentEncoding: "gzip", DeliveryMode: 1, Priority: 9, CorrelationId: "c-1",
			ReplyTo: "amq.rabbitmq.reply-to", Expiration: "60000", MessageId: "m", Type: "t", UserId: "guest", AppId: "app",
			Timestamp: time.Date(2026, 12, 31, 23, 59, 59, 0, time.FixedZone("x", 3600)), Redelivered: true, Body: make([]byte, 5000)},
		"escapes": {MessageId: `a"b\c<d>&e` + "\n\t\x01\u2028é\xff", ContentType: "ü", Type: "\x7f", Body: []byte("\xff\x00 <&>")},
		"headers": {MessageId: "h", Headers: amqp.Table{"s": "v", "n": int64(-3), "f": 1.5, "nan": 0.0, "t": amqp.Table{"x": []byte{1, 2}},
			"l": []any{"a", int32(1), nil, true}, "d": amqp.Decimal{Scale: 2, Value: -1234}, "ts": time.Unix(1, 0), "x-death": []any{
				amqp.Table{"queue": "orders", "reason": "rejected", "count": int64(2)}}}},
	}
}

func TestEveryRecordShapeEncodesAsTheEncodingJSONReference(t *testing.T) {
	t.Run("rabbitmq", func(t *testing.T) {
		for name, d := range rabbitDeliveries() {
			t.Run(name, func(t *testing.T) {
				m := rabbitmq.Record(d, "orders <&>", "/", "rabbitmq://127.0.0.1:5672/%2F/orders")
				if !m.Record.FieldsValid {
					t.Error("the source's record does not say its fields are valid JSON")
				}
				sameRecordAsReference(t, m)
				// A source's values are compact: its record is what
				// encoding/json would write for the same values.
				var c bytes.Buffer
				got, _ := m.JSON()
				if err := json.Compact(&c, got); err != nil || !bytes.Equal(c.Bytes(), got) {
					t.Errorf("record is not compact JSON: %q", got)
				}
			})
		}
	})
	t.Run("memory", func(t *testing.T) {
		ctx := context.Background()
		q, err := memory.NewBroker().Queue("orders", memory.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s := "acme <&>"
		for _, in := range []memory.SendInput{
			{Body: `{"kind":"order"}`},
			{Body: "\u2028 \u00e9 \"x\" \x01", MessageAttributes: map[string]source.MessageAttribute{
				"tenant": {StringValue: &s, DataType: "String"}, "sig": {BinaryValue: []byte{1, 2, 3}, DataType: "Binary"}}},
		} {
			if _, err := q.Send(ctx, in); err != nil {
				t.Fatal(err)
			}
		}
		msgs, err := q.Receive(ctx, 10)
		if err != nil || len(msgs) != 2 {
			t.Fatalf("received %d messages, %v", len(msgs), err)
		}
		for _, m := range msgs {
			sameRecordAsReference(t, m)
		}
	})
	t.Run("decoded", func(t *testing.T) {
		for _, rec := range []string{
			rabbitRecord,
			`{"eventSource":"aws:rmq", "basicProperties" : {"a" : [1, 2]}, "data":"", "x\u003c":"<\u2028>"}`,
		} {
			var m source.Message
			if err := json.Unmarshal([]byte(rec), &m); err != nil {
				t.Fatal(err)
			}
			sameRecordAsReference(t, &m)
		}
	})
	t.Run("made by hand", func(t *testing.T) {
		for name, rec := range map[string]*source.Record{
			"names are escaped":                           {Fields: []source.RecordField{{Name: "a\"<b>&\xff\u2028", Value: json.RawMessage(`1`)}, {Name: "data"}}, BodyField: "data"},
			"an invalid value unchecked by default fails": {Fields: []source.RecordField{{Name: "x", Value: json.RawMessage(`{"a":`)}}},
			"an empty value fails even when vouched for":  {Fields: []source.RecordField{{Name: "x"}}, FieldsValid: true},
			"a body field with a value keeps it":          {Fields: []source.RecordField{{Name: "data", Value: json.RawMessage(`"v"`)}}, BodyField: "data"},
			"no fields":                                   {},
		} {
			t.Run(name, func(t *testing.T) {
				sameRecordAsReference(t, &source.Message{Body: "body <&> \xff", Record: rec})
			})
		}
	})
}

func FuzzEveryRecordShapeEncodesAsTheEncodingJSONReference(f *testing.F) {
	f.Add("bench-1", "application/json", `{"kind":"order"}`, "tenant", "acme", false, `{"a":1}`, uint8(2))
	f.Add("\xff\u2028", "<&>", "\x00\n", "\"", "\\", true, `{"a":`, uint8(0))
	f.Add("", "", "", "", "", false, ` [1, 2] `, uint8(255))
	f.Fuzz(func(t *testing.T, id, contentType, body, hkey, hval string, redelivered bool, raw string, mode uint8) {
		d := amqp.Delivery{MessageId: id, ContentType: contentType, AppId: hval, DeliveryMode: mode, Priority: mode / 3,
			Redelivered: redelivered, Body: []byte(body)}
		if hkey != "" {
			d.Headers = amqp.Table{hkey: hval, "n": int32(mode)}
		}
		if mode&1 != 0 {
			d.Timestamp = time.Unix(int64(mode)*1e6, 0)
		}
		sameRecordAsReference(t, rabbitmq.Record(d, hkey, hval, id))
		sameRecordAsReference(t, &source.Message{Body: body, Record: &source.Record{BodyField: "data",
			Fields: []source.RecordField{{Name: hkey, Value: json.RawMessage(raw)}, {Name: "data"}, {Name: id, Value: json.RawMessage(`null`)}}}})
		var m source.Message
		if json.Unmarshal([]byte(`{"eventSource":"aws:rmq",`+`"x":`+raw+`,"data":"`+body+`"}`), &m) == nil {
			sameRecordAsReference(t, &m)
		}
	})
}
