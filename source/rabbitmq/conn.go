package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/internal/backoff"
	"github.com/pipesproject/pipes/pipe"
)

// Connection tuning.
const (
	dialTimeout = 10 * time.Second
	heartbeat   = 10 * time.Second
	// closeTimeout bounds closing a connection.
	closeTimeout = 5 * time.Second
	// publishTimeout bounds one re-publish and its confirm.
	publishTimeout = 30 * time.Second
)

// reconnect is the wait between reconnection attempts.
var reconnect = backoff.Exponential{Base: 200 * time.Millisecond, Max: 30 * time.Second, Jitter: backoff.Equal}

// session is one connection with its consuming channel (which settles the
// deliveries it got: delivery tags belong to it) and a channel in confirm
// mode for re-publishes. It ends once; then its tags are stale.
type session struct {
	gen  uint64
	conn *amqp.Connection
	ch   *amqp.Channel
	tag  string
	buf  chan buffered // deliveries not yet returned by Receive
	acks *ackLedger    // what was settled on ch (multiple acks, lingering acks)

	pubMu   sync.Mutex // one re-publish at a time, so a return is its own
	pub     *amqp.Channel
	returns chan amqp.Return

	dead chan struct{} // closed when the session ended
	once sync.Once
	err  error // why it ended; set before dead is closed
}

// end ends the session with err (the first reason wins) and closes its
// connection.
func (ss *session) end(err error) {
	ss.once.Do(func() {
		ss.err = err
		close(ss.dead)
		if ss.acks != nil {
			ss.acks.drop() // acks still lingering cannot go: the broker redelivers those
		}
		_ = ss.conn.CloseDeadline(time.Now().Add(closeTimeout))
	})
}

// alive reports whether the session has not ended.
func (ss *session) alive() bool {
	select {
	case <-ss.dead:
		return false
	default:
		return true
	}
}

// dial connects and checks that the queue exists (a passive declare). A
// missing queue, a refused login and an unknown vhost are pipe.Permanent.
func (s *Source) dial() (*amqp.Connection, error) {
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(s.connName)
	conn, err := amqp.DialConfig(s.cfg.URL, amqp.Config{
		Properties: props,
		Heartbeat:  heartbeat,
		Dial:       amqp.DefaultDial(dialTimeout),
	})
	if err != nil {
		err = fmt.Errorf("connecting to RabbitMQ at %s: %w", s.uri.Host, s.scrub(err))
		var ae *amqp.Error
		if errors.As(err, &ae) && (ae.Code == amqp.AccessRefused || ae.Code == amqp.NotAllowed) {
			return nil, pipe.Permanent(err)
		}
		if errors.Is(err, amqp.ErrCredentials) || errors.Is(err, amqp.ErrVhost) || errors.Is(err, amqp.ErrSASL) {
			return nil, pipe.Permanent(err)
		}
		return nil, err
	}
	ch, err := conn.Channel()
	if err == nil {
		_, err = ch.QueueDeclarePassive(s.cfg.Queue, false, false, false, false, nil)
		_ = ch.Close()
	}
	if err != nil {
		_ = conn.CloseDeadline(time.Now().Add(closeTimeout))
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.NotFound {
			return nil, pipe.Permanent(fmt.Errorf("RabbitMQ queue %s does not exist in vhost %s: declare it first (pipes never declares the queues it reads)", s.cfg.Queue, s.uri.Vhost))
		}
		if errors.As(err, &ae) && (ae.Code == amqp.AccessRefused || ae.Code == amqp.ResourceLocked) {
			return nil, pipe.Permanent(fmt.Errorf("checking RabbitMQ queue %s: %w", s.cfg.Queue, s.scrub(err)))
		}
		return nil, fmt.Errorf("checking RabbitMQ queue %s: %w", s.cfg.Queue, s.scrub(err))
	}
	return conn, nil
}

// start opens the consuming and publishing channels of conn and starts
// consuming with the prefetch; the session's goroutines belong to s.loops.
func (s *Source) start(conn *amqp.Connection, gen uint64) (*session, error) {
	ss := &session{
		gen: gen, conn: conn, dead: make(chan struct{}),
		tag:     fmt.Sprintf("%s #%d", s.connName, gen),
		buf:     make(chan buffered, s.prefetch),
		returns: make(chan amqp.Return, 16), // never full: the library's reader must not block
	}
	fail := func(what string, err error) (*session, error) {
		_ = conn.CloseDeadline(time.Now().Add(closeTimeout))
		return nil, fmt.Errorf("%s on RabbitMQ queue %s: %w", what, s.cfg.Queue, s.scrub(err))
	}
	var err error
	if ss.ch, err = conn.Channel(); err != nil {
		return fail("opening a channel", err)
	}
	if err := ss.ch.Qos(s.prefetch, 0, false); err != nil {
		return fail("setting the prefetch", err)
	}
	ss.acks = newAckLedger(ss.ch.Ack, s.prefetch)
	if ss.pub, err = conn.Channel(); err != nil {
		return fail("opening the publishing channel", err)
	}
	if err := ss.pub.Confirm(false); err != nil {
		return fail("turning publisher confirms on", err)
	}
	ss.pub.NotifyReturn(ss.returns)
	connClosed := conn.NotifyClose(make(chan *amqp.Error, 1))
	chClosed := ss.ch.NotifyClose(make(chan *amqp.Error, 1))
	pubClosed := ss.pub.NotifyClose(make(chan *amqp.Error, 1))
	cancelled := ss.ch.NotifyCancel(make(chan string, 1))
	deliveries, err := ss.ch.Consume(s.cfg.Queue, ss.tag, false, false, false, false, nil)
	if err != nil {
		return fail("starting the consumer", err)
	}
	s.loops.Add(3)
	go s.reap(ss)
	go func() { // watch: the first sign of an end ends the session
		defer s.loops.Done()
		var err error
		select {
		case e := <-connClosed:
			err = closeReason("connection", e)
		case e := <-chClosed:
			err = closeReason("channel", e)
		case e := <-pubClosed:
			err = closeReason("publishing channel", e)
		case <-cancelled:
			err = fmt.Errorf("the broker cancelled the consumer of queue %s (was it deleted?)", s.cfg.Queue)
		case <-ss.dead:
		}
		ss.end(err)
	}()
	go func() { // pump: deliveries into buf, which never fills (prefetch)
		defer s.loops.Done()
		for d := range deliveries {
			select {
			case ss.buf <- buffered{d: d, at: time.Now()}:
			case <-ss.dead:
				return
			}
		}
		select { // the consumer ended: the watcher tells why
		case <-ss.dead:
		case <-time.After(time.Second):
			ss.end(errors.New("the consumer's deliveries ended"))
		}
	}()
	return ss, nil
}

// closeReason says why a connection or channel closed; a consumer_timeout
// gets a message of its own.
func closeReason(what string, e *amqp.Error) error {
	if e == nil {
		return fmt.Errorf("the %s was closed", what)
	}
	// The broker says "delivery acknowledgement on channel N timed out" in
	// the reason of a PRECONDITION_FAILED close: the only sign of it.
	if e.Code == amqp.PreconditionFailed && strings.Contains(e.Reason, "acknowledgement") && strings.Contains(e.Reason, "timed out") {
		return &ConsumerTimeoutError{Reason: e.Reason}
	}
	return fmt.Errorf("the broker closed the %s: %w", what, e)
}

// ConsumerTimeoutError says the broker closed the channel because a
// delivery was not settled within its consumer_timeout (30 min by
// default): a batch took longer than that. The channel's unsettled
// messages are redelivered.
type ConsumerTimeoutError struct {
	// Reason is the broker's text.
	Reason string
}

// Error explains the timeout and what to do.
func (e *ConsumerTimeoutError) Error() string {
	return "the broker closed the channel: a delivery was not acknowledged within the broker's consumer_timeout " +
		"(30 min by default; rabbitmq.conf consumer_timeout): a batch took longer than that, and its messages are redelivered; " +
		"shorten the batch or raise consumer_timeout (" + e.Reason + ")"
}

// install makes ss the current session, unless the source is closing.
func (s *Source) install(ss *session) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		ss.end(errors.New("the source is closing"))
		return false
	}
	s.sess, s.lastErr = ss, nil
	close(s.ready)
	return true
}

// lost clears the ended session ss and forgets the held messages of it:
// the broker requeues them.
func (s *Source) lost(ss *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess == ss {
		s.sess = nil
		s.ready = make(chan struct{})
		s.lastErr = fmt.Errorf("the connection to RabbitMQ for queue %s was lost (%w); reconnecting", s.cfg.Queue, ss.err)
	}
	for h, e := range s.inflight {
		if e.sess == ss && e.timer != nil {
			s.forgetLocked(h, e)
		}
	}
}

// run reconnects when a session ends, with backoff, until Close.
func (s *Source) run(ss *session) {
	defer s.loops.Done()
	for {
		select {
		case <-ss.dead:
		case <-s.stop:
			return
		}
		s.lost(ss)
		level := slog.LevelWarn
		var ct *ConsumerTimeoutError
		if errors.As(ss.err, &ct) {
			level = slog.LevelError // a batch outlived consumer_timeout: it will come back
		}
		s.log.Log(context.Background(), level, "the RabbitMQ connection was lost; reconnecting (unsettled messages are redelivered by the broker)",
			"queue", s.cfg.Queue, "error", ss.err)
		for attempt := 1; ; attempt++ {
			t := time.NewTimer(reconnect.Delay(attempt))
			select {
			case <-t.C:
			case <-s.stop:
				t.Stop()
				return
			}
			next, err := s.connect()
			if err == nil {
				if !s.install(next) {
					return
				}
				ss = next
				s.log.Info("reconnected to RabbitMQ", "queue", s.cfg.Queue, "attempts", attempt)
				break
			}
			s.mu.Lock()
			s.lastErr = fmt.Errorf("reconnecting to RabbitMQ for queue %s: %w", s.cfg.Queue, err)
			s.mu.Unlock()
			s.log.Warn("reconnecting to RabbitMQ failed", "queue", s.cfg.Queue, "error", err, "attempt", attempt)
		}
	}
}

// connect dials and starts a session of the next generation.
func (s *Source) connect() (*session, error) {
	conn, err := s.dial()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.gen++
	gen := s.gen
	s.mu.Unlock()
	return s.start(conn, gen)
}

// current returns the live session, waiting up to a second (or ctx) for a
// reconnection; without one it says why.
func (s *Source) current(ctx context.Context) (*session, error) {
	s.mu.Lock()
	ss, ready, err := s.sess, s.ready, s.lastErr
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return nil, fmt.Errorf("RabbitMQ source %s: closed", s.cfg.Queue)
	}
	if ss != nil {
		return ss, nil
	}
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-ready:
		s.mu.Lock()
		ss, err = s.sess, s.lastErr
		s.mu.Unlock()
		if ss != nil {
			return ss, nil
		}
	case <-t.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err == nil {
		err = fmt.Errorf("RabbitMQ source %s: not connected", s.cfg.Queue)
	}
	return nil, err
}
