package rabbit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/filter"
	"github.com/pipesproject/pipes/internal/backoff"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/redrive"
	"github.com/pipesproject/pipes/source/rabbitmq"
)

// Options says what Redrive moves and how.
type Options struct {
	// From is the dead-letter queue's name.
	From string
	// To is the name of the queue to move the messages to; they are
	// published through the default exchange with To as routing key.
	To string
	// Rate caps the messages published per second; 0 means no cap.
	Rate float64
	// Max, when above 0, stops the run once this many messages were moved
	// or failed (would have been moved, in a dry run).
	Max int
	// Filter, when set, moves only the messages whose Pipes RabbitMQ
	// record matches it (patterns see data decoded when it is JSON); the
	// others are left in the dead-letter queue.
	Filter *filter.Pattern
	// DryRun publishes nothing: Redrive reports what it would move and
	// leaves every message in the dead-letter queue.
	DryRun bool
	// IDs, when set, moves only the messages with these ids (a selection
	// made from a listing, the status page's DLQ browser): the others are
	// left unacked, reported Skipped and requeued at the end, and the run
	// stops once every id was moved or failed.
	IDs []string
	// Report, when set, is called with each message's entry, in order,
	// from Redrive's goroutine.
	Report func(redrive.Entry)
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
}

// Redrive moves messages from opt.From to opt.To. It reads them with
// basic.get without ack, from the head, at most as many as opt.From held
// when it started (so that what comes back to the dead-letter queue during
// the run is not moved twice). Each message that passes the filter is
// published to opt.To through the default exchange, mandatory, on a
// channel in confirm mode, keeping its body and properties and its
// headers less the death history and the attempt count (x-death,
// x-first-death-*, x-last-death-*, x-delivery-count, x-pipes-attempts) and
// the failure context of pipes' dead-letter stage (ErrorCode, ErrorMessage,
// pipes-*), plus pipes-redriven-at (the time of the move, RFC 3339 UTC).
// The message is acked from opt.From only once the broker confirmed the
// copy; a nack, a return (unroutable: no such queue) or a timeout fails it
// and it stays in opt.From.
//
// What Redrive leaves behind (skipped, failed, dry run) stays unacked
// while it runs and is requeued, in place, before it returns, on every
// path.
//
// Failed messages are counted in the Summary, not returned as an error;
// the error is for a run that could not go on (a channel or the
// connection closed, ctx done) or a bad option. It blocks.
func (b *Broker) Redrive(ctx context.Context, opt Options) (sum redrive.Summary, err error) {
	switch {
	case opt.From == "" || opt.To == "":
		return sum, errors.New("redriving: both the dead-letter queue and the destination queue are needed")
	case opt.From == opt.To:
		return sum, fmt.Errorf("redriving: the destination is the dead-letter queue itself (%s)", opt.From)
	case opt.Rate < 0 || opt.Max < 0:
		return sum, fmt.Errorf("redriving: rate (%v) and max (%d) must not be negative", opt.Rate, opt.Max)
	}
	r := &run{b: b, opt: opt, log: opt.Logger, arn: b.ARN(opt.From), pace: pacer{rate: opt.Rate}}
	if len(opt.IDs) > 0 {
		r.left = make(map[string]bool, len(opt.IDs))
		for _, id := range opt.IDs {
			r.left[id] = true
		}
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	counts, err := b.Counts(ctx, opt.From)
	if err != nil {
		return sum, err
	}
	if counts.Consumers > 0 {
		r.log.Warn("the dead-letter queue has consumers: they may take messages while the redrive runs", "queue", opt.From, "consumers", counts.Consumers)
	}
	if r.get, err = b.conn.Channel(); err != nil {
		return sum, fmt.Errorf("opening a channel: %w", b.scrub(err))
	}
	defer func() {
		if rerr := b.requeue(r.get, r.held > 0); rerr != nil {
			err = errors.Join(err, fmt.Errorf("requeueing the messages left in %s: %w", opt.From, rerr))
		}
	}()
	if !opt.DryRun {
		if r.pub, err = b.conn.Channel(); err != nil {
			return sum, fmt.Errorf("opening a channel: %w", b.scrub(err))
		}
		defer func() { _ = r.pub.Close() }()
		if err := r.pub.Confirm(false); err != nil {
			return sum, fmt.Errorf("turning on publisher confirms: %w", b.scrub(err))
		}
		r.returns = r.pub.NotifyReturn(make(chan amqp.Return, 16)) // never full: the library's reader must not block
	}
	for n := 0; n < counts.Ready; n++ {
		if opt.Max > 0 && r.sum.Moved+r.sum.Failed+r.sum.WouldMove >= opt.Max || r.left != nil && len(r.left) == 0 {
			break
		}
		if err := ctx.Err(); err != nil {
			return r.sum, err
		}
		d, ok, err := r.get.Get(opt.From, false)
		if err != nil {
			return r.sum, b.getErr(opt.From, err)
		}
		if !ok {
			break
		}
		if err := r.one(ctx, d); err != nil {
			return r.sum, err
		}
	}
	return r.sum, nil
}

// run is the state of one Redrive.
type run struct {
	b       *Broker
	opt     Options
	log     *slog.Logger
	arn     string
	get     *amqp.Channel // basic.get and acks from the dead-letter queue
	pub     *amqp.Channel // confirmed publishes; nil in a dry run
	returns chan amqp.Return
	held    int             // deliveries of get left unacked
	left    map[string]bool // Options.IDs not moved or failed yet; nil: every message
	pace    pacer
	sum     redrive.Summary
}

// one handles one message of the dead-letter queue; an error stops the run.
func (r *run) one(ctx context.Context, d amqp.Delivery) error {
	m := rabbitmq.Record(d, r.opt.From, r.b.uri.Vhost, r.arn)
	id := m.MessageID
	if r.left != nil && !r.left[id] {
		r.report(redrive.Entry{MessageID: id, Outcome: redrive.Skipped})
		return nil
	}
	if r.opt.Filter != nil {
		ev, err := pipe.NewEvent(m)
		if err != nil || !r.opt.Filter.MatchEvent(ev) {
			r.report(redrive.Entry{MessageID: id, Outcome: redrive.Skipped})
			return nil
		}
	}
	msg := r.outgoing(d, time.Now())
	if r.opt.DryRun {
		e := redrive.Entry{MessageID: id, Outcome: redrive.WouldMove, Data: d.Body, Headers: rabbitmq.HeadersJSON(msg.Headers)}
		if utf8.Valid(d.Body) {
			e.Body = string(d.Body)
		}
		r.report(e)
		return nil
	}
	if err := r.pace.wait(ctx); err != nil {
		r.report(redrive.Entry{MessageID: id, Outcome: redrive.Failed, Error: err.Error()})
		return err
	}
	if err := r.publish(ctx, msg); err != nil {
		r.report(redrive.Entry{MessageID: id, Outcome: redrive.Failed, Error: fmt.Sprintf("publishing to %s: %v", r.opt.To, err)})
		if r.pub.IsClosed() || ctx.Err() != nil {
			return fmt.Errorf("publishing to %s: %w", r.opt.To, err)
		}
		return nil
	}
	if err := r.get.Ack(d.DeliveryTag, false); err != nil {
		err = fmt.Errorf("published to %s but not acked from %s (it is in both queues): %w", r.opt.To, r.opt.From, r.b.scrub(err))
		r.report(redrive.Entry{MessageID: id, Outcome: redrive.Failed, Error: err.Error()})
		return err
	}
	r.report(redrive.Entry{MessageID: id, Outcome: redrive.Moved})
	return nil
}

// outgoing is the copy of d that Redrive publishes.
func (r *run) outgoing(d amqp.Delivery, now time.Time) amqp.Publishing {
	headers := make(amqp.Table, len(d.Headers)+1)
	for k, v := range d.Headers {
		if !IsDeathHeader(k) && !redrive.IsContextAttribute(k) {
			headers[k] = v
		}
	}
	headers[redrive.AttrRedrivenAt] = now.UTC().Format(time.RFC3339Nano)
	msg := amqp.Publishing{
		Headers: headers, ContentType: d.ContentType, ContentEncoding: d.ContentEncoding,
		DeliveryMode: d.DeliveryMode, Priority: d.Priority, CorrelationId: d.CorrelationId,
		ReplyTo: d.ReplyTo, Expiration: d.Expiration, MessageId: d.MessageId, Timestamp: d.Timestamp,
		Type: d.Type, AppId: d.AppId, Body: d.Body,
	}
	if d.UserId == r.b.uri.Username {
		msg.UserId = d.UserId // the broker refuses another user's id
	}
	return msg
}

// IsDeathHeader tells whether an AMQP header is death history or an
// attempt count, which a redrive removes: x-death, x-first-death-*,
// x-last-death-*, x-delivery-count and pipes' x-pipes-attempts.
func IsDeathHeader(name string) bool {
	return name == "x-death" || name == "x-delivery-count" || name == rabbitmq.AttemptsHeader ||
		strings.HasPrefix(name, "x-first-death-") || strings.HasPrefix(name, "x-last-death-")
}

// publish publishes msg to opt.To and waits for the broker's confirm; a
// nack or a return (unroutable) is an error.
func (r *run) publish(ctx context.Context, msg amqp.Publishing) error {
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
stale:
	for { // late returns of an earlier publish that timed out
		select {
		case <-r.returns:
		default:
			break stale
		}
	}
	dc, err := r.pub.PublishWithDeferredConfirmWithContext(ctx, "", r.opt.To, true, false, msg)
	if err != nil {
		return r.b.scrub(err)
	}
	ok, err := dc.WaitContext(ctx)
	if err != nil {
		return fmt.Errorf("waiting for the confirm: %w", err)
	}
	// The broker sends basic.return before the confirm of the same
	// message, and the library hands it over before it reads the confirm.
	select {
	case ret := <-r.returns:
		return fmt.Errorf("the broker returned it unroutable (%d %s): is there a queue %s in vhost %s?", ret.ReplyCode, ret.ReplyText, r.opt.To, r.b.uri.Vhost)
	default:
	}
	if !ok {
		return errors.New("the broker nacked it")
	}
	return nil
}

// report counts an entry and hands it to opt.Report. Every message but a
// moved one is left unacked on the get channel, for the final requeue.
func (r *run) report(e redrive.Entry) {
	if e.Outcome != redrive.Moved {
		r.held++
	}
	if e.Outcome != redrive.Skipped {
		delete(r.left, e.MessageID)
	}
	r.sum.Count(e.Outcome)
	if r.opt.Report != nil {
		r.opt.Report(e)
	}
}

// pacer spaces publishes rate a second (0: no cap), allowing bursts of
// the rate, between 1 and 10, as redrive's token bucket does for SQS.
type pacer struct {
	rate float64
	next time.Time
}

// wait blocks until the next publish is due, or ctx is done.
func (p *pacer) wait(ctx context.Context) error {
	if p.rate <= 0 {
		return nil
	}
	burst := min(10, max(1, math.Floor(p.rate)))
	slack := time.Duration((burst - 1) / p.rate * float64(time.Second))
	now := time.Now()
	if p.next.Before(now.Add(-slack)) {
		p.next = now.Add(-slack)
	}
	if d := p.next.Sub(now); d > 0 {
		if err := backoff.Sleep(ctx, d); err != nil {
			return err
		}
	}
	p.next = p.next.Add(time.Duration(float64(time.Second) / p.rate))
	return nil
}
