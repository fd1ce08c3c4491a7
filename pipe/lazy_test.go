package pipe

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/pipesproject/pipes/source"
)

// TestALazyEventsPayloadIsTheRecordsJSON holds the payload methods of an
// event whose record is not encoded yet (a PayloadAppender target's) to
// what NewEvent gives for the same message: the same bytes, the same
// length, known to be JSON.
func TestALazyEventsPayloadIsTheRecordsJSON(t *testing.T) {
	s := "v"
	tests := []struct {
		name string
		m    func() *source.Message
	}{
		{"an empty message", func() *source.Message { return &source.Message{} }},
		{"a typical record", func() *source.Message {
			return &source.Message{MessageID: "m-1", ReceiptHandle: "rh", Body: `{"id":1,"s":"é <&>"}`,
				Attributes:        map[string]string{source.AttrReceiveCount: "2", "SentTimestamp": "1"},
				MessageAttributes: map[string]source.MessageAttribute{"k": {StringValue: &s, DataType: "String"}},
				EventSource:       "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:q", AWSRegion: "us-east-1"}
		}},
		{"a body that is not JSON", func() *source.Message { return &source.Message{MessageID: "m-2", Body: "a\x00b\"c"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eager, lazyMsg := tt.m(), tt.m()
			ev, err := NewEvent(eager)
			if err != nil {
				t.Fatal(err)
			}
			want := ev.RecordJSON
			if !json.Valid(want) {
				t.Fatalf("NewEvent's payload is not JSON: %q", want)
			}
			if !lazyMsg.Streamed() {
				t.Fatal("an SQS-shaped message without an envelope is not Streamed")
			}
			if _, err := lazyMsg.RecordLen(); err != nil {
				t.Fatal(err)
			}
			lazy := &Event{Message: lazyMsg, lazy: true}
			if n := lazy.PayloadLen(); n != len(want) {
				t.Errorf("PayloadLen %d, want %d", n, len(want))
			}
			if b := lazy.AppendPayload([]byte("x,")); !bytes.Equal(b, append([]byte("x,"), want...)) {
				t.Errorf("AppendPayload appended %q, want %q", b[2:], want)
			}
			if b := lazy.PayloadBytes(); !bytes.Equal(b, want) {
				t.Errorf("PayloadBytes %q, want %q", b, want)
			}
			if !ev.PayloadIsJSON() {
				t.Error("NewEvent's payload is not vouched for as JSON")
			}
		})
	}
}
