package rabbitmq

import (
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/internal/backoff"
	"github.com/pipesproject/pipes/source"
)

// Retry delays. See the package doc, "Retry delays outside the prefetch
// window".
const (
	// HoldBelow is the shortest delay that goes through a delay queue: a
	// shorter one is held unacked (it takes a prefetch slot that long),
	// as a delay-queue round trip costs about as much.
	HoldBelow = 250 * time.Millisecond
	// DefaultConsumerTimeout is the broker's consumer_timeout assumed when
	// the queue sets none (RabbitMQ's default; the management API does not
	// show the global setting).
	DefaultConsumerTimeout = 30 * time.Minute
	// DelayQueueInfix is in the names of the delay queues the source
	// declares: <queue>.pipes-delay.<delay>, e.g. orders.pipes-delay.1.5s.
	DelayQueueInfix = ".pipes-delay."
	// delayQueueRedeclare is how often a delay queue in use is declared
	// again: that renews its x-expires lease, which publishes do not.
	delayQueueRedeclare = time.Minute
	// delayQueueIdle is how long past its TTL an unused delay queue lives
	// (x-expires = TTL + delayQueueIdle > TTL + delayQueueRedeclare, so a
	// message published to it always expires back before the queue goes).
	delayQueueIdle = 10 * time.Minute
)

// defaultRetry is the delay of a failure the pipe gives no delay of its
// own (no retry_backoff): about 1 s, doubling, equal jitter, up to 30 s.
var defaultRetry = backoff.Exponential{Base: time.Second, Max: 30 * time.Second, Jitter: backoff.Equal}

// delayLadder are the TTLs of the delay queues: a delay is rounded up to
// the next one (the last caps it). One queue per TTL keeps expiry in
// publish order: a per-message TTL would let a long delay at the head of
// a queue hold back the short ones behind it.
var delayLadder = [...]time.Duration{
	500 * time.Millisecond, 750 * time.Millisecond, time.Second, 1500 * time.Millisecond,
	2 * time.Second, 3 * time.Second, 5 * time.Second, 8 * time.Second, 13 * time.Second,
	20 * time.Second, 30 * time.Second, 45 * time.Second, time.Minute, 2 * time.Minute,
	3 * time.Minute, 5 * time.Minute, 8 * time.Minute, 13 * time.Minute, 20 * time.Minute, MaxHold,
}

// bucket is the TTL of the delay queue a delay d goes to.
func bucket(d time.Duration) time.Duration {
	for _, b := range delayLadder {
		if d <= b {
			return b
		}
	}
	return delayLadder[len(delayLadder)-1]
}

// delayQueue is the name of the source's delay queue of TTL ttl.
func (s *Source) delayQueue(ttl time.Duration) string {
	return s.cfg.Queue + DelayQueueInfix + ttl.String()
}

// retryDelay is the delay of a failed delivery: the pipe's, or, when the
// pipe has none of its own (it passes VisibilityTimeout), the default
// backoff by the delivery's attempts.
func retryDelay(delay time.Duration, attempts int) time.Duration {
	if delay == VisibilityTimeout {
		return defaultRetry.Delay(attempts)
	}
	return delay
}

// consumerTimeout is the broker's consumer_timeout as the source takes it:
// the queue's (management API), else DefaultConsumerTimeout; a test may
// set its own (Source.consumerTimeoutForTest).
func (s *Source) consumerTimeout() time.Duration {
	if s.consumerTimeoutForTest > 0 {
		return s.consumerTimeoutForTest
	}
	if q := s.opened.Load(); q != nil && q.facts.ConsumerTimeout > 0 {
		return q.facts.ConsumerTimeout
	}
	return DefaultConsumerTimeout
}

// maxUnacked is how long a delivery may stay unacked from its arrival:
// the consumer timeout less a margin (a tenth of it, at most a minute).
func (s *Source) maxUnacked() time.Duration {
	ct := s.consumerTimeout()
	return ct - min(ct/10, time.Minute)
}

// holdCap is how long e may still be held unacked: the consumer timeout
// less the delivery's age, less a margin (a tenth of the timeout, at most a
// minute), never below 0.
func (s *Source) holdCap(e *entry, now time.Time) time.Duration {
	return max(s.maxUnacked()-now.Sub(e.received), 0)
}

var _ source.HoldLimiter = (*Source)(nil)

// HoldUntil is when m, received and not settled, must be given back at
// the latest (pipe.HoldLimiter): its arrival plus the consumer timeout,
// less the margin (see holdCap). The pipe gives back an outage's messages
// it holds itself (where Defer could not place a copy) before then, so
// that the broker never closes the channel over them (and redelivers
// them, counted). Zero when m is not in flight. It is safe for concurrent
// use.
func (s *Source) HoldUntil(m *source.Message) time.Time {
	s.mu.Lock()
	e := s.inflight[m.ReceiptHandle]
	s.mu.Unlock()
	if e == nil {
		return time.Time{}
	}
	return e.received.Add(s.maxUnacked())
}

// buffered is a delivery in the consumer's buffer, with when it came.
type buffered struct {
	d  amqp.Delivery
	at time.Time
}

// reap gives back, before the consumer timeout, the deliveries that wait
// too long in ss's buffer: the broker prefetches up to the prefetch count
// while the pipe takes nothing (its circuit open: it receives one probe
// batch at a time), and an unacked delivery ages from its arrival. It
// runs on s.loops until ss ends.
func (s *Source) reap(ss *session) {
	defer s.loops.Done()
	for {
		every := min(max(s.maxUnacked()/10, 10*time.Millisecond), 30*time.Second)
		t := time.NewTimer(every)
		select {
		case <-ss.dead:
			t.Stop()
			return
		case <-t.C:
		}
		// What would pass the cap before the next sweep goes now.
		s.reapBuffer(ss, time.Now(), s.maxUnacked()-every)
	}
}

// reapBuffer gives back the deliveries of ss's buffer older than maxAge at
// now; the others go back in order. The buffer never overflows: what it
// holds is unacked, and the prefetch (its capacity) bounds that.
func (s *Source) reapBuffer(ss *session, now time.Time, maxAge time.Duration) int {
	var keep, old []buffered
drain:
	for {
		select {
		case b := <-ss.buf:
			if now.Sub(b.at) >= maxAge {
				old = append(old, b)
			} else {
				keep = append(keep, b)
			}
		default:
			break drain
		}
	}
	for _, b := range keep {
		select {
		case ss.buf <- b:
		default:
			old = append(old, b) // never: the buffer holds the prefetch
		}
	}
	if len(old) == 0 {
		return 0
	}
	s.log.Warn("deliveries waited in the consumer's buffer close to the broker's consumer_timeout (the pipe takes none: its circuit is open?): they are given back",
		"queue", s.cfg.Queue, "messages", len(old), "consumer_timeout", s.consumerTimeout().String())
	for _, b := range old {
		s.giveBackUnseen(ss, b)
	}
	return len(old)
}

// giveBackUnseen gives back a delivery the pipe never received: a copy
// with the attempts before it goes to a delay queue (its next delivery
// counts as this one), else it is requeued (basic.nack: a classic queue
// flags it redelivered, and a quorum queue before RabbitMQ 4.3 counts it
// towards its delivery limit).
func (s *Source) giveBackUnseen(ss *session, b buffered) {
	s.publishes.Add(1)
	defer s.publishes.Add(-1)
	e := &entry{sess: ss, d: b.d, tag: b.d.DeliveryTag, received: b.at, attempts: attempts(&b.d, s.cfg.Queue),
		id: b.d.MessageId, handle: "unseen"}
	err := s.deferOne(e, defaultRetry.Base, time.Time{})
	if err == nil {
		return
	}
	s.requeuedAt.Store(time.Now().UnixNano())
	if nerr := ss.ch.Nack(b.d.DeliveryTag, false, true); nerr != nil {
		s.log.Warn("giving back a delivery near the consumer timeout failed; the broker redelivers it", "queue", s.cfg.Queue, "error", nerr)
		return
	}
	s.ledgerSettled(e)
	s.log.Warn("moving a delivery near the consumer timeout to a delay queue failed: it was requeued instead", "queue", s.cfg.Queue, "error", err)
}

// ensureDelayQueue declares the delay queue of ttl on a channel of its
// own (a refused declare closes the channel it was made on), unless it was
// declared less than delayQueueRedeclare ago. Its expired messages are
// dead-lettered through the default exchange back to the source's queue.
func (s *Source) ensureDelayQueue(ss *session, ttl time.Duration) (string, error) {
	name := s.delayQueue(ttl)
	now := time.Now()
	s.mu.Lock()
	last, ok := s.delayQueues[name]
	s.mu.Unlock()
	if ok && now.Sub(last) < delayQueueRedeclare {
		return name, nil
	}
	ch, err := ss.conn.Channel()
	if err != nil {
		return "", fmt.Errorf("opening a channel to declare the delay queue %s: %w", name, s.scrub(err))
	}
	defer ch.Close()
	args := amqp.Table{
		"x-queue-type":              "classic",
		"x-message-ttl":             ttl.Milliseconds(),
		"x-expires":                 (ttl + delayQueueIdle).Milliseconds(),
		"x-dead-letter-exchange":    "",
		"x-dead-letter-routing-key": s.cfg.Queue,
	}
	if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		return "", fmt.Errorf("declaring the delay queue %s: %w", name, s.scrub(err))
	}
	s.mu.Lock()
	s.delayQueues[name] = now
	s.mu.Unlock()
	return name, nil
}

// delayRetry moves e's message to the delay queue of its delay: a copy
// with the attempts so far in AttemptsHeader is published there and
// confirmed, then the original is acked (a crash between the two means a
// duplicate, never a loss). When the copy cannot be placed, e is held
// unacked instead (capped by holdCap) and then a is applied. It runs on a
// goroutine of s.timers; e is claimed (not in s.inflight).
func (s *Source) delayRetry(e *entry, delay time.Duration, a action) {
	defer s.timers.Done()
	s.publishes.Add(1)
	defer s.publishes.Add(-1)
	ss := e.sess
	if !ss.alive() {
		return // the broker redelivers the original
	}
	name, err := s.ensureDelayQueue(ss, bucket(delay))
	if err == nil {
		err = s.publishCopy(ss, e, name, e.attempts, time.Time{})
	}
	if err == nil {
		if err := ss.ch.Ack(e.tag, false); err != nil {
			s.log.Warn("acking a message moved to its delay queue failed: it will be delivered twice", "queue", s.cfg.Queue, "message_id", e.id, "error", err)
		}
		s.ledgerSettled(e)
		return
	}
	s.log.Warn("moving a failed message to its delay queue failed: it is held unacked for its delay instead (it takes a prefetch slot meanwhile)",
		"queue", s.cfg.Queue, "message_id", e.id, "delay", delay.String(), "error", err)
	s.mu.Lock()
	if !s.closing && ss.alive() {
		s.inflight[e.handle] = e
		s.holdLocked(e, min(delay, s.holdCap(e, time.Now())), a)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	if ss.alive() { // closing: give it back now
		s.requeuedAt.Store(time.Now().UnixNano())
		_ = ss.ch.Reject(e.tag, true)
		s.ledgerSettled(e)
	}
}

// pendingDelayed counts the messages in the delay queues this source
// used, each read on a channel of its own (a missing queue closes it).
func (s *Source) pendingDelayed(ctx context.Context, ss *session) (int, error) {
	s.mu.Lock()
	names := make([]string, 0, len(s.delayQueues))
	for n := range s.delayQueues {
		names = append(names, n)
	}
	s.mu.Unlock()
	total := 0
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		ch, err := ss.conn.Channel()
		if err != nil {
			return 0, fmt.Errorf("counting the messages of delay queue %s: %w", n, s.scrub(err))
		}
		q, err := ch.QueueDeclarePassive(n, false, false, false, false, nil)
		_ = ch.Close()
		if err != nil {
			continue // expired: empty
		}
		total += q.Messages
	}
	if total > 0 {
		s.delayedAt.Store(time.Now().UnixNano())
	}
	return total, nil
}
