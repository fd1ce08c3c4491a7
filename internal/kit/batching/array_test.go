package batching

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

func TestArrayReadsWhatJSONArrayBuilds(t *testing.T) {
	record := func(id, body string) *pipe.Event {
		ev, err := pipe.NewEvent(&source.Message{MessageID: id, ReceiptHandle: "h" + id, Body: body, EventSource: "aws:sqs"})
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	raw := func(p string) *pipe.Event {
		return &pipe.Event{Message: &source.Message{MessageID: p}, RecordJSON: []byte(p)}
	}
	tests := []struct {
		name   string
		events []*pipe.Event
	}{
		{"no event is an empty array", nil},
		{"one record", []*pipe.Event{record("1", `{"a":1}`)}},
		{"records with bodies to escape", []*pipe.Event{record("1", "<b> & \u2028"), record("2", strings.Repeat("x", 70000))}},
		{"payloads that are JSON go as they are", []*pipe.Event{raw(`{"x":1}`), raw(`[1,2]`), raw(`"s"`)}},
		{"payloads that are not JSON are quoted", []*pipe.Event{raw(`not json`), raw(`{"x":`), raw("tab\there")}},
		{"a mix of records and payloads", []*pipe.Event{raw(`plain`), record("1", `{}`), raw(`7`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := JSONArray(tt.events)
			a := NewArray(tt.events)
			if a.Len() != int64(len(want)) {
				t.Errorf("Len %d, JSONArray has %d bytes", a.Len(), len(want))
			}
			for _, r := range []struct {
				how string
				r   io.Reader
			}{{"read at once", a}, {"read a byte at a time", iotest.OneByteReader(a.Again())}, {"read again", a.Again()}} {
				got, err := io.ReadAll(r.r)
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("%s: %q, %v; JSONArray %q", r.how, got, err, want)
				}
			}
			if err := iotest.TestReader(a.Again(), want); err != nil {
				t.Error(err)
			}
		})
	}
}

// BenchmarkArrayOfTenRecords is BenchmarkJSONArrayOfTenRecords as the
// HTTP target now sends a batch: sized, then read into the connection's
// buffer.
func BenchmarkArrayOfTenRecords(b *testing.B) {
	evs := make([]*pipe.Event, 10)
	for i := range evs {
		ev, err := pipe.NewEvent(&source.Message{
			MessageID: fmt.Sprint(i), ReceiptHandle: strings.Repeat("r", 150), Body: `{"data":"` + strings.Repeat("x", 1024-11) + `"}`,
			Attributes:  map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": "1545082649183"},
			EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-2:123456789012:q", AWSRegion: "us-east-2",
		})
		if err != nil {
			b.Fatal(err)
		}
		evs[i] = ev
	}
	buf := make([]byte, 4096)
	b.ReportAllocs()
	for b.Loop() {
		a := NewArray(evs)
		for {
			if _, err := a.Read(buf); err != nil {
				break
			}
		}
	}
}
