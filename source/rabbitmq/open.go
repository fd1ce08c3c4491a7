package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

// queueInfo is what Open learnt of the queue.
type queueInfo struct {
	facts queueFacts
	// fromManagement is true when the facts came from the management API,
	// false when they are the fallback keys.
	fromManagement bool
	info           source.Info
}

// Open connects, checks that the queue exists, learns its type,
// dead-letter exchange and delivery limit from the management API (or the
// fallback keys when it is off or cannot be reached: a warning says so),
// checks that the dead-letter exchange exists, and starts consuming. It
// blocks for those steps. A missing queue or dead-letter exchange, a
// refused login and a stream queue are pipe.Permanent errors. After a
// successful Open, later calls return the same source.Info.
func (s *Source) Open(ctx context.Context) (source.Info, error) {
	s.openMu.Lock()
	defer s.openMu.Unlock()
	if q := s.opened.Load(); q != nil {
		return q.info, nil
	}
	conn, err := s.dial()
	if err != nil {
		return source.Info{}, s.explainDial(err)
	}
	q := &queueInfo{}
	q.facts, q.fromManagement = s.learn(ctx)
	if q.facts.Type == "stream" {
		_ = conn.CloseDeadline(time.Now().Add(closeTimeout))
		return source.Info{}, pipe.Permanent(fmt.Errorf("RabbitMQ queue %s is a stream: pipes reads classic and quorum queues", s.cfg.Queue))
	}
	if err := s.checkExchange(conn, q.facts); err != nil {
		_ = conn.CloseDeadline(time.Now().Add(closeTimeout))
		return source.Info{}, err
	}
	s.mu.Lock()
	s.gen++
	gen := s.gen
	s.mu.Unlock()
	ss, err := s.start(conn, gen)
	if err != nil {
		return source.Info{}, err
	}
	q.info = s.sourceInfo(q.facts)
	s.opened.Store(q)
	if !s.install(ss) {
		return source.Info{}, fmt.Errorf("RabbitMQ source %s: closed", s.cfg.Queue)
	}
	s.advise(q.facts)
	s.loops.Add(1)
	go s.run(ss)
	return q.info, nil
}

// learn reads the queue's facts from the management API, or returns the
// fallback keys (and says why).
func (s *Source) learn(ctx context.Context) (queueFacts, bool) {
	fallback := s.fallbackFacts()
	if s.mgmt == "" {
		s.log.Info("the management API is off: the queue's dead-letter exchange and delivery limit are taken from dead_letter_exchange, dead_letter_routing_key and delivery_limit",
			"queue", s.cfg.Queue, "dead_letter_exchange", s.cfg.DeadLetterExchange, "dead_letter_routing_key", s.cfg.DeadLetterRoutingKey,
			"delivery_limit", s.cfg.DeliveryLimit)
		return fallback, false
	}
	f, err := s.fetchFacts(ctx)
	if err != nil {
		if errors.Is(err, errNotFound) {
			err = fmt.Errorf("it does not know queue %s in vhost %s", s.cfg.Queue, s.uri.Vhost)
		}
		s.log.Warn("the management API cannot be used to read the queue's arguments and policies "+
			"(is the management plugin on? rabbitmq-plugins enable rabbitmq_management): "+
			"its dead-letter exchange and delivery limit are taken from dead_letter_exchange, dead_letter_routing_key and delivery_limit",
			"queue", s.cfg.Queue, "management_url", s.mgmt, "error", s.scrub(err),
			"dead_letter_exchange", s.cfg.DeadLetterExchange, "dead_letter_routing_key", s.cfg.DeadLetterRoutingKey,
			"delivery_limit", s.cfg.DeliveryLimit)
		return fallback, false
	}
	return f, true
}

// fallbackFacts are the queue's facts as Config's fallback keys describe
// them: DefaultExchange, or "" with a routing key, is the default
// exchange; "" without one is none.
func (s *Source) fallbackFacts() queueFacts {
	f := queueFacts{DeliveryLimit: s.cfg.DeliveryLimit, DeadLetterRoutingKey: s.cfg.DeadLetterRoutingKey}
	switch x := s.cfg.DeadLetterExchange; {
	case x == DefaultExchange:
		f.HasDLX = true
	case x != "":
		f.DeadLetterExchange, f.HasDLX = x, true
	case s.cfg.DeadLetterRoutingKey != "":
		f.HasDLX = true
	default:
		f.DeadLetterRoutingKey = "" // dead-lettering is off: the key is unused
	}
	if f.DeliveryLimit > 0 {
		f.Type = "quorum" // only quorum queues have delivery limits
	}
	return f
}

// checkExchange checks, on a throwaway channel, that the dead-letter
// exchange exists: the broker drops what it dead-letters to a missing one.
func (s *Source) checkExchange(conn *amqp.Connection, f queueFacts) error {
	if f.HasDLX && f.DeadLetterExchange == "" && f.DeadLetterRoutingKey != "" {
		s.checkKeyQueue(conn, f.DeadLetterRoutingKey)
		return nil
	}
	if !f.HasDLX || f.DeadLetterExchange == "" {
		return nil // none, or the default exchange
	}
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("checking the dead-letter exchange %s of RabbitMQ queue %s: %w", f.DeadLetterExchange, s.cfg.Queue, s.scrub(err))
	}
	err = ch.ExchangeDeclarePassive(f.DeadLetterExchange, amqp.ExchangeDirect, false, false, false, false, nil)
	_ = ch.Close()
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == amqp.NotFound {
		return pipe.Permanent(fmt.Errorf("the dead-letter exchange %s of RabbitMQ queue %s does not exist in vhost %s: the broker would drop what it dead-letters; declare it",
			f.DeadLetterExchange, s.cfg.Queue, s.uri.Vhost))
	}
	if err != nil {
		return fmt.Errorf("checking the dead-letter exchange %s of RabbitMQ queue %s: %w", f.DeadLetterExchange, s.cfg.Queue, s.scrub(err))
	}
	return nil
}

// checkKeyQueue warns when the queue that the default exchange routes
// dead letters to (the dead-letter routing key) does not exist: the
// broker drops them. Only a warning: the queue may be declared later.
func (s *Source) checkKeyQueue(conn *amqp.Connection, queue string) {
	ch, err := conn.Channel()
	if err != nil {
		return
	}
	_, err = ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	_ = ch.Close()
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == amqp.NotFound {
		s.log.Warn("the dead-letter queue does not exist: the queue dead-letters through the default exchange with this routing key, and the broker drops what it routes nowhere; declare it",
			"queue", s.cfg.Queue, "dead_letter_queue", queue, "vhost", s.uri.Vhost)
	}
}

// sourceInfo is what the pipe is told of the queue.
func (s *Source) sourceInfo(f queueFacts) source.Info {
	info := source.Info{ARN: s.arn, VisibilityTimeout: VisibilityTimeout, MaxReceiveCount: s.cfg.MaxReceiveCount, OwnAdvice: true}
	if f.DeliveryLimit > 0 && (info.MaxReceiveCount == 0 || f.DeliveryLimit < info.MaxReceiveCount) {
		info.MaxReceiveCount = f.DeliveryLimit
	}
	if f.HasDLX {
		info.DeadLetterARN = f.DeadLetterExchange
		if info.DeadLetterARN == "" {
			info.DeadLetterARN = "amq.default"
		}
	}
	return info
}

// advise warns, as the SQS source's pipe does, of queues that lose or
// spin failed messages.
func (s *Source) advise(f queueFacts) {
	mrc := s.cfg.MaxReceiveCount
	if !f.HasDLX {
		s.log.Warn("the RabbitMQ queue has no dead-letter exchange: failed messages are requeued after a delay, never dead-lettered; "+
			"set one (x-dead-letter-exchange argument or a dead-letter-exchange policy)", "queue", s.cfg.Queue)
		if f.DeliveryLimit > 0 {
			s.log.Warn("the RabbitMQ queue has a delivery limit but no dead-letter exchange: the broker drops messages at the limit",
				"queue", s.cfg.Queue, "delivery_limit", f.DeliveryLimit)
		}
		if mrc > 0 {
			s.log.Warn("max_receive_count is set but the queue has no dead-letter exchange: messages past it are logged and requeued after a delay",
				"queue", s.cfg.Queue, "max_receive_count", mrc)
		}
	}
	if f.DeliveryLimit > 0 && f.DeliveryLimit < 5 {
		s.log.Warn("the RabbitMQ queue's delivery limit is below 5: throttled retries and give-backs may dead-letter messages early",
			"queue", s.cfg.Queue, "delivery_limit", f.DeliveryLimit)
	}
	if mrc > 0 && mrc < 5 {
		s.log.Warn("max_receive_count is below 5: throttled retries may dead-letter messages early", "queue", s.cfg.Queue, "max_receive_count", mrc)
	}
}

// dialError is a failed connection said in one line: where the file
// gives the url, what failed, what to check. It wraps the error it
// explains (pipe.IsPermanent sees through it); neither holds the password.
type dialError struct {
	msg string
	err error
}

func (e *dialError) Error() string { return e.msg }
func (e *dialError) Unwrap() error { return e.err }

// explainDial says dial's error in one line, beginning with where the file
// gives the url (Config.URLAt) or the queue (QueueAt): a broker that
// cannot be reached, a refused login, a missing queue. Others are returned
// as they are. The detail is logged at debug level.
func (s *Source) explainDial(err error) error {
	at := func(pos string) string {
		if pos == "" {
			return ""
		}
		return pos + ": "
	}
	addr := net.JoinHostPort(s.uri.Host, fmt.Sprint(s.uri.Port))
	var msg string
	var op *net.OpError
	var dns *net.DNSError
	switch {
	case errors.As(err, &dns):
		msg = fmt.Sprintf("%scannot reach the RabbitMQ broker at %s (no such host %s): check the host in the source's `url`", at(s.cfg.URLAt), addr, dns.Name)
	case errors.As(err, &op):
		reason := "the connection failed"
		if op.Timeout() {
			reason = "timed out"
		} else if op.Err != nil {
			reason = op.Err.Error()
			if i := strings.LastIndex(reason, ": "); i >= 0 {
				reason = reason[i+2:]
			}
		}
		msg = fmt.Sprintf("%scannot reach the RabbitMQ broker at %s (%s): check that it is running there and the host and port in the source's `url`", at(s.cfg.URLAt), addr, reason)
	case errors.Is(err, amqp.ErrCredentials) || errors.Is(err, amqp.ErrSASL):
		msg = fmt.Sprintf("%sthe RabbitMQ broker at %s refused the login of user %s: check the user and password in the source's `url`", at(s.cfg.URLAt), addr, s.uri.Username)
	case errors.Is(err, amqp.ErrVhost):
		msg = fmt.Sprintf("%sthe RabbitMQ broker at %s has no vhost %s, or user %s may not use it: check the path of the source's `url`", at(s.cfg.URLAt), addr, s.uri.Vhost, s.uri.Username)
	case s.cfg.QueueAt != "" && strings.Contains(err.Error(), "does not exist in vhost"):
		msg = at(s.cfg.QueueAt) + err.Error()
	default:
		return err
	}
	s.log.Debug("connecting to RabbitMQ failed", "queue", s.cfg.Queue, "error", err.Error())
	return &dialError{msg: msg, err: err}
}
