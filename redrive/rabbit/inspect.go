package rabbit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/redrive"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/source/rabbitmq"
)

// Peeked is one message Peek read: its Pipes RabbitMQ record and its text
// view.
type Peeked struct {
	Record *source.Message
	View   redrive.View
}

// Inspect returns up to maxMsgs messages of queue, from its head, as Pipes
// RabbitMQ records (x-death and every other header in
// basicProperties.headers), without consuming them: see Peek. It blocks.
func (b *Broker) Inspect(ctx context.Context, queue string, maxMsgs int) ([]*source.Message, error) {
	peeked, err := b.Peek(ctx, queue, maxMsgs)
	msgs := make([]*source.Message, len(peeked))
	for i, p := range peeked {
		msgs[i] = p.Record
	}
	return msgs, err
}

// Peek returns up to maxMsgs messages of queue, from its head, as records
// and text views, without consuming them: it reads them with basic.get
// without ack on a channel of its own and requeues them all (basic.nack
// requeue, then the channel closes) before it returns, on every path, so
// the queue keeps its count and its order; the broker flags them
// redelivered. It stops at maxMsgs or when the queue has no more. It
// blocks.
func (b *Broker) Peek(ctx context.Context, queue string, maxMsgs int) (msgs []Peeked, err error) {
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
		rec := rabbitmq.Record(d, queue, b.uri.Vhost, arn)
		msgs = append(msgs, Peeked{Record: rec, View: ViewOf(d, rec.MessageID)})
	}
	return msgs, nil
}

// ViewOf is the text view of a delivery whose record has messageId id:
// its body, its x-death entries, x-pipes-attempts, the failure context
// headers (ErrorCode, ErrorMessage, pipes-*) and the others (less
// x-first-death-* and x-last-death-*, which repeat x-death).
func ViewOf(d amqp.Delivery, id string) redrive.View {
	v := redrive.View{ID: id, Body: d.Body}
	for name, val := range d.Headers {
		switch {
		case name == "x-death":
			v.Deaths = deaths(val)
		case name == rabbitmq.AttemptsHeader:
			v.Attempts = headerText(val)
		case strings.HasPrefix(name, "x-first-death-") || strings.HasPrefix(name, "x-last-death-"):
		case redrive.IsContextAttribute(name):
			v.Context = append(v.Context, redrive.Field{Name: name, Value: headerText(val)})
		default:
			v.Other = append(v.Other, redrive.Field{Name: name, Value: headerText(val)})
		}
	}
	redrive.SortFields(v.Context)
	redrive.SortFields(v.Other)
	return v
}

// deaths reads an x-death header: an array of tables, most recent first.
func deaths(v any) []redrive.Death {
	list, _ := v.([]any)
	out := make([]redrive.Death, 0, len(list))
	for _, e := range list {
		t, ok := e.(amqp.Table)
		if !ok {
			continue
		}
		d := redrive.Death{Queue: headerText(t["queue"]), Reason: headerText(t["reason"]), Exchange: headerText(t["exchange"])}
		d.Count, _ = number(t["count"])
		d.First, _ = t["time"].(time.Time)
		if l, ok := t["last-time"].(time.Time); ok {
			d.Last = l
		}
		if keys, ok := t["routing-keys"].([]any); ok {
			for _, k := range keys {
				d.RoutingKeys = append(d.RoutingKeys, headerText(k))
			}
		}
		out = append(out, d)
	}
	return out
}

// number reads an AMQP integer of any width.
func number(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	}
	return 0, false
}

// headerText is a header value as text: strings and byte arrays as they
// are, times in RFC 3339, tables and arrays as {k: v} and [a, b].
func headerText(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case []byte:
		return string(v)
	case time.Time:
		return v.UTC().Format(time.RFC3339)
	case amqp.Table:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + ": " + headerText(v[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = headerText(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprint(v)
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
