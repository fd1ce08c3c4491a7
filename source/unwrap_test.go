package source

import (
	"encoding/json"
	"testing"
)

func TestUnwrap(t *testing.T) {
	sns := `{"Type":"Notification","MessageId":"n-1","TopicArn":"arn:aws:sns:us-east-1:123456789012:orders","Subject":"s",` +
		`"Message":"{\"order\":7}","Timestamp":"2026-11-30T00:00:00.000Z","MessageAttributes":{"tenant":{"Type":"String","Value":"acme"},` +
		`"blob":{"Type":"Binary","Value":"AQI="},"kept":{"Type":"String","Value":"from sns"}}}`
	eb := `{"version":"0","id":"e-1","detail-type":"OrderPlaced","source":"shop","account":"1","time":"t","region":"us-east-1","resources":[],"detail":{"order":8}}`
	tests := []struct {
		name, kind, body string
		wantBody         string
		wantEnvelope     bool
	}{
		{"sns: the notification's Message becomes the body", UnwrapSNS, sns, `{"order":7}`, true},
		{"eventbridge: the event's detail becomes the body", UnwrapEventBridge, eb, `{"order":8}`, true},
		{"auto takes either", UnwrapAuto, eb, `{"order":8}`, true},
		{"sns leaves an EventBridge event alone", UnwrapSNS, eb, eb, false},
		{"a body that is no envelope stays as it is", UnwrapAuto, `{"order":9}`, `{"order":9}`, false},
		{"a plain-text body stays as it is", UnwrapAuto, `hello`, `hello`, false},
		{"invalid JSON stays as it is", UnwrapAuto, `{"Type":`, `{"Type":`, false},
		{"nothing happens without unwrap", UnwrapNone, sns, sns, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kept := "mine"
			m := &Message{Body: tt.body, MessageAttributes: map[string]MessageAttribute{"kept": {DataType: "String", StringValue: &kept}}}
			Unwrap(m, tt.kind)
			if m.Body != tt.wantBody {
				t.Fatalf("body %q, want %q", m.Body, tt.wantBody)
			}
			if (len(m.Envelope) > 0) != tt.wantEnvelope {
				t.Fatalf("envelope %q", m.Envelope)
			}
			if tt.wantEnvelope && string(m.Envelope) != tt.body {
				t.Fatalf("envelope %q, want the original body", m.Envelope)
			}
			rec, err := m.JSON()
			if err != nil || !json.Valid(rec) {
				t.Fatalf("record %s: %v", rec, err)
			}
		})
	}
	t.Run("sns message attributes are lifted; the message's own win", func(t *testing.T) {
		kept := "mine"
		m := &Message{Body: sns, MessageAttributes: map[string]MessageAttribute{"kept": {DataType: "String", StringValue: &kept}}}
		Unwrap(m, UnwrapSNS)
		if a := m.MessageAttributes["tenant"]; a.StringValue == nil || *a.StringValue != "acme" || a.DataType != "String" {
			t.Errorf("tenant = %+v", a)
		}
		if a := m.MessageAttributes["blob"]; string(a.BinaryValue) != "\x01\x02" {
			t.Errorf("blob = %+v", a)
		}
		if *m.MessageAttributes["kept"].StringValue != "mine" {
			t.Error("an SNS attribute replaced the message's own")
		}
	})
}

func FuzzUnwrap(f *testing.F) {
	f.Add(`{"Type":"Notification","TopicArn":"x","Message":"m","MessageAttributes":{"a":{"Type":"Binary","Value":"!!"}}}`)
	f.Add(`{"detail-type":"d","source":"s","detail":[1]}`)
	f.Fuzz(func(t *testing.T, body string) {
		m := &Message{Body: body}
		Unwrap(m, UnwrapAuto)
		if _, err := m.JSON(); err != nil && json.Valid([]byte(body)) {
			t.Fatalf("record of %q does not encode: %v", body, err)
		}
	})
}
