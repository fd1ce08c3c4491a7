package pipes_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/internal/otlptest"
	"github.com/pipesproject/pipes/internal/rabbittest"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/tracing"
)

// TestARabbitMQMessagesTraceparentHeaderLinksTheBatchSpan publishes, to the
// RabbitMQ broker of the tests (127.0.0.1:5672), a message with a
// traceparent header (a string, as OpenTelemetry's AMQP instrumentations
// write it) and one without, runs a rabbitmq-source pipe with the OTLP
// tracer, and reads the in-process receiver: the batch span links to that
// producer only. Broker behaviour relied on: headers are delivered as
// published.
func TestARabbitMQMessagesTraceparentHeaderLinksTheBatchSpan(t *testing.T) {
	t.Parallel()
	url := rabbittest.URL(t)
	queue := rabbittest.Name(t, "")
	rabbittest.DeclareQueue(t, queue, rabbittest.QueueOptions{})
	ch := rabbittest.Channel(t)
	ctx := context.Background()
	const w3c = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, h := range []amqp.Table{{"traceparent": w3c}, nil} {
		if err := ch.PublishWithContext(ctx, "", queue, true, false, amqp.Publishing{ContentType: "application/json", Headers: h, Body: []byte(`{"n":1}`)}); err != nil {
			t.Fatal(err)
		}
	}
	var delivered atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		delivered.Add(1)
	}))
	t.Cleanup(srv.Close)
	rcv := otlptest.Start(t)
	tr, err := tracing.New(ctx, tracing.Config{Endpoint: rcv.URL})
	if err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, "pipeline.yaml", fmt.Sprintf(`
name: rabbit-traced
source: {type: rabbitmq, url: %s, queue: %s, batch_size: 10, batch_window: 1s}
target: {type: http, url: %s}
`, url, queue, srv.URL))
	specs, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	built, err := pipes.NewRegistry().Build(ctx, specs, pipes.Env{Tracer: tr})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- pipe.NewRunner(built...).Run(runCtx) }()
	waitFor(t, 30*time.Second, "both messages acked", func() bool { return rabbittest.Count(t, queue) == 0 && delivered.Load() > 0 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	var links []string
	for _, s := range rcv.Spans() {
		if s.GetName() == "batch" {
			for _, l := range s.GetLinks() {
				links = append(links, hex.EncodeToString(l.GetTraceId())+"-"+hex.EncodeToString(l.GetSpanId()))
			}
		}
	}
	if len(links) != 1 || links[0] != "0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331" {
		t.Errorf("batch span links %v, want the one producer's", links)
	}
}
