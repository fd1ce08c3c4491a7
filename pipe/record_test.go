package pipe_test

import (
	"encoding/json"
	"testing"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/source"
)

// rabbitRecord is a Pipes RabbitMQ record (SPEC.md §2.2) as the rabbitmq
// source would give it.
const rabbitRecord = `{"messageId":"m-1","eventSource":"aws:rmq","eventSourceArn":"arn:pipes:rabbitmq:localhost","eventSourceKey":"orders::/",` +
	`"basicProperties":{"contentType":"application/json","headers":{"tenant":{"bytes":[97,99,109,101]},"tries":2},"messageId":"m-1","timestamp":"Jan 1, 1970, 12:33:41 AM","bodySize":13,"priority":null},` +
	`"redelivered":false,"data":"eyJraW5kIjoieCJ9"}`

func TestARabbitMQRecordRoundTripsAndKeepsItsFieldOrder(t *testing.T) {
	var m source.Message
	if err := json.Unmarshal([]byte(rabbitRecord), &m); err != nil {
		t.Fatal(err)
	}
	if m.MessageID != "m-1" || m.Body != `{"kind":"x"}` || m.Record == nil || m.EventSource != core.EventSourceRabbitMQ {
		t.Fatalf("decoded id %q body %q record %v source %q", m.MessageID, m.Body, m.Record != nil, m.EventSource)
	}
	got, err := m.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != rabbitRecord {
		t.Fatalf("encoded\n%s\nwant\n%s", got, rabbitRecord)
	}
}
