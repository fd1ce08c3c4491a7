package rabbitmq

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/source"
)

// entry is a delivery the source handed out and nobody settled yet.
type entry struct {
	handle   string
	sess     *session
	tag      uint64
	id       string // the record's messageId
	amqpID   bool   // id is the AMQP message-id or the content id (counted in Source.ids)
	d        amqp.Delivery
	attempts int
	// received is when the broker's delivery came (into the consumer's
	// buffer): its age counts towards the consumer timeout.
	received time.Time
	// cycle describes the dead-letter cycle the message went round (see
	// deadLetterCycle), "" when none.
	cycle string
	// timer is set while a failed message is held before its requeue or
	// re-publish (then is what it does).
	timer *time.Timer
	then  action
}

// Receive waits up to the wait time (or until ctx is done) for a first
// delivery, then takes what else is already buffered, up to limit (1 at
// least), and returns them as Pipes RabbitMQ records. An empty result with
// a nil error means none came. When ctx is done first it returns ctx's
// error and no messages; deliveries taken are always returned, with a nil
// error. While the connection is down it returns an error saying why (the
// source reconnects meanwhile; nothing is lost: the broker redelivers what
// was not acked). It is safe for concurrent use.
func (s *Source) Receive(ctx context.Context, limit int) ([]*source.Message, error) {
	if s.opened.Load() == nil {
		return nil, fmt.Errorf("RabbitMQ source %s: used before Open", s.cfg.Queue)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ss, err := s.current(ctx)
	if err != nil {
		return nil, err
	}
	limit = max(limit, 1)
	t := time.NewTimer(s.wait)
	defer t.Stop()
	var ds []buffered
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
		return nil, nil
	case <-ss.dead:
		return nil, fmt.Errorf("the connection to RabbitMQ for queue %s was lost (%w); reconnecting", s.cfg.Queue, ss.err)
	case b := <-ss.buf:
		ds = append(make([]buffered, 0, limit), b)
	}
more:
	for len(ds) < limit {
		select {
		case b := <-ss.buf:
			ds = append(ds, b)
		default:
			break more
		}
	}
	return s.track(ss, ds), nil
}

// track makes the messages of deliveries and remembers them until settled.
func (s *Source) track(ss *session, ds []buffered) []*source.Message {
	block := make([]source.Message, len(ds))
	entries := make([]entry, len(ds))
	out := make([]*source.Message, 0, len(ds))
	s.mu.Lock()
	for i := range ds {
		e := &entries[i]
		e.sess, e.d, e.tag, e.received = ss, ds[i].d, ds[i].d.DeliveryTag, ds[i].at
		e.handle = strconv.FormatUint(ss.gen, 10) + "." + strconv.FormatUint(e.tag, 10)
		e.attempts = attempts(&e.d, s.cfg.Queue)
		e.cycle, _ = deadLetterCycle(e.d.Headers, s.cfg.Queue, s.cycleLimit())
		id := e.d.MessageId
		if id == "" {
			id = contentID(&e.d)
		}
		if s.ids[id] == 0 {
			e.id, e.amqpID = id, true
		} else {
			e.id = "pipes-" + rand.Text()
		}
		if e.amqpID {
			s.ids[e.id]++
		}
		s.inflight[e.handle] = e
	}
	s.mu.Unlock()
	for i := range entries {
		e := &entries[i]
		m := &block[i]
		if err := fill(m, &e.d, e.id, e.handle, e.attempts, s.arn, s.arnJSON, s.keyJSON); err != nil {
			// Properties always encode (headers are mapped to JSON
			// values); should one not, the record still goes on, without.
			s.log.Error("encoding a delivery's properties failed", "queue", s.cfg.Queue, "message_id", e.id, "error", err)
		}
		out = append(out, m)
	}
	return out
}

// fill makes m the message of delivery d: its id, receipt handle, body,
// receive count and Pipes RabbitMQ record. When the properties do not
// encode, the record is made without them and the error is returned.
func fill(m *source.Message, d *amqp.Delivery, id, handle string, attempts int, arn string, arnJSON, keyJSON json.RawMessage) error {
	m.MessageID, m.ReceiptHandle, m.Body = id, handle, string(d.Body)
	m.EventSource, m.EventSourceARN = core.EventSourceRabbitMQ, arn
	m.Attributes = map[string]string{source.AttrReceiveCount: strconv.Itoa(attempts)}
	if !d.Timestamp.IsZero() {
		m.Attributes[source.AttrSentTimestamp] = strconv.FormatInt(d.Timestamp.UnixMilli(), 10)
	}
	rec, err := newRecord(d, id, arnJSON, keyJSON)
	if err != nil {
		rec, _ = newRecord(&amqp.Delivery{Body: d.Body, Redelivered: d.Redelivered}, id, arnJSON, keyJSON)
	}
	m.Record = rec
	return err
}

// Record is the message of delivery d of queue (in vhost) as the source
// would hand it to a pipe: a Pipes RabbitMQ record whose eventSourceArn
// is arn (see ARN) and eventSourceKey "<queue>::<vhost>", whose messageId
// is the AMQP message-id or, without one, the digest the source makes up,
// and whose receive count is read from the headers as Source.Attempts
// does. Its ReceiptHandle is empty: it is for tools that read a queue
// without a Source (pipes dlq), which settle the delivery themselves. It
// does no I/O and is safe for concurrent use.
func Record(d amqp.Delivery, queue, vhost, arn string) *source.Message {
	id := d.MessageId
	if id == "" {
		id = contentID(&d)
	}
	arnJSON, _ := json.Marshal(arn) // strings always encode
	keyJSON, _ := json.Marshal(queue + "::" + vhost)
	m := &source.Message{}
	_ = fill(m, &d, id, "", attempts(&d, queue), arn, arnJSON, keyJSON) // a record is made even when the properties do not encode
	return m
}

// ARN is the eventSourceArn of a queue's records:
// rabbitmq://<host>:<port>/<vhost>/<queue>, path-escaped, without the
// credentials of uri.
func ARN(uri amqp.URI, queue string) string {
	hostport := net.JoinHostPort(uri.Host, strconv.Itoa(uri.Port))
	return "rabbitmq://" + hostport + "/" + url.PathEscape(uri.Vhost) + "/" + url.PathEscape(queue)
}

// contentID is the id made up for a message without a message-id: a
// digest of its body and properties, so that a redelivery has the same id
// (headers are left out: the broker adds to them on the way).
func contentID(d *amqp.Delivery) string {
	h := sha256.New()
	for _, f := range []string{d.ContentType, d.ContentEncoding, d.CorrelationId, d.ReplyTo, d.Type, d.AppId, d.UserId,
		strconv.FormatInt(d.Timestamp.UnixNano(), 10)} {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	h.Write(d.Body)
	return "pipes-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// forgetLocked drops entry e (its timer stopped): it is settled, or its
// session ended. s.mu is held.
func (s *Source) forgetLocked(handle string, e *entry) {
	delete(s.inflight, handle)
	if e.amqpID {
		if s.ids[e.id]--; s.ids[e.id] <= 0 {
			delete(s.ids, e.id)
		}
		e.amqpID = false
	}
	if e.timer != nil {
		if e.timer.Stop() {
			s.timers.Done() // its callback will not run
		}
		e.timer = nil
	}
}

// ReceiveIsCancelSafe marks the source pipe.CancelSafe: deliveries wait in
// the consumer's buffer, so a cancelled Receive loses nothing and a
// stopping pipe need not wait for it.
func (s *Source) ReceiveIsCancelSafe() {}
