// Package rabbit is the RabbitMQ side of `pipes dlq`: it finds the
// dead-letter queue of a pipe's rabbitmq source (the queues bound to the
// source queue's dead-letter exchange), shows its messages without
// consuming them, and redrives them by re-publishing a cleaned copy with
// publisher confirms, acking each from the dead-letter queue only once its
// copy is confirmed. Outcomes, entries and summaries are those of package
// redrive, so both brokers report alike.
//
// Every message is read with basic.get without ack (which the channel's
// QoS prefetch does not limit): what a run leaves behind — inspected,
// skipped, failed, dry run — stays unacked on the run's channel, so the
// next basic.get returns the next message, and is requeued when the run
// ends (basic.nack requeue, then the channel closes; the broker puts the
// messages back in their places). If the process dies, the broker requeues
// them when the connection drops. A run must end within the broker's
// consumer_timeout (30 min by default), which closes a channel holding
// unacked deliveries for longer.
//
// No password ever appears in an error, a record or a log line.
package rabbit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/internal/scrub"
	"github.com/pipesproject/pipes/source/rabbitmq"
)

// Timeouts of the broker's calls.
const (
	dialTimeout       = 10 * time.Second
	heartbeat         = 10 * time.Second
	closeTimeout      = 5 * time.Second
	managementTimeout = 5 * time.Second
	publishTimeout    = 30 * time.Second
)

// Config says which broker to use.
type Config struct {
	// URL is the broker: amqp:// or amqps://, credentials in it, the vhost
	// in the path. It never appears in errors.
	URL string
	// ManagementURL is the management API that tells a queue's
	// dead-letter exchange and the queues bound to it: "" means
	// http://<amqp host>:15672 with the URL's credentials, "off" not to
	// use it (rabbitmq.ManagementOff). Credentials in it are for it alone.
	ManagementURL string
}

// Broker is one connection to the broker, for one dlq command. Its
// methods block; they are not meant for concurrent use. Close it when done.
type Broker struct {
	conn     *amqp.Connection
	uri      amqp.URI
	secrets  []string
	mgmt     string // base URL, "" when off
	mgmtUser string
	mgmtPass string
}

// Dial connects to the broker of cfg. A bad URL, a refused login and an
// unreachable broker are errors that name the host, never the password.
func Dial(ctx context.Context, cfg Config) (*Broker, error) {
	b := &Broker{}
	if err := b.parse(cfg); err != nil {
		return nil, err
	}
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName("pipes dlq")
	dial := amqp.DefaultDial(dialTimeout)
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < dialTimeout {
		dial = amqp.DefaultDial(max(time.Until(dl), time.Millisecond))
	}
	conn, err := amqp.DialConfig(cfg.URL, amqp.Config{Properties: props, Heartbeat: heartbeat, Dial: dial})
	if err != nil {
		return nil, fmt.Errorf("connecting to RabbitMQ at %s: %w", b.uri.Host, b.scrub(err))
	}
	b.conn = conn
	return b, nil
}

// parse reads the AMQP and management URLs without putting either, or a
// password, in an error.
func (b *Broker) parse(cfg Config) error {
	u, err := url.Parse(cfg.URL)
	switch {
	case cfg.URL == "":
		return errors.New("the rabbitmq source has no url")
	case err != nil:
		return errors.New("the rabbitmq source's url is not a valid URL")
	case u.Scheme != "amqp" && u.Scheme != "amqps":
		return fmt.Errorf("the rabbitmq source's url has the scheme %q, want amqp or amqps", u.Scheme)
	}
	uri, err := amqp.ParseURI(cfg.URL)
	if err != nil {
		return errors.New("the rabbitmq source's url is not a valid AMQP URL (amqp[s]://user:password@host:port/vhost)")
	}
	b.uri = uri
	if pw, ok := u.User.Password(); ok {
		b.secrets = append(b.secrets, pw)
	}
	b.secrets = append(b.secrets, uri.Password)
	switch cfg.ManagementURL {
	case rabbitmq.ManagementOff:
		return nil
	case "":
		b.mgmt = "http://" + net.JoinHostPort(uri.Host, "15672")
		b.mgmtUser, b.mgmtPass = uri.Username, uri.Password
		return nil
	}
	m, err := url.Parse(cfg.ManagementURL)
	if err != nil || (m.Scheme != "http" && m.Scheme != "https") || m.Host == "" {
		return errors.New(`the rabbitmq source's management_url must be an http(s) URL, "" or "off"`)
	}
	b.mgmtUser, b.mgmtPass = uri.Username, uri.Password
	if m.User != nil {
		b.mgmtUser = m.User.Username()
		b.mgmtPass, _ = m.User.Password()
		b.secrets = append(b.secrets, b.mgmtPass)
		m.User = nil
	}
	b.mgmt = strings.TrimSuffix(m.String(), "/")
	return nil
}

// Close closes the connection; the broker requeues whatever is still
// unacked on it.
func (b *Broker) Close() error {
	if b.conn == nil {
		return nil
	}
	if err := b.conn.CloseDeadline(time.Now().Add(closeTimeout)); err != nil && !errors.Is(err, amqp.ErrClosed) {
		return fmt.Errorf("closing the connection to RabbitMQ at %s: %w", b.uri.Host, b.scrub(err))
	}
	return nil
}

// Vhost is the connection's virtual host.
func (b *Broker) Vhost() string { return b.uri.Vhost }

// ARN is the eventSourceArn of the records of queue.
func (b *Broker) ARN(queue string) string { return rabbitmq.ARN(b.uri, queue) }

// scrub returns err with the passwords taken out of its text.
func (b *Broker) scrub(err error) error {
	return scrub.New(append(b.secrets, scrub.Userinfo(b.mgmtUser, b.mgmtPass)...)...).Error(err)
}

// Counts are a queue's message counts.
type Counts struct {
	// Ready are the messages waiting for a consumer (passive declare).
	Ready int
	// Consumers are the queue's consumers (passive declare).
	Consumers int
	// Unacked are the messages delivered and not yet acked, from the
	// management API; UnackedKnown is false when it could not tell.
	Unacked      int
	UnackedKnown bool
}

// Counts reads the counts of queue: a passive declare on a channel of its
// own, and the management API for the unacked messages. A missing queue is
// an error that says so.
func (b *Broker) Counts(ctx context.Context, queue string) (Counts, error) {
	ch, err := b.conn.Channel()
	if err != nil {
		return Counts{}, fmt.Errorf("opening a channel: %w", b.scrub(err))
	}
	q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
	_ = ch.Close()
	if err != nil {
		return Counts{}, b.queueErr(queue, err)
	}
	c := Counts{Ready: q.Messages, Consumers: q.Consumers}
	if b.mgmt != "" {
		if info, err := b.queueInfo(ctx, queue); err == nil && info.Unacked != nil {
			c.Unacked, c.UnackedKnown = *info.Unacked, true
		}
	}
	return c, nil
}

// queueErr explains the error of a passive declare of queue.
func (b *Broker) queueErr(queue string, err error) error {
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == amqp.NotFound {
		return fmt.Errorf("RabbitMQ queue %s does not exist in vhost %s", queue, b.uri.Vhost)
	}
	return fmt.Errorf("checking RabbitMQ queue %s: %w", queue, b.scrub(err))
}
