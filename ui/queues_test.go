package ui_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes"
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

// TestARabbitMQPipesFailuresNameItsHeadersNotTheirValues runs a RabbitMQ
// pipe (a stdout target with fail_on) on the broker with include_execution_data
// and reads its failure on the page: the header names are listed, their
// values and the AMQP password never served. It relies on RabbitMQ
// keeping the publisher's headers on delivery.
func TestARabbitMQPipesFailuresNameItsHeadersNotTheirValues(t *testing.T) {
	amqpURL := rabbittest.URL(t)
	queue := rabbittest.Name(t, "-src")
	rabbittest.DeclareQueue(t, queue, rabbittest.QueueOptions{})
	ch := rabbittest.Channel(t)
	if err := ch.PublishWithContext(t.Context(), "", queue, false, false, amqp.Publishing{
		ContentType: "application/json", Body: []byte(`{"order":"bad"}`),
		Headers: amqp.Table{"tenant": "header-value-hidden", "trace-id": "t-1"},
	}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(`
name: rabbit
source:
  type: rabbitmq
  url: %s
  queue: %s
  management_url: %s
target:
  type: stdout
  fail_on: bad
logging:
  include_execution_data: true
`, amqpURL, queue, rabbittest.ManagementURL(t))), 0o600); err != nil {
		t.Fatal(err)
	}
	specs, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	built, err := pipes.NewRegistry().Build(context.Background(), specs, pipes.Env{Stdout: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	p := built[0]
	secrets := ui.Secrets(specs[0])
	rec := ui.NewRecorder(time.Second, secrets.Text)
	p.SetObserver(rec)
	depths, redriver := ui.Queues(specs[0], nil, nil)
	srv, err := ui.New(ui.Config{Addr: "127.0.0.1:0", Pipes: []ui.Pipe{{Control: p, Recorder: rec, Settings: ui.Settings(specs[0]),
		Scrub: secrets.Text, Depths: depths, Redriver: redriver, ExecutionData: true}}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	var d ui.DetailView
	eventually(t, "the failure on the page", func() bool {
		getJSON(t, hs.URL+"/api/pipes/rabbit", &d)
		return len(d.Failures) > 0 && d.Depths != nil
	})
	f := d.Failures[len(d.Failures)-1]
	if strings.Join(f.Attributes, ",") != "tenant,trace-id" || f.Sample != `{"order":"bad"}` || f.Attempts != 1 {
		t.Fatalf("failure %+v: want the two header names, the body and attempt 1", f)
	}
	pass := ""
	if u, err := url.Parse(amqpURL); err == nil {
		pass, _ = u.User.Password()
	}
	for _, path := range []string{"/", "/pipes/rabbit", "/pipes/rabbit/failures/1", "/api/pipes/rabbit", "/api/pipes/rabbit/failures"} {
		body := fetch(t, hs.URL+path)
		if strings.Contains(body, "header-value-hidden") || pass != "" && strings.Contains(body, ":"+pass+"@") {
			t.Fatalf("%s serves a header value or the AMQP password:\n%s", path, body)
		}
	}
}
