package rabbit

import (
	"context"
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source/rabbitmq"
)

// Inspect returns up to maxMsgs messages of queue, from its head, as Pipes
// RabbitMQ records (x-death and every other header in
// basicProperties.headers), without consuming them: it reads them with
// basic.get without ack on a channel of its own and requeues them all
// (basic.nack requeue, then the channel closes) before it returns, on
// every path, so the queue keeps its count and its order; the broker flags
// them redelivered. It stops at maxMsgs or when the queue has no more. It
// blocks.
func (b *Broker) Inspect(ctx context.Context, queue string, maxMsgs int) (msgs []*pipe.Message, err error) {
	if maxMsgs < 1 {
		return nil, fmt.Errorf("inspecting %s: the most messages to read must be at least 1, got %d", queue, maxMsgs)
	}
	ch, err := b.conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("opening a channel: %w", b.scrub(err))
	}
	defer func() {
		if rerr := b.requeue(ch, len(msgs) > 0); rerr != nil {
			err = errors.Join(err, fmt.Errorf("requeueing the inspected messages of %s: %w", queue, rerr))
		}
	}()
	arn := b.ARN(queue)
	for len(msgs) < maxMsgs {
		if err := ctx.Err(); err != nil {
			return msgs, err
		}
		d, ok, err := ch.Get(queue, false)
		if err != nil {
			return msgs, b.getErr(queue, err)
		}
		if !ok {
			break
		}
		msgs = append(msgs, rabbitmq.Record(d, queue, b.uri.Vhost, arn))
	}
	return msgs, nil
}

// requeue gives back every delivery of ch not acked yet, when held says
// there are some, and closes ch. Should the nack fail, closing the channel
// (or the connection) makes the broker requeue them anyway.
func (b *Broker) requeue(ch *amqp.Channel, held bool) error {
	var err error
	if held {
		// Tag 0 with multiple: every outstanding delivery of the channel.
		if nerr := ch.Nack(0, true, true); nerr != nil && !errors.Is(nerr, amqp.ErrClosed) {
			err = fmt.Errorf("basic.nack: %w", b.scrub(nerr))
		}
	}
	if cerr := ch.Close(); cerr != nil && !errors.Is(cerr, amqp.ErrClosed) {
		err = errors.Join(err, fmt.Errorf("closing the channel: %w", b.scrub(cerr)))
	}
	return err
}

// getErr explains the error of a basic.get from queue.
func (b *Broker) getErr(queue string, err error) error {
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == amqp.NotFound {
		return fmt.Errorf("RabbitMQ queue %s does not exist in vhost %s", queue, b.uri.Vhost)
	}
	return fmt.Errorf("getting a message from %s: %w", queue, b.scrub(err))
}
