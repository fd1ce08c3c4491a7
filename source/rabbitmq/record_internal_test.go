package rabbitmq

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// basicProperties is the reference of appendProperties: the record's
// basicProperties as encoding/json encodes them.
type basicProperties struct {
	ContentType     *string        `json:"contentType"`
	ContentEncoding *string        `json:"contentEncoding"`
	Headers         map[string]any `json:"headers"`
	DeliveryMode    *uint8         `json:"deliveryMode"`
	Priority        *uint8         `json:"priority"`
	CorrelationID   *string        `json:"correlationId"`
	ReplyTo         *string        `json:"replyTo"`
	Expiration      *string        `json:"expiration"`
	MessageID       *string        `json:"messageId"`
	Timestamp       *string        `json:"timestamp"`
	Type            *string        `json:"type"`
	UserID          *string        `json:"userId"`
	AppID           *string        `json:"appId"`
	ClusterID       *string        `json:"clusterId"`
	BodySize        int            `json:"bodySize"`
}

func refString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func refOctet(n uint8) *uint8 {
	if n == 0 {
		return nil
	}
	return &n
}

// referenceProperties is json.Marshal of d's basicProperties.
func referenceProperties(t testing.TB, d *amqp.Delivery) []byte {
	p := basicProperties{
		ContentType: refString(d.ContentType), ContentEncoding: refString(d.ContentEncoding),
		DeliveryMode: refOctet(d.DeliveryMode), Priority: refOctet(d.Priority),
		CorrelationID: refString(d.CorrelationId), ReplyTo: refString(d.ReplyTo), Expiration: refString(d.Expiration),
		MessageID: refString(d.MessageId), Type: refString(d.Type), UserID: refString(d.UserId), AppID: refString(d.AppId),
		BodySize: len(d.Body),
	}
	if !d.Timestamp.IsZero() {
		p.Timestamp = refString(d.Timestamp.UTC().Format(TimestampLayout))
	}
	if len(d.Headers) > 0 {
		p.Headers = headersJSON(d.Headers)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPropertiesAreEncodedAsEncodingJSONDoes(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    amqp.Delivery
	}{
		{name: "none", d: amqp.Delivery{}},
		{name: "the bench's", d: amqp.Delivery{MessageId: "bench-1", ContentType: "application/json", DeliveryMode: 2, Timestamp: time.Unix(1764633600, 0), Body: []byte("{}")}},
		{name: "every property", d: amqp.Delivery{ContentType: "text/plain", ContentEncoding: "gzip", DeliveryMode: 1, Priority: 9,
			CorrelationId: "c-1", ReplyTo: "amq.rabbitmq.reply-to", Expiration: "60000", MessageId: "m", Type: "t", UserId: "guest", AppId: "app",
			Timestamp: time.Date(2026, 12, 31, 23, 59, 59, 0, time.FixedZone("x", 3600)), Body: make([]byte, 4096)}},
		{name: "escapes", d: amqp.Delivery{MessageId: `a"b\c<d>&e` + "\n\t\x01\u2028é\xff", ContentType: "ü", Type: "\x7f"}},
		{name: "headers", d: amqp.Delivery{MessageId: "h", Headers: amqp.Table{"s": "v", "n": int64(-3), "f": 1.5, "t": amqp.Table{"x": []byte{1, 2}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := appendProperties(nil, &tc.d)
			if err != nil {
				t.Fatal(err)
			}
			if want := referenceProperties(t, &tc.d); !bytes.Equal(got, want) {
				t.Errorf("properties\n%s\nwant\n%s", got, want)
			}
			if want, _ := json.Marshal(tc.d.MessageId); !bytes.Equal(appendString(nil, tc.d.MessageId), want) {
				t.Errorf("message id %s, want %s", appendString(nil, tc.d.MessageId), want)
			}
		})
	}
}

func FuzzPropertiesAreEncodedAsEncodingJSONDoes(f *testing.F) {
	f.Add("application/json", "", "bench-1", "", "", uint8(2), uint8(0), int64(1764633600), 200)
	f.Add(`"<&>\`, "\xff\xfe", "\u2028\u2029", "\x00\x1f", "é", uint8(0), uint8(255), int64(-62135596800), 0)
	f.Fuzz(func(t *testing.T, contentType, encoding, id, correlation, typ string, mode, prio uint8, unix int64, size int) {
		d := amqp.Delivery{ContentType: contentType, ContentEncoding: encoding, MessageId: id, CorrelationId: correlation, Type: typ,
			ReplyTo: id, Expiration: correlation, UserId: typ, AppId: contentType, DeliveryMode: mode, Priority: prio,
			Body: make([]byte, max(0, min(size, 1<<16)))}
		if unix != 0 {
			d.Timestamp = time.Unix(unix%(1<<40), 0)
		}
		got, err := appendProperties(nil, &d)
		if err != nil {
			t.Fatal(err)
		}
		if want := referenceProperties(t, &d); !bytes.Equal(got, want) {
			t.Errorf("properties\n%s\nwant\n%s", got, want)
		}
		if want, _ := json.Marshal(id); !bytes.Equal(appendString(nil, id), want) {
			t.Errorf("string %s, want %s", appendString(nil, id), want)
		}
	})
}
