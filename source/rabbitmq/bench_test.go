package rabbitmq_test

import (
	"context"
	"log/slog"
	"strings"
	"syscall"
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
	// No publisher confirms: amqp091 walks every pending confirmation on
	// each one, which would load the reader for long after the timer
	// starts; Count below says when all arrived.
	ch := rabbittest.Channel(b)
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
	cpu := startCPU(b)
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
	cpu.report()
}

// benchDelivery is a delivery like the bench's rabbitjob messages: a
// message-id, content type, persistent, a timestamp, a 200 B JSON body.
func benchDelivery() amqp.Delivery {
	body := []byte(`{"kind":"order","id":12345,"amount":46,"pad":"` + strings.Repeat("x", 150) + `"}`)
	return amqp.Delivery{MessageId: "bench-12345", ContentType: "application/json", DeliveryMode: 2,
		Timestamp: time.Unix(1764633600, 0), DeliveryTag: 77, Body: body}
}

// BenchmarkRecord measures making a delivery's Pipes RabbitMQ record and
// its JSON (what the http target posts), as the source does per message.
func BenchmarkRecord(b *testing.B) {
	for _, tc := range []struct {
		name    string
		headers amqp.Table
	}{
		{name: "no headers"},
		{name: "headers", headers: amqp.Table{"tenant": "acme", "attempt": int32(2), "trace": []byte("abc")}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			d := benchDelivery()
			d.Headers = tc.headers
			b.ReportAllocs()
			cpu := startCPU(b)
			for b.Loop() {
				m := rabbitmq.Record(d, "orders", "/", "rabbitmq://127.0.0.1:5672/%2F/orders")
				if _, err := m.JSON(); err != nil {
					b.Fatal(err)
				}
			}
			cpu.report()
		})
	}
}

// cpuMeter reports the process's CPU time (user and system, rusage) per
// operation as cpu-ns/op: on a shared machine it moves less than the wall
// time of ns/op.
type cpuMeter struct {
	b     *testing.B
	start time.Duration
}

func startCPU(b *testing.B) *cpuMeter { return &cpuMeter{b: b, start: processCPU(b)} }

func (m *cpuMeter) report() {
	m.b.ReportMetric(float64(processCPU(m.b)-m.start)/float64(m.b.N), "cpu-ns/op")
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
