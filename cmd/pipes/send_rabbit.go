package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/internal/scrub"
)

// rabbitWindow is how many publishes `pipes send` keeps unconfirmed.
const rabbitWindow = 100

func sendRabbit(ctx context.Context, spec config.Pipe, f sendFlags, events []outgoing, p *progress, stderr io.Writer) error {
	src := spec.Source
	uri, err := amqp.ParseURI(src.URL)
	if err != nil {
		return usageErr(fmt.Errorf("pipe %s: the rabbitmq source's url is not a valid AMQP URL (amqp[s]://user:password@host:port/vhost)", spec.Name))
	}
	secrets := scrub.New(uri.Password)
	if u, err := url.Parse(src.URL); err == nil {
		if pw, ok := u.User.Password(); ok {
			secrets = append(secrets, scrub.New(pw)...)
		}
	}
	if f.create && !f.yes && isAWSHost(uri.Host) {
		return usageErr(fmt.Errorf("pipe %s: --create would create queues on an Amazon MQ broker (%s): it is meant for local brokers; add --yes to do it anyway", spec.Name, uri.Host))
	}
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName("pipes send")
	conn, err := amqp.DialConfig(src.URL, amqp.Config{Properties: props, Heartbeat: 10 * time.Second, Dial: amqp.DefaultDial(10 * time.Second)})
	if err != nil {
		return runtimeErr(secrets.Error(fmt.Errorf("pipe %s: connecting to RabbitMQ at %s: %w", spec.Name, uri.Host, err)))
	}
	defer conn.Close()
	if err := ensureRabbitQueue(conn, src.Queue, f, stderr); err != nil {
		return runtimeErr(secrets.Error(fmt.Errorf("pipe %s: %w", spec.Name, err)))
	}
	ch, err := conn.Channel()
	if err != nil {
		return runtimeErr(secrets.Error(fmt.Errorf("pipe %s: opening a channel: %w", spec.Name, err)))
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		return runtimeErr(secrets.Error(fmt.Errorf("pipe %s: turning on publisher confirms: %w", spec.Name, err)))
	}
	returns := ch.NotifyReturn(make(chan amqp.Return, rabbitWindow))
	sent, failed := 0, 0
	var failures []string
	for start := 0; start < len(events) && ctx.Err() == nil; start += rabbitWindow {
		window := events[start:min(start+rabbitWindow, len(events))]
		confirms := make([]*amqp.DeferredConfirmation, len(window))
		for i, e := range window {
			msg, err := publishing(e)
			if err == nil {
				confirms[i], err = ch.PublishWithDeferredConfirmWithContext(ctx, "", src.Queue, true, false, msg)
			}
			if err != nil {
				failures = append(failures, secrets.Error(fmt.Errorf("line %d: not sent: %w", e.line, err)).Error())
			}
		}
		for i, dc := range confirms {
			if dc == nil {
				continue
			}
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			ok, err := dc.WaitContext(wctx)
			cancel()
			switch {
			case err != nil:
				failures = append(failures, secrets.Error(fmt.Errorf("line %d: not confirmed: %w", window[i].line, err)).Error())
			case !ok:
				failures = append(failures, fmt.Sprintf("line %d: not sent: the broker nacked it", window[i].line))
			default:
				sent++
			}
		}
		// A return comes before the confirm of its message: every return
		// of this window is in the channel now.
		for drained := false; !drained; {
			select {
			case r := <-returns:
				sent--
				failures = append(failures, fmt.Sprintf("a message was returned: %d %s (is queue %s there?)", r.ReplyCode, r.ReplyText, src.Queue))
			default:
				drained = true
			}
		}
		failed = len(failures)
		p.update(sent, failed)
	}
	p.done(sent, failed, "RabbitMQ queue "+src.Queue)
	for _, l := range failures {
		fmt.Fprintln(stderr, l)
	}
	if sent < len(events) {
		return runtimeErr(fmt.Errorf("%d of %d message(s) were not sent", len(events)-sent, len(events)))
	}
	return nil
}

// ensureRabbitQueue checks that queue exists (a passive declare) and, when
// it does not and --create is given, declares it with its dead-letter
// queue.
func ensureRabbitQueue(conn *amqp.Connection, queue string, f sendFlags, stderr io.Writer) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("opening a channel: %w", err)
	}
	_, err = ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err == nil {
		return ch.Close()
	}
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Code != amqp.NotFound {
		return fmt.Errorf("checking RabbitMQ queue %s: %w", queue, err)
	}
	if !f.create {
		return fmt.Errorf("RabbitMQ queue %s does not exist: declare it, or add --create to declare it with a dead-letter queue", queue)
	}
	// The passive declare closed that channel.
	if ch, err = conn.Channel(); err != nil {
		return fmt.Errorf("opening a channel: %w", err)
	}
	defer ch.Close()
	dlq := queue + "-dlq"
	if _, err := ch.QueueDeclare(dlq, true, false, false, false, nil); err != nil {
		return fmt.Errorf("declaring dead-letter queue %s: %w", dlq, err)
	}
	args := amqp.Table{
		"x-queue-type":              "quorum",
		"x-delivery-limit":          int64(f.maxReceiveCount),
		"x-dead-letter-exchange":    "",
		"x-dead-letter-routing-key": dlq,
	}
	if _, err := ch.QueueDeclare(queue, true, false, false, false, args); err != nil {
		return fmt.Errorf("declaring RabbitMQ queue %s: %w", queue, err)
	}
	fmt.Fprintf(stderr, "created RabbitMQ quorum queue %s (x-delivery-limit %d) with dead-letter queue %s\n", queue, f.maxReceiveCount, dlq)
	return nil
}

// publishing is the AMQP message of one event: persistent unless its
// record says otherwise.
func publishing(e outgoing) (amqp.Publishing, error) {
	msg := amqp.Publishing{Body: e.body, DeliveryMode: amqp.Persistent}
	if p := e.props; p != nil {
		msg.ContentType, msg.ContentEncoding = p.ContentType, p.ContentEncoding
		if p.DeliveryMode != 0 {
			msg.DeliveryMode = p.DeliveryMode
		}
		msg.Priority, msg.CorrelationId, msg.ReplyTo, msg.Expiration = p.Priority, p.CorrelationID, p.ReplyTo, p.Expiration
		msg.MessageId, msg.Type, msg.UserId, msg.AppId = p.MessageID, p.Type, p.UserID, p.AppID
		if len(p.Headers) > 0 {
			t, err := headerTable(p.Headers)
			if err != nil {
				return amqp.Publishing{}, err
			}
			msg.Headers = t
		}
	}
	return msg, nil
}

// headerTable turns record headers back into an AMQP table: {"bytes":[…]}
// is a string (records show AMQP strings so), whole numbers are integers.
func headerTable(h map[string]any) (amqp.Table, error) {
	t := amqp.Table{}
	for k, v := range h {
		hv, err := headerValue(v)
		if err != nil {
			return nil, fmt.Errorf("basicProperties.headers.%s: %w", k, err)
		}
		t[k] = hv
	}
	return t, nil
}

func headerValue(v any) (any, error) {
	switch v := v.(type) {
	case nil, string, bool:
		return v, nil
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int64(v), nil
		}
		return v, nil
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			hv, err := headerValue(x)
			if err != nil {
				return nil, err
			}
			out[i] = hv
		}
		return out, nil
	case map[string]any:
		if b, ok := v["bytes"].([]any); ok && len(v) == 1 {
			buf := make([]byte, len(b))
			for i, x := range b {
				n, ok := x.(float64)
				if !ok || n < 0 || n > 255 || n != math.Trunc(n) {
					return nil, errors.New(`"bytes" must hold numbers 0..255`)
				}
				buf[i] = byte(n)
			}
			return string(buf), nil
		}
		return headerTable(v)
	}
	return nil, fmt.Errorf("unsupported header value %T", v)
}
