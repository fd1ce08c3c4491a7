// Package rabbittest connects pipes' tests to the RabbitMQ broker of the
// machine (127.0.0.1:5672, guest/guest, management API on :15672; `.ci/run`
// starts it). PIPES_RABBITMQ_URL and PIPES_RABBITMQ_MANAGEMENT_URL point
// the tests at another broker. Without a broker the tests are skipped,
// except under CI=true, where they fail.
package rabbittest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Defaults of the machine's broker.
const (
	DefaultURL           = "amqp://guest:guest@127.0.0.1:5672/"
	DefaultManagementURL = "http://127.0.0.1:15672"
)

// URL is the broker's AMQP URL. It skips t (fails it under CI=true) when
// the broker cannot be reached.
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
		if os.Getenv("CI") == "true" {
			t.Fatalf("rabbittest: no RabbitMQ broker at %s under CI=true (.ci/run starts it): %v", host, err)
		}
		t.Skipf("rabbittest: no RabbitMQ broker at %s: %v", host, err)
	}
	_ = c.Close()
	return u
}

// ManagementURL is the broker's management API (the same checks as URL).
func ManagementURL(t testing.TB) string {
	t.Helper()
	URL(t)
	if u := os.Getenv("PIPES_RABBITMQ_MANAGEMENT_URL"); u != "" {
		return u
	}
	return DefaultManagementURL
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
