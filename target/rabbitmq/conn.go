package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/internal/backoff"
	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/pipe"
)

// dialBackoff spaces the connection attempts of one Deliver.
var dialBackoff = backoff.Exponential{Base: 100 * time.Millisecond, Max: 2 * time.Second, Jitter: backoff.Equal}

// returnsBuffer is how many basic.returns a channel holds until its
// Deliver reads them. The library gives up on a full buffer after 5 s (and
// blocks the connection meanwhile), so Deliver reads them as they come.
const returnsBuffer = 1024

// channel is a confirm-mode channel that one Deliver at a time uses.
type channel struct {
	conn    *amqp.Connection
	ch      *amqp.Channel
	returns chan amqp.Return
	closes  chan *amqp.Error
	reason  *amqp.Error // why it closed, once known
	known   bool        // reason was looked for
	dirty   bool        // a confirm or a return of a past call may still come
}

// current returns the live connection, nil when there is none (never
// connected, or lost), and ErrClosed once the target is closed.
func (t *Target) current() (*amqp.Connection, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, ErrClosed
	}
	if t.conn != nil && t.conn.IsClosed() {
		t.log.Warn("the connection to rabbitmq was lost; reconnecting", "url", t.display)
		t.conn = nil
	}
	return t.conn, nil
}

// connect returns the live connection, dialling when there is none: one
// dial at a time, retried with backoff for at most maxConnectWait (and
// ctx). Refused credentials or vhost are Permanent.
func (t *Target) connect(ctx context.Context) (*amqp.Connection, error) {
	if c, err := t.current(); err != nil || c != nil {
		return c, err
	}
	select {
	case t.dialing <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the connection to %s: %w", t.display, ctx.Err())
	}
	defer func() { <-t.dialing }()
	if c, err := t.current(); err != nil || c != nil {
		return c, err // another call connected meanwhile
	}
	ctx, cancel := context.WithTimeout(ctx, maxConnectWait)
	defer cancel()
	for attempt := 1; ; attempt++ {
		conn, err := t.dial(ctx)
		if err == nil {
			t.mu.Lock()
			closed := t.closed
			if !closed {
				t.conn = conn
			}
			t.mu.Unlock()
			if closed {
				_ = conn.Close()
				return nil, ErrClosed
			}
			t.log.Info("connected to rabbitmq", "url", t.display, "attempts", attempt)
			return conn, nil
		}
		err = classify(err)
		if core.IsPermanent(err) {
			return nil, fmt.Errorf("connecting to %s: %w", t.display, err)
		}
		if backoff.Sleep(ctx, dialBackoff.Delay(attempt)) != nil {
			return nil, fmt.Errorf("connecting to %s (%d attempts): %w", t.display, attempt, err)
		}
	}
}

// dial opens a connection; ctx bounds the TCP dial and the handshake.
func (t *Target) dial(ctx context.Context) (*amqp.Connection, error) {
	return amqp.DialConfig(t.url, amqp.Config{
		Properties: amqp.Table{"connection_name": t.connName},
		Dial: func(network, addr string) (net.Conn, error) {
			var d net.Dialer
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// The library clears the deadline once the handshake is done.
			deadline, ok := ctx.Deadline()
			if !ok {
				deadline = time.Now().Add(30 * time.Second)
			}
			if err := conn.SetDeadline(deadline); err != nil {
				_ = conn.Close()
				return nil, err
			}
			return conn, nil
		},
	})
}

// channel takes an idle channel of the live connection, or opens one.
func (t *Target) channel(ctx context.Context) (*channel, error) {
	for {
		select {
		case c := <-t.idle:
			if live, _ := t.current(); c.conn == live && !c.ch.IsClosed() {
				return c, nil
			}
			t.discard(c)
			continue
		default:
		}
		break
	}
	var last error
	for range 2 { // a connection lost just now is redialled once
		conn, err := t.connect(ctx)
		if err != nil {
			return nil, err
		}
		ch, err := conn.Channel()
		if err == nil {
			if err = ch.Confirm(false); err == nil {
				return &channel{
					conn: conn, ch: ch,
					returns: ch.NotifyReturn(make(chan amqp.Return, returnsBuffer)),
					closes:  ch.NotifyClose(make(chan *amqp.Error, 1)),
				}, nil
			}
			_ = ch.Close()
		}
		last = classify(err)
		if !conn.IsClosed() {
			return nil, fmt.Errorf("opening a confirm channel: %w", last)
		}
	}
	return nil, fmt.Errorf("opening a confirm channel: %w", last)
}

// release gives c back to the pool when it is clean, else closes it.
func (t *Target) release(c *channel) {
	live, _ := t.current()
	if c.dirty || c.conn != live || c.ch.IsClosed() {
		t.discard(c)
		return
	}
	select {
	case t.idle <- c:
	default:
		t.discard(c)
	}
}

// discard closes c without waiting for the broker's answer. Once the
// target is closed it leaves c to the closing of its connection.
func (t *Target) discard(c *channel) {
	if c.ch.IsClosed() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock() // so that Close's Wait comes after every Go
	if !t.closed {
		t.closing.Go(func() { _ = c.ch.Close() })
	}
}

// closeReason is why c closed, nil when it is open or closed without a
// reason (by the client). It waits a little for the reason, which the
// library sends after marking the channel closed.
func (c *channel) closeReason() *amqp.Error {
	if c.known {
		return c.reason
	}
	if !c.ch.IsClosed() {
		return nil
	}
	select {
	case e := <-c.closes:
		c.reason = e
	case <-time.After(time.Second):
	}
	c.known = true
	return c.reason
}

// publish publishes msgs on c and waits for their confirms, recording each
// failed item's error in its message. It returns the connection's error
// when the connection was lost during the call.
func (c *channel) publish(ctx context.Context, t *Target, msgs []message) (connLost error) {
	returned := map[string]amqp.Return{}
	take := func(r amqp.Return, ok bool) {
		if !ok {
			c.returns = nil // closed with the channel
			return
		}
		if _, seen := returned[r.MessageId]; !seen {
			returned[r.MessageId] = r
		}
	}
	drain := func() {
		for c.returns != nil {
			select {
			case r, ok := <-c.returns:
				take(r, ok)
			default:
				return
			}
		}
	}
	var broken error // the channel failed: the later items are not sent
	for i := range msgs {
		m := &msgs[i]
		switch {
		case m.err != nil:
			continue
		case broken != nil:
			m.err = broken
			continue
		case ctx.Err() != nil:
			m.err = fmt.Errorf("message %s was not published: %w", m.ev.ID(), ctx.Err())
			continue
		}
		dc, err := c.ch.PublishWithDeferredConfirm(t.exchange, m.key, t.mandatory, false, m.pub)
		if err != nil {
			c.dirty = true
			broken = c.failure("publishing", err)
			m.err = broken
			continue
		}
		m.dc = dc
		drain()
	}
	// Wait for every confirm, reading returns as they come.
	for i := range msgs {
		m := &msgs[i]
		if m.dc == nil {
			continue
		}
	wait:
		for ctx.Err() == nil {
			select {
			case <-m.dc.Done():
				break wait
			case r, ok := <-c.returns:
				take(r, ok)
			case <-ctx.Done():
			}
		}
	}
	drain() // a return comes before its message's ack
	for i := range msgs {
		m := &msgs[i]
		if m.dc == nil {
			continue
		}
		select {
		case <-m.dc.Done():
		default:
			c.dirty = true
			m.err = fmt.Errorf("message %s was not confirmed by the broker in time: %w", m.ev.ID(), context.Cause(ctx))
			continue
		}
		switch r, ok := returned[m.ev.ID()]; {
		case !m.dc.Acked():
			if c.ch.IsClosed() {
				m.err = c.failure("waiting for the confirm of message "+m.ev.ID(), errors.New("the channel closed before the broker confirmed it"))
			} else {
				m.err = fmt.Errorf("the broker refused message %s (basic.nack)", m.ev.ID())
			}
		case ok:
			m.err = fmt.Errorf("message %s is unroutable: exchange %q has no binding for routing key %q (basic.return %d %s)",
				m.ev.ID(), t.exchange, m.key, r.ReplyCode, r.ReplyText)
		}
	}
	if c.ch.IsClosed() && (c.conn.IsClosed() || connectionLevel(c.closeReason())) {
		if e := c.closeReason(); e != nil {
			return fmt.Errorf("the connection was lost: %w", e)
		}
		return errors.New("the connection was lost")
	}
	return nil
}

// failure says why items of c failed while doing what: the reason the
// channel closed when it did (it says more than the library's "not open"),
// else err; Permanent for client errors.
func (c *channel) failure(what string, err error) error {
	if e := c.closeReason(); e != nil {
		return fmt.Errorf("%s: the channel closed: %w", what, classify(e))
	}
	return fmt.Errorf("%s: %w", what, classify(err))
}

// connectionLevel reports whether e closed the connection rather than a
// channel (the broker's connection.close, or a forced close).
func connectionLevel(e *amqp.Error) bool {
	return e != nil && (e.Code == amqp.ConnectionForced || e.Code == amqp.InternalError || e.Code == amqp.FrameError)
}

// permanentCodes are the AMQP reply codes of client errors, which retrying
// does not fix.
var permanentCodes = map[int]bool{
	amqp.NotFound:           true, // 404: no such exchange
	amqp.AccessRefused:      true, // 403: no permission, bad credentials or vhost
	amqp.PreconditionFailed: true, // 406
	amqp.NotAllowed:         true, // 530
	amqp.NotImplemented:     true, // 540
}

// classify marks an AMQP error Permanent when it is a client error; any
// other error is returned as it is (retryable).
func classify(err error) error {
	var e *amqp.Error
	if errors.As(err, &e) && permanentCodes[e.Code] {
		return pipe.Permanent(err)
	}
	return err
}
