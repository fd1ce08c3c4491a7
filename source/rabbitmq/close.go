package rabbitmq

import (
	"context"
	"fmt"
	"time"
)

// requeueSettle is how long after a requeue Pending still counts a
// message: the broker applies requeues asynchronously, and another
// channel's passive declare may not see one yet.
const requeueSettle = time.Second

// Pending counts the messages left in the queue: ready (a passive declare
// on a channel of its own) and unacked by this source (buffered, in
// flight, held or being re-published) and waiting in its delay queues
// (one passive declare each). Messages unacked by other
// consumers are not counted. The runtime asks it in drain mode. It blocks
// for those round trips and is safe for concurrent use. For requeueSettle
// after a message was given back it counts one more (see requeueSettle).
func (s *Source) Pending(ctx context.Context) (int, error) {
	if s.opened.Load() == nil {
		return 0, fmt.Errorf("RabbitMQ source %s: used before Open", s.cfg.Queue)
	}
	ss, err := s.current(ctx)
	if err != nil {
		return 0, err
	}
	ch, err := ss.conn.Channel()
	if err != nil {
		return 0, fmt.Errorf("counting the messages of RabbitMQ queue %s: %w", s.cfg.Queue, s.scrub(err))
	}
	defer ch.Close()
	// Re-publishes under way, then the delay queues, then the queue: a
	// message moving from one to the next meanwhile is counted twice
	// rather than never.
	publishing := int(s.publishes.Load())
	delayed, err := s.pendingDelayed(ctx, ss)
	if err != nil {
		return 0, err
	}
	q, err := ch.QueueDeclarePassive(s.cfg.Queue, false, false, false, false, nil)
	if err != nil {
		return 0, fmt.Errorf("counting the messages of RabbitMQ queue %s: %w", s.cfg.Queue, s.scrub(err))
	}
	n := q.Messages + delayed + len(ss.buf) + publishing
	if time.Since(time.Unix(0, s.requeuedAt.Load())) < requeueSettle || time.Since(time.Unix(0, s.delayedAt.Load())) < requeueSettle {
		// A message given back a moment ago may not be counted in the
		// queue yet: say it is there, so that --drain looks again.
		n++
	}
	s.mu.Lock()
	for _, e := range s.inflight {
		if e.sess == ss {
			n++
		}
	}
	s.mu.Unlock()
	return n, nil
}

// Close stops the source: it stops reconnecting, requeues at once what was
// received and not settled (held messages included; the pipe settles
// everything before Close, this is a safety net), cancels the consumer,
// requeues what was buffered and closes the connection; it then waits for
// every goroutine of the source. Re-publishes under way are cut short (their
// originals are requeued). It is safe to call more than once; later
// Receives fail.
func (s *Source) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil
	}
	s.closing = true
	close(s.stop)
	ss := s.sess
	left := make([]*entry, 0, len(s.inflight))
	failed := map[*entry]bool{} // held failures: rejected, so a delivery limit counts them
	for h, e := range s.inflight {
		failed[e] = e.timer != nil && e.then == rejectLater
		s.forgetLocked(h, e)
		left = append(left, e)
	}
	s.mu.Unlock()
	s.flushAcks() // lingering acks go before anything is requeued
	s.cancelBg()
	if len(left) > 0 {
		s.log.Warn("closing with unsettled messages: requeueing them", "queue", s.cfg.Queue, "messages", len(left))
	}
	for _, e := range left {
		switch {
		case !e.sess.alive(): // the broker requeued it
		case failed[e]:
			_ = e.sess.ch.Reject(e.tag, true)
		default:
			_ = e.sess.ch.Nack(e.tag, false, true)
		}
	}
	s.timers.Wait()
	if ss != nil && ss.alive() {
		_ = ss.ch.Cancel(ss.tag, false)
	drain:
		for {
			select {
			case b := <-ss.buf:
				_ = ss.ch.Nack(b.d.DeliveryTag, false, true)
			default:
				break drain
			}
		}
		ss.end(fmt.Errorf("RabbitMQ source %s: closed", s.cfg.Queue))
	}
	done := make(chan struct{})
	go func() {
		s.loops.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("closing RabbitMQ source %s: %w", s.cfg.Queue, ctx.Err())
	case <-time.After(2 * closeTimeout):
		return fmt.Errorf("closing RabbitMQ source %s: its goroutines did not end", s.cfg.Queue)
	}
}
