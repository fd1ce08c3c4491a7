package ui_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/internal/rabbittest"
	"github.com/pipesproject/pipes/redrive"
	"github.com/pipesproject/pipes/source/rabbitmq"
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

// A message the broker dead-lettered (rejected, through the queue's
// dead-letter exchange) carries no failure context; the DLQ browser shows
// the last failure pipes recorded of it. It relies on the id pipes gives
// a RabbitMQ message without a message-id property (from its content and
// properties, not its headers) being the same in the source queue and,
// after the broker adds x-death, in the dead-letter queue.
func TestTheRabbitMQDLQBrowserShowsTheLastFailurePipesSawOfAMessage(t *testing.T) {
	dlx, _ := rabbittest.DeclareDLX(t)
	src := rabbittest.Name(t, "-src")
	rabbittest.DeclareQueue(t, src, rabbittest.QueueOptions{DeadLetterExchange: dlx})
	ch := rabbittest.Channel(t)
	if err := ch.PublishWithContext(t.Context(), "", src, false, false, amqp.Publishing{Body: []byte(`{"n":7}`), ContentType: "application/json"}); err != nil {
		t.Fatal(err)
	}
	var d amqp.Delivery
	for deadline := time.Now().Add(5 * time.Second); ; {
		got, ok, err := ch.Get(src, false)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			d = got
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the message did not arrive")
		}
		time.Sleep(20 * time.Millisecond)
	}
	id := rabbitmq.Record(d, src, "/", "").MessageID // the id pipes records its failure under
	if err := d.Nack(false, false); err != nil {
		t.Fatal(err)
	}
	spec := config.Pipe{Name: "rabbit", Source: config.Source{Type: "rabbitmq", URL: rabbittest.URL(t), ManagementURL: rabbittest.ManagementURL(t), Queue: src},
		Target: config.Target{Type: "stdout"}}
	built, err := pipes.NewRegistry().Build(context.Background(), []config.Pipe{spec}, pipes.Env{Stdout: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	_, redriver := ui.Queues(spec, nil, nil)
	rec := ui.NewRecorder(time.Second, nil)
	rec.Failed(core.Failure{MessageID: id, Stage: "target", Err: errors.New("HTTP 503 from the orders API"), At: time.Now()})
	srv, err := ui.New(ui.Config{Addr: "127.0.0.1:0", Pipes: []ui.Pipe{{Control: built[0], Recorder: rec, Redriver: redriver}}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	var list ui.DLQView
	eventually(t, "the dead-lettered message listed", func() bool {
		getJSON(t, hs.URL+"/api/pipes/rabbit/dlq", &list)
		return len(list.Messages) == 1
	})
	m := list.Messages[0]
	if m.ID != id || m.Reason != "" || !strings.HasPrefix(m.LastFailure, "at target: HTTP 503 from the orders API (") || !strings.Contains(m.Deliveries, "rejected") {
		t.Errorf("listed %+v, want %s with the last failure pipes saw and its x-death", m, id)
	}
}
