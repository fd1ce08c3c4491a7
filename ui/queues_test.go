package ui_test

import (
	"context"
	"testing"
	"time"

	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/internal/rabbittest"
	"github.com/pipesproject/pipes/redrive"
	"github.com/pipesproject/pipes/ui"
)

// TestRabbitMQDepthsAndRedrive reads the depths of a RabbitMQ pipe's queue
// and of its dead-letter queue (found by the dead-letter exchange's
// binding, through the management API of RabbitMQ 3.10) and redrives the
// dead-letter queue with the rabbit redrive of `pipes dlq redrive`.
func TestRabbitMQDepthsAndRedrive(t *testing.T) {
	url := rabbittest.URL(t)
	dlx, dlq := rabbittest.DeclareDLX(t)
	source := rabbittest.Name(t, "-src")
	rabbittest.DeclareQueue(t, source, rabbittest.QueueOptions{DeadLetterExchange: dlx})
	rabbittest.Publish(t, source, `{"n":1}`, `{"n":2}`, `{"n":3}`)
	ch := rabbittest.Channel(t)
	for range 2 { // two dead-lettered by the broker, one left ready
		d, ok, err := ch.Get(source, false)
		if err != nil || !ok {
			t.Fatalf("getting from %s: %v %v", source, ok, err)
		}
		if err := d.Nack(false, false); err != nil {
			t.Fatal(err)
		}
	}
	spec := config.Pipe{Name: "orders", Source: config.Source{Type: "rabbitmq", URL: url, Queue: source,
		ManagementURL: rabbittest.ManagementURL(t)}}
	depths, redriver := ui.Queues(spec, nil, nil)
	if depths == nil || redriver == nil {
		t.Fatal("a rabbitmq pipe has both depths and a redrive")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var d ui.Depths
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		d, err = depths.Depths(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d.DLQ != nil && d.DLQ.Visible == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if d.Queue == nil || d.Queue.Name != source || d.Queue.Visible != 1 || d.DLQ == nil || d.DLQ.Name != dlq || d.DLQ.Visible != 2 {
		t.Fatalf("depths %+v / %+v, want 1 ready in %s and 2 in %s", d.Queue, d.DLQ, source, dlq)
	}
	var moved []string
	sum, err := redriver.Redrive(ctx, 0, func(e redrive.Entry) {
		if e.Outcome == redrive.Moved {
			moved = append(moved, e.MessageID)
		}
	})
	if err != nil || sum.Moved != 2 || len(moved) != 2 {
		t.Fatalf("redrive: %+v, %v (reported %d moved)", sum, err, len(moved))
	}
	if n := rabbittest.Count(t, dlq); n != 0 {
		t.Fatalf("the DLQ holds %d after the redrive", n)
	}
	if n := rabbittest.Count(t, source); n != 3 {
		t.Fatalf("the source holds %d after the redrive, want 3", n)
	}
}
