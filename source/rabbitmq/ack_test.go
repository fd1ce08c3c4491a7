package rabbitmq_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/internal/rabbittest"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/source/rabbitmq"
)

// Acks out of order, with a message given back and one left unsettled
// among them, settle exactly the acked messages: the multiple acks of the
// oldest runs never take the unsettled one, and the broker never closes
// the channel over a tag settled twice.
func TestAcksOutOfOrderSettleExactlyTheAckedMessages(t *testing.T) {
	q := rabbittest.Name(t, "")
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{})
	for i := range 40 {
		publish(t, q, amqp.Publishing{MessageId: fmt.Sprintf("m-%02d", i), Body: []byte("x")})
	}
	src, err := rabbitmq.New(rabbitmq.Config{URL: rabbittest.URL(t), Queue: q, Prefetch: 40, WaitTime: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := src.Open(ctx); err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = src.Close(context.Background())
		}
	})
	msgs := receive(t, src, 40, 10*time.Second)
	if len(msgs) != 40 {
		t.Fatalf("received %d messages, want 40", len(msgs))
	}
	batch := func(i int) []*source.Message { return msgs[10*i : 10*i+10] }
	ack := func(ms ...*source.Message) {
		t.Helper()
		if err := src.Ack(ctx, ms); err != nil {
			t.Fatalf("Ack: %v", err)
		}
	}
	ack(batch(1)...) // before the older batch: one by one
	giveBack := batch(0)[4]
	if err := src.Nak(ctx, []*source.Message{giveBack}, 0); err != nil {
		t.Fatalf("Nak: %v", err)
	}
	held := batch(0)[1] // unsettled until Close requeues it
	ack(batch(0)[0])
	ack(append(append([]*source.Message(nil), batch(0)[2:4]...), batch(0)[5:]...)...)
	ack(batch(3)...)
	ack(batch(2)[7], batch(2)[2])
	ack(append(append([]*source.Message(nil), batch(2)[:2]...), batch(2)[3:7]...)...)
	ack(batch(2)[8:]...)

	// Only the message given back comes back, on the same channel.
	again := receive(t, src, 1, 10*time.Second)
	if len(again) != 1 || again[0].MessageID != giveBack.MessageID {
		t.Fatalf("got back %v, want only %s", ids(again), giveBack.MessageID)
	}
	ack(again...)
	short, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	if more, err := src.Receive(short, 10); len(more) > 0 || (err != nil && short.Err() == nil) {
		t.Fatalf("after every ack: Receive gave %v, %v; want nothing (an error means the broker closed the channel)", ids(more), err)
	}
	// Only the unsettled one is left: closing requeues it alone.
	if err := src.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	closed = true
	waitCount(t, q, 1)
	time.Sleep(200 * time.Millisecond)
	if n := rabbittest.Count(t, q); n != 1 {
		t.Errorf("%d messages back in the queue after Close, want 1 (%s): an ack was lost or took the unsettled one", n, held.MessageID)
	}
}

func ids(ms []*source.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.MessageID
	}
	return out
}
