package ui_test

import (
	"context"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/internal/rabbittest"
	"github.com/pipesproject/pipes/redrive"
	"github.com/pipesproject/pipes/ui"
)

// TestTheDLQBrowserOfARabbitMQPipe lists a RabbitMQ dead-letter queue
// (found through the source queue's dead-letter exchange and the
// management API) and redrives one message of it by id. It relies on
// basic.get without ack, basic.nack requeue putting classic-queue
// messages back in order, and the x-death header the broker writes.
func TestTheDLQBrowserOfARabbitMQPipe(t *testing.T) {
	dlx, dlq := rabbittest.DeclareDLX(t)
	source := rabbittest.Name(t, "-src")
	rabbittest.DeclareQueue(t, source, rabbittest.QueueOptions{DeadLetterExchange: dlx})
	ch := rabbittest.Channel(t)
	for i, body := range []string{`{"n":0}`, `{"n":1}`, `{"n":2}`} {
		if err := ch.PublishWithContext(t.Context(), "", source, false, false, amqp.Publishing{MessageId: "m-" + string(rune('0'+i)), Body: []byte(body),
			Headers: amqp.Table{"ErrorCode": "ClientError", "ErrorMessage": "HTTP 400", "pipes-stage": "target"}}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for rabbittest.Count(t, source) != 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	for range 3 {
		d, ok, err := ch.Get(source, false)
		if err != nil || !ok {
			t.Fatalf("getting from %s: %v %v", source, ok, err)
		}
		if err := d.Nack(false, false); err != nil {
			t.Fatal(err)
		}
	}
	for rabbittest.Count(t, dlq) != 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	spec := config.Pipe{Name: "rabbit", Source: config.Source{Type: "rabbitmq", URL: rabbittest.URL(t), ManagementURL: rabbittest.ManagementURL(t), Queue: source}}
	_, redriver := ui.Queues(spec, nil, nil)
	b, ok := redriver.(ui.DLQBrowser)
	if !ok {
		t.Fatal("a rabbitmq pipe's Redriver is no DLQBrowser")
	}
	views, err := b.Browse(context.Background(), 50)
	if err != nil || len(views) != 3 {
		t.Fatalf("listed %d (%v), want 3", len(views), err)
	}
	if views[0].ID != "m-0" || len(views[0].Deaths) != 1 || views[0].Deaths[0].Reason != "rejected" {
		t.Errorf("first message %+v, want m-0 rejected once", views[0])
	}
	if n := rabbittest.Count(t, dlq); n != 3 {
		t.Fatalf("after the listing the dead-letter queue has %d, want 3", n)
	}
	sum, err := b.RedriveIDs(context.Background(), []string{"m-1"}, 0, func(redrive.Entry) {})
	if err != nil || sum.Moved != 1 {
		t.Fatalf("redrive of m-1: %+v (%v)", sum, err)
	}
	var left []string
	for _, d := range rabbittest.Get(t, dlq) {
		left = append(left, string(d.Body))
	}
	if strings.Join(left, " ") != `{"n":0} {"n":2}` {
		t.Errorf("the dead-letter queue holds %v, want the two others in order", left)
	}
	if got := rabbittest.Get(t, source); len(got) != 1 || string(got[0].Body) != `{"n":1}` {
		t.Errorf("the source queue holds %d messages, want m-1", len(got))
	}
}
