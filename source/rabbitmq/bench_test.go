package rabbitmq_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/internal/rabbittest"
	"github.com/pipesproject/pipes/source/rabbitmq"
)

// BenchmarkReceiveAck measures messages per second through Receive (10 at
// a time) and Ack on the local broker, with a prefetch of 500. The
// messages are published before the timer starts.
//
// Relies on: the broker delivering at the prefetch as fast as acks free it.
func BenchmarkReceiveAck(b *testing.B) {
	q := rabbittest.Name(b, "")
	rabbittest.DeclareQueue(b, q, rabbittest.QueueOptions{})
	ch := rabbittest.Channel(b)
	if err := ch.Confirm(false); err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"kind":"order.created","id":12345,"amount":"19.99"}`)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		if err := ch.PublishWithContext(ctx, "", q, false, false, amqp.Publishing{ContentType: "application/json", Body: body}); err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for rabbittest.Count(b, q) < b.N && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	src, err := rabbitmq.New(rabbitmq.Config{URL: rabbittest.URL(b), Queue: q, Prefetch: 500, WaitTime: 5 * time.Second,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := src.Open(ctx); err != nil {
		b.Fatal(err)
	}
	defer src.Close(ctx)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for n := 0; n < b.N; {
		msgs, err := src.Receive(ctx, 10)
		if err != nil {
			b.Fatal(err)
		}
		if len(msgs) == 0 {
			b.Fatalf("received %d of %d", n, b.N)
		}
		if err := src.Ack(ctx, msgs); err != nil {
			b.Fatal(err)
		}
		n += len(msgs)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}
