package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/source"
)

// DeferredAtHeader is the header of an outage's copy (Defer) that says
// when it was deferred (Unix milliseconds): a copy that fails whole again
// after the target worked for other batches is bisected by the pipe
// (pipe.DeferralTeller). A failure's copy does not carry it.
const DeferredAtHeader = "x-pipes-deferred-at"

var _ source.DeferralTeller = (*Source)(nil)

// DeferredAt is when Defer last moved m's message to a delay queue (its
// DeferredAtHeader), zero when never or when a failure's retry came in
// between, or when m is not in flight. It is safe for concurrent use.
func (s *Source) DeferredAt(m *source.Message) time.Time {
	s.mu.Lock()
	e := s.inflight[m.ReceiptHandle]
	var v any
	if e != nil {
		v = e.d.Headers[DeferredAtHeader]
	}
	s.mu.Unlock()
	var ms int64
	switch n := v.(type) {
	case int64:
		ms = n
	case int32:
		ms = int64(n)
	case int:
		ms = int64(n)
	default:
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// Operation names of pipe.SettleError.Op.
const (
	opAck        = "ack"
	opRequeue    = "requeue"
	opFail       = "fail"
	opDeadLetter = "dead-letter"
	opDefer      = "defer"
)

// Why settling a receipt can fail; both are the caller's fault (SenderFault):
// retrying does not help, and the broker redelivers the message.
var (
	// ErrUnknownReceipt: the receipt was never handed out by this source,
	// or it was settled already.
	ErrUnknownReceipt = errors.New("unknown receipt handle (never received, or settled already)")
	// ErrStaleReceipt: the channel the delivery came on closed (a
	// reconnection); the broker redelivers the message.
	ErrStaleReceipt = errors.New("the delivery's channel closed (its delivery tag is stale): the broker redelivers the message")
)

// action is what becomes of a failed message.
type action int

const (
	requeueNow    action = iota // basic.nack requeue: a give-back
	rejectLater                 // hold, then basic.reject requeue: a failure
	republishLate               // hold, then re-publish with the count and ack
	deadLetterNow               // basic.nack without requeue: to the DLX
	rejectNow                   // basic.reject requeue now: past a delivery limit the broker keeps
)

// Ack acks the messages (basic.ack): they are done. The oldest
// deliveries of a channel go with one multiple ack when every delivery
// before them was settled (see ackLedger); an ack above a delivery still
// unsettled waits up to 10 ms for it, to go with the same multiple ack,
// else it goes alone. Close sends the waiting acks before it requeues
// anything; a session that ends drops them (the broker redelivers). A receipt
// that is unknown, or whose channel closed, is reported in a
// *pipe.SettleError with SenderFault (the broker redelivers those). It
// does not block on the broker (acks have no answer) and is safe for
// concurrent use.
func (s *Source) Ack(ctx context.Context, msgs []*source.Message) error {
	es, failed := s.claim(msgs)
	s.ackEntries(es, failed)
	return settleError(opAck, failed)
}

// Nak gives the messages back. With delay 0 they are requeued at once
// (basic.nack with requeue: never dead-lettered, and on RabbitMQ ≥ 4.3
// not counted against a delivery limit). With a delay the message failed,
// and the queue decides:
//
//   - max_receive_count reached (attempts ≥ N): dead-lettered (basic.nack
//     without requeue) when the queue has a dead-letter exchange; without
//     one it is logged and requeued after the delay, never dropped;
//   - past a delivery limit: dead-lettered (basic.nack) when the message
//     went through a copy, else rejected with requeue now (the broker
//     dead-letters it, reason delivery_limit);
//   - a delivery limit or max_receive_count: retried after the delay,
//     its count carried in x-pipes-attempts;
//   - a dead-letter exchange: dead-lettered at once (reason rejected);
//   - else held for the delay, then requeued.
//
// A message that is to be dead-lettered but came back to this queue
// through a dead-letter cycle (its x-death shows it rejected from this
// queue max_receive_count times, or DefaultCycleLimit when unset: RabbitMQ
// drops only cycles without a rejection) is not dead-lettered again: the
// cycle is logged as an error naming its queues, and the message is held
// for the delay and requeued, never dropped.
//
// "After the delay" means through a delay queue (see the package doc):
// a confirmed copy, then the original acked; the copy carries the count.
// Delays below HoldBelow, and copies that cannot be placed, are held
// unacked instead (timers capped below the consumer timeout). The delay
// VisibilityTimeout means the pipe has none: the default backoff applies.
// Nak waits for neither. On a quorum queue of RabbitMQ before 4.3
// every requeue, a give-back's too, counts towards the delivery limit.
// Failures are reported like Ack's. It is safe for concurrent use.
func (s *Source) Nak(ctx context.Context, msgs []*source.Message, delay time.Duration) error {
	if delay <= 0 {
		return s.settleNow(msgs, opRequeue, requeueNow)
	}
	return s.fail(msgs, delay, opFail, false)
}

// Term dead-letters the messages through the queue's dead-letter exchange
// (basic.nack without requeue). Without one nothing is dropped: it logs an
// error and requeues them after VisibilityTimeout. A message that went
// round a dead-letter cycle is not dead-lettered again either (see Nak).
// Failures are reported like Ack's. It is safe for concurrent use.
func (s *Source) Term(ctx context.Context, msgs []*source.Message) error {
	q := s.opened.Load()
	if q != nil && !q.facts.HasDLX {
		s.log.Error("messages should be dead-lettered but the RabbitMQ queue has no dead-letter exchange: they are requeued after a delay instead",
			"queue", s.cfg.Queue, "messages", len(msgs), "delay", VisibilityTimeout.String())
	}
	return s.fail(msgs, VisibilityTimeout, opDeadLetter, true)
}

// Defer gives the messages of an outage back uncounted (source.Deferrer):
// a copy carrying the attempts before this delivery (x-pipes-attempts =
// attempts − 1, so that the next delivery counts as this one) goes to the
// delay queue of delay and is confirmed, then the original is acked. The
// delivery is thus no verdict: no delivery limit or max_receive_count is
// used up, nothing is dead-lettered, and the message waits outside the
// prefetch window. A crash at any instant means redelivery, never loss
// (see the package doc). A message whose copy cannot be placed is kept:
// left unacked, as it was, for the pipe to hold and send again. Unknown
// and stale receipts are reported like Ack's. It blocks for the confirms
// and is safe for concurrent use.
func (s *Source) Defer(ctx context.Context, msgs []*source.Message, delay time.Duration) ([]*source.Message, error) {
	if s.opened.Load() == nil {
		return msgs, fmt.Errorf("RabbitMQ source %s: used before Open", s.cfg.Queue)
	}
	failed := map[string]error{}
	es := make([]*entry, 0, len(msgs))
	ms := make([]*source.Message, 0, len(msgs))
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return msgs, fmt.Errorf("RabbitMQ source %s: closing", s.cfg.Queue)
	}
	for _, m := range msgs {
		e, err := s.lookupLocked(m.ReceiptHandle)
		if err != nil {
			failed[m.ReceiptHandle] = err
			continue
		}
		// Out of inflight while it moves (Close must not requeue it under
		// the publish), counted as a publish under way (Pending).
		s.publishes.Add(1)
		delete(s.inflight, e.handle)
		es, ms = append(es, e), append(ms, m)
	}
	s.timers.Add(1)
	s.mu.Unlock()
	defer s.timers.Done()
	var kept []*source.Message
	var why error
	for i, e := range es {
		err := s.deferOne(e, delay, time.Now())
		s.publishes.Add(-1)
		if err == nil {
			continue
		}
		ss := e.sess
		s.mu.Lock()
		if !s.closing && ss.alive() {
			s.inflight[e.handle] = e // as it was: the pipe holds it
			s.mu.Unlock()
			kept = append(kept, ms[i])
			why = err
			continue
		}
		s.forgetLocked(e.handle, e)
		s.mu.Unlock()
		if ss.alive() { // closing: give it back now
			s.requeuedAt.Store(time.Now().UnixNano())
			_ = ss.ch.Nack(e.tag, false, true)
			s.ledgerSettled(e)
		}
		failed[e.handle] = fmt.Errorf("%w (deferring: %v)", ErrStaleReceipt, err)
	}
	var errs []error
	if why != nil {
		errs = append(errs, fmt.Errorf("moving %d messages of RabbitMQ queue %s to their delay queue (they stay unacked and take prefetch slots meanwhile): %w",
			len(kept), s.cfg.Queue, why))
	}
	if err := settleError(opDefer, failed); err != nil {
		errs = append(errs, err)
	}
	return kept, errors.Join(errs...)
}

// deferOne moves e's message to the delay queue of delay with the
// attempts before this delivery (and deferred in DeferredAtHeader, unless
// zero), then acks the original and forgets e. On an error nothing was
// acked.
func (s *Source) deferOne(e *entry, delay time.Duration, deferred time.Time) error {
	ss := e.sess
	if !ss.alive() {
		return ErrStaleReceipt
	}
	name, err := s.ensureDelayQueue(ss, bucket(min(delay, MaxHold)))
	if err == nil {
		err = s.publishCopy(ss, e, name, e.attempts-1, deferred)
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.forgetLocked(e.handle, e)
	s.mu.Unlock()
	if err := ss.ch.Ack(e.tag, false); err != nil {
		s.log.Warn("acking a message moved to its delay queue failed: it will be delivered twice", "queue", s.cfg.Queue, "message_id", e.id, "error", err)
	}
	s.ledgerSettled(e)
	return nil
}

// settleNow claims the messages and applies a to each now.
func (s *Source) settleNow(msgs []*source.Message, op string, a action) error {
	es, failed := s.claim(msgs)
	for _, e := range es {
		if err := s.apply(e, a); err != nil {
			failed[e.handle] = err
		}
	}
	return settleError(op, failed)
}

// apply settles a claimed entry now.
func (s *Source) apply(e *entry, a action) error {
	var err error
	switch a {
	case requeueNow:
		s.requeuedAt.Store(time.Now().UnixNano())
		err = e.sess.ch.Nack(e.tag, false, true)
	case rejectLater, rejectNow:
		s.requeuedAt.Store(time.Now().UnixNano())
		err = e.sess.ch.Reject(e.tag, true)
	case deadLetterNow:
		err = e.sess.ch.Nack(e.tag, false, false)
	case republishLate:
		s.republish(e) // acks or rejects it before it returns
	}
	s.ledgerSettled(e)
	return staleOr(err)
}

// fail settles failed messages by the queue's rules (see Nak), or with
// term by Term's (dead-letter when there is a dead-letter exchange).
func (s *Source) fail(msgs []*source.Message, delay time.Duration, op string, term bool) error {
	q := s.opened.Load()
	if q == nil {
		return fmt.Errorf("RabbitMQ source %s: used before Open", s.cfg.Queue)
	}
	mrc := s.cfg.MaxReceiveCount
	limit := q.facts.DeliveryLimit
	failed := map[string]error{}
	var now []*entry
	var nowActs []action
	var noDLX int
	var cycles []*entry
	at := time.Now()
	s.mu.Lock()
	for _, m := range msgs {
		e, err := s.lookupLocked(m.ReceiptHandle)
		if err != nil {
			failed[m.ReceiptHandle] = err
			continue
		}
		d := retryDelay(delay, e.attempts)
		// brokerCounts: the broker's delivery count is the whole count
		// (no re-published copy in the message's past).
		_, copied := e.d.Headers[AttemptsHeader]
		brokerCounts := !copied && (q.facts.Type == "quorum" || e.d.Headers["x-delivery-count"] != nil)
		var a action
		switch {
		case term && q.facts.HasDLX:
			a = deadLetterNow
		case term:
			a = rejectLater // Term logged it: no dead-letter exchange
		case mrc > 0 && e.attempts >= mrc, limit > 0 && e.attempts > limit && !brokerCounts:
			if q.facts.HasDLX {
				a = deadLetterNow
			} else {
				a = rejectLater
				noDLX++
			}
		case limit > 0 && e.attempts > limit:
			a = rejectNow // the broker dead-letters it (reason delivery_limit)
		case limit > 0:
			a = rejectLater
		case mrc > 0:
			a = republishLate
			if brokerCounts {
				a = rejectLater
			}
		case q.facts.HasDLX:
			a = deadLetterNow
		default:
			a = rejectLater
		}
		if a == deadLetterNow && e.cycle != "" {
			a = rejectLater // dead-lettering it again would feed the cycle
			cycles = append(cycles, e)
		}
		if a == deadLetterNow || a == rejectNow || s.closing {
			if a == rejectLater || a == republishLate {
				a = requeueNow // closing: give it back now
			}
			s.forgetLocked(e.handle, e)
			now, nowActs = append(now, e), append(nowActs, a)
			continue
		}
		if d >= HoldBelow {
			// Out of the prefetch window: a confirmed copy in the
			// delay queue, then the original acked.
			s.forgetLocked(e.handle, e)
			s.timers.Add(1)
			go s.delayRetry(e, d, a)
			continue
		}
		s.holdLocked(e, min(d, s.holdCap(e, at)), a)
	}
	s.mu.Unlock()
	for _, e := range cycles {
		s.log.Error("a dead-letter cycle: the message keeps coming back to the RabbitMQ queue after being dead-lettered from it; it is retried after the delay instead of being dead-lettered again (fix the dead-letter exchanges of the queues in the cycle)",
			"queue", s.cfg.Queue, "message_id", e.id, "cycle", e.cycle, "limit", s.cycleLimit(), "delay", delay.String())
	}
	if noDLX > 0 {
		s.log.Error("messages reached max_receive_count or the delivery limit but the RabbitMQ queue has no dead-letter exchange: they are requeued after a delay instead",
			"queue", s.cfg.Queue, "messages", noDLX, "max_receive_count", mrc, "delivery_limit", limit, "delay", delay.String())
	}
	for i, e := range now {
		if err := s.apply(e, nowActs[i]); err != nil {
			failed[e.handle] = err
		}
	}
	return settleError(op, failed)
}

// holdLocked keeps e unacked for delay, then applies a. A second hold
// replaces the first. s.mu is held.
func (s *Source) holdLocked(e *entry, delay time.Duration, a action) {
	if e.timer != nil && e.timer.Stop() {
		s.timers.Done()
	}
	s.timers.Add(1)
	e.then = a
	e.timer = time.AfterFunc(delay, func() {
		defer s.timers.Done()
		s.mu.Lock()
		if s.inflight[e.handle] != e || e.timer == nil {
			s.mu.Unlock()
			return // settled or forgotten meanwhile
		}
		e.timer = nil // this callback runs: nothing to stop
		s.forgetLocked(e.handle, e)
		s.mu.Unlock()
		if err := s.apply(e, a); err != nil {
			s.log.Warn("requeueing a held message failed; the broker redelivers it", "queue", s.cfg.Queue, "message_id", e.id, "error", err)
		}
	})
}

// republish puts a copy of e's message at the tail of the queue with the
// attempts so far in AttemptsHeader, waits for the broker's confirm, then
// acks the original. When the copy is not confirmed the original is
// requeued instead (it keeps its count only where the broker keeps one).
func (s *Source) republish(e *entry) {
	s.publishes.Add(1)
	defer s.publishes.Add(-1)
	ss := e.sess
	if !ss.alive() {
		return // the broker redelivers the original
	}
	err := s.publishCopy(ss, e, s.cfg.Queue, e.attempts, time.Time{})
	if err == nil {
		if err := ss.ch.Ack(e.tag, false); err != nil {
			s.log.Warn("acking a re-published message failed: it will be delivered twice", "queue", s.cfg.Queue, "message_id", e.id, "error", err)
		}
		return
	}
	if rerr := ss.ch.Reject(e.tag, true); rerr != nil {
		s.log.Warn("re-publishing a failed message and requeueing it failed; the broker redelivers it",
			"queue", s.cfg.Queue, "message_id", e.id, "error", err)
		return
	}
	s.log.Error("re-publishing a failed message with its delivery count failed: it was requeued without its count",
		"queue", s.cfg.Queue, "message_id", e.id, "error", err)
}

// publishCopy publishes the copy through the default exchange to queue,
// attempts in AttemptsHeader (the failed deliveries it carries) and, for an
// outage's copy, deferred in DeferredAtHeader (zero: none), and waits for
// its confirm; a return (unroutable) or a nack is an error.
func (s *Source) publishCopy(ss *session, e *entry, queue string, attempts int, deferred time.Time) error {
	headers := make(amqp.Table, len(e.d.Headers)+2)
	for k, v := range e.d.Headers {
		headers[k] = v
	}
	headers[AttemptsHeader] = int64(max(attempts, 0))
	delete(headers, DeferredAtHeader)
	if !deferred.IsZero() {
		headers[DeferredAtHeader] = deferred.UnixMilli()
	}
	msg := amqp.Publishing{
		Headers: headers, ContentType: e.d.ContentType, ContentEncoding: e.d.ContentEncoding,
		// Always persistent: a quorum queue keeps even a transient message
		// through a broker restart, and the classic delay queue must too.
		DeliveryMode: amqp.Persistent, Priority: e.d.Priority, CorrelationId: e.d.CorrelationId,
		ReplyTo: e.d.ReplyTo, Expiration: e.d.Expiration, MessageId: e.d.MessageId, Timestamp: e.d.Timestamp,
		Type: e.d.Type, AppId: e.d.AppId, Body: e.d.Body,
	}
	if e.d.UserId == s.uri.Username {
		msg.UserId = e.d.UserId // the broker refuses another user's id
	}
	ctx, cancel := context.WithTimeout(s.bg, publishTimeout)
	defer cancel()
	ss.pubMu.Lock()
	defer ss.pubMu.Unlock()
stale:
	for { // late returns of earlier publishes that timed out
		select {
		case <-ss.returns:
		default:
			break stale
		}
	}
	dc, err := ss.pub.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, msg)
	if err != nil {
		return fmt.Errorf("publishing: %w", s.scrub(err))
	}
	ok, err := dc.WaitContext(ctx)
	if err != nil {
		return fmt.Errorf("waiting for the confirm: %w", err)
	}
	if !ok {
		return errors.New("the broker nacked the copy")
	}
	// The broker sends basic.return before the confirm of the same
	// message, and the library hands it over before it reads the confirm.
	select {
	case r := <-ss.returns:
		return fmt.Errorf("the copy was returned unroutable: %d %s", r.ReplyCode, r.ReplyText)
	default:
	}
	return nil
}

// claim takes the entries of the messages out of the source: the caller
// settles them. Receipts that cannot be settled are in failed.
func (s *Source) claim(msgs []*source.Message) (es []*entry, failed map[string]error) {
	failed = map[string]error{}
	es = make([]*entry, 0, len(msgs))
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		e, err := s.lookupLocked(m.ReceiptHandle)
		if err != nil {
			failed[m.ReceiptHandle] = err
			continue
		}
		s.forgetLocked(e.handle, e)
		es = append(es, e)
	}
	return es, failed
}

// lookupLocked finds the live entry of a receipt; one of an ended session
// is forgotten and reported stale. s.mu is held.
func (s *Source) lookupLocked(handle string) (*entry, error) {
	e := s.inflight[handle]
	if e == nil {
		return nil, ErrUnknownReceipt
	}
	if !e.sess.alive() {
		s.forgetLocked(handle, e)
		return nil, ErrStaleReceipt
	}
	return e, nil
}

// staleOr maps a settle call's error: the only way one fails is a closed
// channel, which makes the tag stale.
func staleOr(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w (%v)", ErrStaleReceipt, err)
}

// settleError reports failed receipts; every failure here is the sender's
// fault (unknown or stale receipt): retrying does not help.
func settleError(op string, failed map[string]error) error {
	if len(failed) == 0 {
		return nil
	}
	return &core.SettleError{Op: op, Failed: failed, SenderFault: true}
}

// cycleLimit is how many rejections from the queue make a dead-letter
// cycle: max_receive_count, else DefaultCycleLimit.
func (s *Source) cycleLimit() int {
	if s.cfg.MaxReceiveCount > 0 {
		return s.cfg.MaxReceiveCount
	}
	return DefaultCycleLimit
}
