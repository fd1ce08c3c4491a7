// Package rabbittest connects pipes' tests to the RabbitMQ broker of the
// machine (127.0.0.1:5672, guest/guest, management API on :15672; `.ci/run`
// starts it). PIPES_RABBITMQ_URL and PIPES_RABBITMQ_MANAGEMENT_URL point
// the tests at another broker. Without a broker, or without its management
// API (the rabbitmq_management plugin), the tests that need it are skipped
// with one line saying how to get it (see internal/testenv), except under
// CI=true, where they fail.
package rabbittest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/internal/testenv"
)

// Defaults of the machine's broker.
const (
	DefaultURL           = "amqp://guest:guest@127.0.0.1:5672/"
	DefaultManagementURL = "http://127.0.0.1:15672"
)

// The services this package's helpers need, and what provides them.
var (
	broker = testenv.Service{Name: "RabbitMQ broker",
		Fix: "install and start it with `apt-get install rabbitmq-server` (guest/guest on 127.0.0.1:5672), or point PIPES_RABBITMQ_URL at one"}
	management = testenv.Service{Name: "RabbitMQ management API",
		Fix: "enable it with `rabbitmq-plugins enable rabbitmq_management`, or point PIPES_RABBITMQ_MANAGEMENT_URL at one"}
)

// URL is the broker's AMQP URL. It skips t (fails it under CI=true) when
// the broker cannot be reached, with one line saying how to start one.
func URL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("PIPES_RABBITMQ_URL")
	if u == "" {
		u = DefaultURL
	}
	p, err := url.Parse(u)
	if err != nil {
		t.Fatalf("rabbittest: PIPES_RABBITMQ_URL is not a URL")
	}
	host := p.Host
	if p.Port() == "" {
		host = net.JoinHostPort(p.Hostname(), "5672")
	}
	c, err := net.DialTimeout("tcp", host, 2*time.Second)
	if err != nil {
		s := broker
		s.At = host
		testenv.Missing(t, s, err)
	}
	_ = c.Close()
	return u
}

// ManagementURL is the broker's management API. It skips t (fails it
// under CI=true) when the broker or its management API cannot be reached
// (the plugin is not enabled), with one line saying how to enable it. Every
// test that needs the management API, also through a pipe's source (it
// reads a queue's type and dead-letter settings there), calls it.
func ManagementURL(t testing.TB) string {
	t.Helper()
	URL(t)
	u := os.Getenv("PIPES_RABBITMQ_MANAGEMENT_URL")
	if u == "" {
		u = DefaultManagementURL
	}
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		t.Fatalf("rabbittest: PIPES_RABBITMQ_MANAGEMENT_URL is not a URL")
	}
	v, _ := probed.LoadOrStore(u, &probe{})
	pr := v.(*probe)
	pr.once.Do(func() { pr.err = probeManagement(p) })
	if pr.err != nil {
		s := management
		s.At = (&url.URL{Scheme: p.Scheme, Host: p.Host, Path: p.Path}).String() // no credentials
		testenv.Missing(t, s, pr.err)
	}
	return u
}

// probe is one management URL's check, done once per test binary.
type probe struct {
	once sync.Once
	err  error
}

// probed holds the management URLs this test binary checked (test-binary
// state: one check, however many tests ask).
var probed sync.Map // URL → *probe

// probeManagement asks the management API for its overview, as guest
// unless the URL carries credentials. The error never holds them.
func probeManagement(p *url.URL) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	base := *p
	base.User = nil
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base.String(), "/")+"/api/overview", nil)
	if err != nil {
		return errors.New("not a URL")
	}
	user, pass := "guest", "guest"
	if p.User != nil {
		user = p.User.Username()
		pass, _ = p.User.Password()
	}
	req.SetBasicAuth(user, pass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) {
			return op
		}
		return errors.New("no answer")
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /api/overview answered %s", resp.Status)
	}
	return nil
}

// Dial opens a connection for the test's own use, closed when it ends.
func Dial(t testing.TB) *amqp.Connection {
	t.Helper()
	conn, err := amqp.Dial(URL(t))
	if err != nil {
		t.Fatalf("rabbittest: connecting: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// Channel opens a channel on a connection of the test's own.
func Channel(t testing.TB) *amqp.Channel {
	t.Helper()
	ch, err := Dial(t).Channel()
	if err != nil {
		t.Fatalf("rabbittest: opening a channel: %v", err)
	}
	return ch
}

var unsafe = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// Name is a queue or exchange name unique to this call, from the test's
// name and a random suffix.
func Name(t testing.TB, suffix string) string {
	base := unsafe.ReplaceAllString(t.Name(), "-")
	if len(base) > 80 {
		base = base[:80]
	}
	return strings.Trim(base, "-") + "-" + rand.Text()[:8] + suffix
}

// QueueOptions say how DeclareQueue makes a queue.
type QueueOptions struct {
	// Quorum makes a quorum queue (default: classic).
	Quorum bool
	// DeadLetterExchange is x-dead-letter-exchange ("" none).
	DeadLetterExchange string
	// DeadLetterRoutingKey is x-dead-letter-routing-key.
	DeadLetterRoutingKey string
	// DeliveryLimit is x-delivery-limit (quorum queues; 0 none).
	DeliveryLimit int
	// MessageTTL is x-message-ttl (0 none).
	MessageTTL time.Duration
	// Args are more arguments.
	Args amqp.Table
}

// DeclareQueue declares a durable queue named name with opts and deletes
// it when the test ends.
func DeclareQueue(t testing.TB, name string, opts QueueOptions) {
	t.Helper()
	ch := Channel(t)
	args := amqp.Table{}
	for k, v := range opts.Args {
		args[k] = v
	}
	if opts.Quorum {
		args["x-queue-type"] = "quorum"
	}
	if opts.DeadLetterExchange != "" {
		args["x-dead-letter-exchange"] = opts.DeadLetterExchange
	}
	if opts.DeadLetterRoutingKey != "" {
		args["x-dead-letter-routing-key"] = opts.DeadLetterRoutingKey
	}
	if opts.DeliveryLimit > 0 {
		args["x-delivery-limit"] = int32(opts.DeliveryLimit)
	}
	if opts.MessageTTL > 0 {
		args["x-message-ttl"] = int32(opts.MessageTTL / time.Millisecond)
	}
	if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		t.Fatalf("rabbittest: declaring queue %s: %v", name, err)
	}
	t.Cleanup(func() {
		if ch, err := amqp.Dial(URL(t)); err == nil {
			if c, err := ch.Channel(); err == nil {
				_, _ = c.QueueDelete(name, false, false, false)
			}
			_ = ch.Close()
		}
	})
}

// DeclareDLX declares a fanout exchange and a queue bound to it, both
// deleted when the test ends, and returns their names: a dead-letter
// exchange and its dead-letter queue.
func DeclareDLX(t testing.TB) (exchange, queue string) {
	t.Helper()
	exchange, queue = Name(t, "-dlx"), Name(t, "-dlq")
	ch := Channel(t)
	if err := ch.ExchangeDeclare(exchange, "fanout", true, false, false, false, nil); err != nil {
		t.Fatalf("rabbittest: declaring exchange %s: %v", exchange, err)
	}
	DeclareQueue(t, queue, QueueOptions{})
	if err := ch.QueueBind(queue, "", exchange, false, nil); err != nil {
		t.Fatalf("rabbittest: binding %s to %s: %v", queue, exchange, err)
	}
	t.Cleanup(func() {
		if conn, err := amqp.Dial(URL(t)); err == nil {
			if c, err := conn.Channel(); err == nil {
				_ = c.ExchangeDelete(exchange, false, false)
			}
			_ = conn.Close()
		}
	})
	return exchange, queue
}

// Publish publishes bodies to the queue through the default exchange, with
// publisher confirms, as persistent JSON messages.
func Publish(t testing.TB, queue string, bodies ...string) {
	t.Helper()
	ch := Channel(t)
	if err := ch.Confirm(false); err != nil {
		t.Fatalf("rabbittest: confirms: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, b := range bodies {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", queue, true, false, amqp.Publishing{
			ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: []byte(b),
		})
		if err != nil {
			t.Fatalf("rabbittest: publishing to %s: %v", queue, err)
		}
		if ok, err := dc.WaitContext(ctx); err != nil || !ok {
			t.Fatalf("rabbittest: publishing to %s: not confirmed (%v)", queue, err)
		}
	}
}

// Get takes every message now in the queue (basic.get, acked) and returns
// them.
func Get(t testing.TB, queue string) []amqp.Delivery {
	t.Helper()
	ch := Channel(t)
	var out []amqp.Delivery
	for {
		d, ok, err := ch.Get(queue, true)
		if err != nil {
			t.Fatalf("rabbittest: getting from %s: %v", queue, err)
		}
		if !ok {
			return out
		}
		out = append(out, d)
	}
}

// Count is the number of messages ready in the queue.
func Count(t testing.TB, queue string) int {
	t.Helper()
	q, err := Channel(t).QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatalf("rabbittest: inspecting %s: %v", queue, err)
	}
	return q.Messages
}

// String is for error messages of tests: a delivery's body.
func String(d amqp.Delivery) string { return fmt.Sprintf("%s", d.Body) }

// Management calls the broker's management API as guest (ManagementURL),
// encoding body as JSON when not nil and decoding the JSON answer into out
// when not nil, and returns the HTTP status. It fails t when the API
// cannot be reached or answers something out cannot hold.
func Management(t testing.TB, method, path string, body, out any) int {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatalf("rabbittest: encoding a management request: %v", err)
		}
		r = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // also in cleanups
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, ManagementURL(t)+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("guest", "guest")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("rabbittest: management API %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("rabbittest: management API %s %s: %v", method, path, err)
		}
	}
	return resp.StatusCode
}

// CloseConnections closes, through the management API, the connections
// whose client-provided name matches, never any other client's, and returns
// how many it closed. The API lists a new connection up to 5 s late (its
// statistics interval): it waits up to 10 s for one to match.
func CloseConnections(t testing.TB, match func(clientName string) bool) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var conns []struct {
			Name  string `json:"name"`
			Props struct {
				Name string `json:"connection_name"`
			} `json:"client_properties"`
		}
		Management(t, http.MethodGet, "/api/connections", nil, &conns)
		n := 0
		for _, c := range conns {
			if match(c.Props.Name) {
				if code := Management(t, http.MethodDelete, "/api/connections/"+url.PathEscape(c.Name), nil, nil); code < 300 {
					n++
				}
			}
		}
		if n > 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(100 * time.Millisecond)
	}
}
