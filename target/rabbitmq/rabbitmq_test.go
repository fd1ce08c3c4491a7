package rabbitmq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/internal/syncbuf"
	"github.com/pipesproject/pipes/source"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/internal/rabbittest"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/target/rabbitmq"
	"github.com/pipesproject/pipes/target/targettest"
)

// event makes an event whose record body (what templates see) is body
// and whose payload is payload.
func event(id, body, payload string) *pipe.Event {
	return &pipe.Event{Message: &source.Message{MessageID: id, Body: body}, RecordJSON: []byte(payload)}
}

func newTarget(t testing.TB, cfg rabbitmq.Config) *rabbitmq.Target {
	t.Helper()
	tg, err := rabbitmq.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := tg.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return tg
}

func failedIDs(r pipe.Result) []string {
	ids := make([]string, 0, len(r.Failures))
	for _, f := range r.Failures {
		ids = append(ids, f.ID)
	}
	slices.Sort(ids)
	return ids
}

// declareExchange declares a durable exchange of kind, deleted when the
// test ends.
func declareExchange(t *testing.T, name, kind string) {
	t.Helper()
	if err := rabbittest.Channel(t).ExchangeDeclare(name, kind, true, false, false, false, nil); err != nil {
		t.Fatalf("declaring exchange %s: %v", name, err)
	}
	t.Cleanup(func() {
		if conn, err := amqp.Dial(rabbittest.URL(t)); err == nil {
			if ch, err := conn.Channel(); err == nil {
				_ = ch.ExchangeDelete(name, false, false)
			}
			_ = conn.Close()
		}
	})
}

// bind declares a queue bound to exchange with key.
func bind(t *testing.T, exchange, key string) string {
	t.Helper()
	q := rabbittest.Name(t, "-q")
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{})
	if err := rabbittest.Channel(t).QueueBind(q, key, exchange, false, nil); err != nil {
		t.Fatalf("binding %s to %s: %v", q, exchange, err)
	}
	return q
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  rabbitmq.Config
		want string
	}{
		{"a missing url is rejected", rabbitmq.Config{RoutingKey: "q"}, "url is required"},
		{"an http url is rejected", rabbitmq.Config{URL: "http://h/", RoutingKey: "q"}, `url scheme "http" is not amqp or amqps`},
		{"a url without a host is rejected", rabbitmq.Config{URL: "amqp:///vhost", RoutingKey: "q"}, "url has no host"},
		{"the default exchange needs a routing key", rabbitmq.Config{URL: "amqp://h/"}, "a routing key is required with the default exchange"},
		{"a routing key template must parse", rabbitmq.Config{URL: "amqp://h/", RoutingKey: "orders.<$.body.>"}, `routing key "orders.<$.body.>"`},
		{"a constant routing key longer than 255 bytes is rejected", rabbitmq.Config{URL: "amqp://h/", RoutingKey: strings.Repeat("k", 256)}, "routing key is longer than 255 bytes"},
		{"an empty header name is rejected", rabbitmq.Config{URL: "amqp://h/", RoutingKey: "q", Headers: map[string]string{"": "v"}}, `header name "" must be 1 to 255 bytes`},
		{"a bad header template is rejected without its value", rabbitmq.Config{URL: "amqp://h/", RoutingKey: "q", Headers: map[string]string{"x-a": "<$.body.>"}}, `header "x-a" is not a valid template`},
		{"a negative timeout is rejected", rabbitmq.Config{URL: "amqp://h/", RoutingKey: "q", Timeout: -time.Second}, "timeout -1s is negative"},
		{"every problem is reported at once", rabbitmq.Config{URL: "ftp://h/", Timeout: -1}, "is not amqp or amqps\na routing key is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := rabbitmq.New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestNewNeverShowsThePassword(t *testing.T) {
	_, err := rabbitmq.New(rabbitmq.Config{URL: "amqp://user:Sup3rSecretPw@h:notaport/", RoutingKey: "<$.bad>>"})
	if err == nil {
		t.Fatal("New accepted a bad port")
	}
	if strings.Contains(err.Error(), "Sup3rSecretPw") {
		t.Fatalf("the error shows the password: %v", err)
	}
}

func TestDeliverRoutesByTemplateWithHeadersAndPersistence(t *testing.T) {
	url := rabbittest.URL(t)
	ex := rabbittest.Name(t, "-ex")
	declareExchange(t, ex, "topic")
	qa, qb := bind(t, ex, "orders.a"), bind(t, ex, "orders.b")
	tg := newTarget(t, rabbitmq.Config{
		URL: url, Exchange: ex, RoutingKey: "orders.<$.body.kind>", Persistent: true, Mandatory: true,
		Headers:  map[string]string{"x-kind": "<$.body.kind>", "x-static": "s3cret-token", "x-pipe": "<aws.pipes.pipe-name>"},
		PipeName: "orders-pipe",
	})
	evs := []*pipe.Event{
		event("m1", `{"kind":"a"}`, `{"order":1}`),
		event("m2", `{"kind":"b"}`, `not json`),
	}
	res, err := tg.Deliver(t.Context(), evs)
	if err != nil || len(res.Failures) > 0 {
		t.Fatalf("Deliver: %v, failures %v", err, res.Failures)
	}
	for _, c := range []struct {
		queue, id, body, kind, contentType string
	}{{qa, "m1", `{"order":1}`, "a", "application/json"}, {qb, "m2", "not json", "b", "text/plain"}} {
		got := rabbittest.Get(t, c.queue)
		if len(got) != 1 {
			t.Fatalf("queue %s holds %d messages, want 1", c.queue, len(got))
		}
		d := got[0]
		if string(d.Body) != c.body || d.MessageId != c.id || d.ContentType != c.contentType {
			t.Errorf("queue %s got body %q id %q content type %q, want %q %q %q", c.queue, d.Body, d.MessageId, d.ContentType, c.body, c.id, c.contentType)
		}
		if d.DeliveryMode != amqp.Persistent {
			t.Errorf("delivery mode %d, want persistent (2)", d.DeliveryMode)
		}
		if d.Timestamp.IsZero() || time.Since(d.Timestamp) > time.Minute {
			t.Errorf("timestamp %v is not now", d.Timestamp)
		}
		want := amqp.Table{"x-kind": c.kind, "x-static": "s3cret-token", "x-pipe": "orders-pipe"}
		for k, v := range want {
			if d.Headers[k] != v {
				t.Errorf("header %s = %v, want %v", k, d.Headers[k], v)
			}
		}
	}
}

func TestDeliverTransientWhenNotPersistent(t *testing.T) {
	q := rabbittest.Name(t, "-q")
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{})
	tg := newTarget(t, rabbitmq.Config{URL: rabbittest.URL(t), RoutingKey: q, Persistent: false})
	if res, err := tg.Deliver(t.Context(), []*pipe.Event{event("1", "x", "x")}); err != nil || len(res.Failures) > 0 {
		t.Fatalf("Deliver: %v %v", err, res.Failures)
	}
	got := rabbittest.Get(t, q)
	if len(got) != 1 || got[0].DeliveryMode != amqp.Transient {
		t.Fatalf("got %d messages, delivery mode %v; want one transient (1)", len(got), got)
	}
}

func TestDeliverAttributesBecomeHeaders(t *testing.T) {
	q := rabbittest.Name(t, "-q")
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{})
	tg := newTarget(t, rabbitmq.Config{URL: rabbittest.URL(t), RoutingKey: q, Headers: map[string]string{"ErrorCode": "configured"}})
	code, msg := "ignored", "boom"
	ev := event("1", "x", "x")
	ev.Attributes = map[string]source.MessageAttribute{
		"ErrorCode":    {DataType: "String", StringValue: &code},
		"ErrorMessage": {DataType: "String", StringValue: &msg},
	}
	if res, err := tg.Deliver(t.Context(), []*pipe.Event{ev}); err != nil || len(res.Failures) > 0 {
		t.Fatalf("Deliver: %v %v", err, res.Failures)
	}
	got := rabbittest.Get(t, q)
	if len(got) != 1 || got[0].Headers["ErrorMessage"] != "boom" || got[0].Headers["ErrorCode"] != "configured" {
		t.Fatalf("headers %v; want ErrorMessage from the attributes and ErrorCode from the configuration", got[0].Headers)
	}
}

// TestDeliverSucceedsOnlyWhenConfirmed fills a queue that refuses
// publishes beyond one message (x-overflow reject-publish: the broker
// nacks them): the nacked items fail, retryable, and only the acked one
// succeeds.
func TestDeliverSucceedsOnlyWhenConfirmed(t *testing.T) {
	q := rabbittest.Name(t, "-q")
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{Args: amqp.Table{"x-max-length": int32(1), "x-overflow": "reject-publish"}})
	tg := newTarget(t, rabbitmq.Config{URL: rabbittest.URL(t), RoutingKey: q, Persistent: true, Mandatory: true})
	res, err := tg.Deliver(t.Context(), []*pipe.Event{event("1", "a", "a"), event("2", "b", "b"), event("3", "c", "c")})
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if got := failedIDs(res); !slices.Equal(got, []string{"2", "3"}) {
		t.Fatalf("failed %v, want [2 3] (nacked)", got)
	}
	for _, f := range res.Failures {
		if core.IsPermanent(f.Err) || !strings.Contains(f.Err.Error(), "nack") {
			t.Errorf("failure of %s: %v; want a retryable nack", f.ID, f.Err)
		}
	}
	if got := rabbittest.Get(t, q); len(got) != 1 || string(got[0].Body) != "a" {
		t.Fatalf("queue holds %d messages, want just the confirmed one", len(got))
	}
}

func TestDeliverUnroutableFailsJustItsItem(t *testing.T) {
	ex := rabbittest.Name(t, "-ex")
	declareExchange(t, ex, "direct")
	q := bind(t, ex, "known")
	tests := []struct {
		name      string
		mandatory bool
		failed    []string
		arrived   int
	}{
		{"with mandatory the unroutable item fails", true, []string{"2"}, 1},
		{"without mandatory the broker drops it and it counts as delivered", false, []string{}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg := newTarget(t, rabbitmq.Config{URL: rabbittest.URL(t), Exchange: ex, RoutingKey: "<$.body.key>", Mandatory: tt.mandatory})
			res, err := tg.Deliver(t.Context(), []*pipe.Event{
				event("1", `{"key":"known"}`, "routable"),
				event("2", `{"key":"nowhere"}`, "unroutable"),
				event("3", `{"key":"known"}`, "routable too"),
			})
			if err != nil {
				t.Fatalf("Deliver: %v", err)
			}
			if got := failedIDs(res); !slices.Equal(got, tt.failed) {
				t.Fatalf("failed %v, want %v", got, tt.failed)
			}
			for _, f := range res.Failures {
				if core.IsPermanent(f.Err) || !strings.Contains(f.Err.Error(), "unroutable") {
					t.Errorf("failure: %v; want a retryable unroutable error", f.Err)
				}
			}
			if got := rabbittest.Get(t, q); len(got) != 2 {
				t.Fatalf("queue holds %d messages, want the 2 routable ones", len(got))
			}
			// The channel goes on working for the next call.
			res, err = tg.Deliver(t.Context(), []*pipe.Event{event("4", `{"key":"known"}`, "again")})
			if err != nil || len(res.Failures) > 0 {
				t.Fatalf("second Deliver: %v %v", err, res.Failures)
			}
			rabbittest.Get(t, q)
		})
	}
}

// user makes a broker user with a password of its own and rights on the
// default vhost, deleted when the test ends, and returns the AMQP URL.
func user(t *testing.T, password, write string) string {
	t.Helper()
	name := rabbittest.Name(t, "-user")
	mgmt(t, http.MethodPut, "/api/users/"+url.PathEscape(name), `{"password":"`+password+`","tags":""}`)
	mgmt(t, http.MethodPut, "/api/permissions/%2F/"+url.PathEscape(name), `{"configure":".*","write":"`+write+`","read":".*"}`)
	t.Cleanup(func() { mgmt(t, http.MethodDelete, "/api/users/"+url.PathEscape(name), "") })
	u, err := url.Parse(rabbittest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(name, password)
	return u.String()
}

// mgmt calls the management API as guest and returns the answer's body.
func mgmt(t *testing.T, method, path, body string) []byte {
	t.Helper()
	req, err := http.NewRequest(method, rabbittest.ManagementURL(t)+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("guest", "guest")
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("management API %s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 300 && !(method == http.MethodDelete && res.StatusCode == http.StatusNotFound) {
		t.Fatalf("management API %s %s: %s %s", method, path, res.Status, b)
	}
	return b
}

// syncBuffer is a log or output destination the test reads while the code under test writes it.
type syncBuffer = syncbuf.Buffer

func TestDeliverMissingExchangeIsPermanentAndLaterCallsWork(t *testing.T) {
	const password = "Pw-of-the-test-9f3k"
	amqpURL := user(t, password, ".*")
	ex := rabbittest.Name(t, "-ex")
	var logs syncBuffer
	tg := newTarget(t, rabbitmq.Config{
		URL: amqpURL, Exchange: ex, RoutingKey: "k", Mandatory: true, Persistent: true,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	res, err := tg.Deliver(t.Context(), []*pipe.Event{event("1", "a", "a"), event("2", "b", "b")})
	if err != nil {
		t.Fatalf("Deliver: %v; want item failures", err)
	}
	if got := failedIDs(res); !slices.Equal(got, []string{"1", "2"}) {
		t.Fatalf("failed %v, want [1 2]", got)
	}
	for _, f := range res.Failures {
		var ae *amqp.Error
		if !core.IsPermanent(f.Err) || !errors.As(f.Err, &ae) || ae.Code != amqp.NotFound {
			t.Errorf("failure of %s: %v; want a Permanent 404", f.ID, f.Err)
		}
		if strings.Contains(f.Err.Error(), password) {
			t.Errorf("the failure shows the password: %v", f.Err)
		}
	}
	declareExchange(t, ex, "fanout")
	q := bind(t, ex, "")
	res, err = tg.Deliver(t.Context(), []*pipe.Event{event("3", "c", "c")})
	if err != nil || len(res.Failures) > 0 {
		t.Fatalf("Deliver once the exchange exists: %v %v", err, res.Failures)
	}
	if n := len(rabbittest.Get(t, q)); n != 1 {
		t.Fatalf("queue holds %d messages, want 1", n)
	}
	if strings.Contains(logs.String(), password) {
		t.Fatalf("the logs show the password:\n%s", logs.String())
	}
}

func TestDeliverWithoutWritePermissionIsPermanent(t *testing.T) {
	q := rabbittest.Name(t, "-q")
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{})
	tg := newTarget(t, rabbitmq.Config{URL: user(t, "Pw-readonly-2kd8", "^$"), RoutingKey: q})
	res, err := tg.Deliver(t.Context(), []*pipe.Event{event("1", "a", "a")})
	if err != nil {
		t.Fatalf("Deliver: %v; want an item failure", err)
	}
	var ae *amqp.Error
	if len(res.Failures) != 1 || !core.IsPermanent(res.Failures[0].Err) || !errors.As(res.Failures[0].Err, &ae) || ae.Code != amqp.AccessRefused {
		t.Fatalf("failures %v; want one Permanent 403", res.Failures)
	}
	if strings.Contains(res.Failures[0].Err.Error(), "Pw-readonly-2kd8") {
		t.Fatalf("the failure shows the password: %v", res.Failures[0].Err)
	}
}

func TestDeliverRefusedCredentialsArePermanentAndHideThePassword(t *testing.T) {
	u, err := url.Parse(rabbittest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	const password = "wrong-Pw-7hq2x"
	u.User = url.UserPassword("guest", password)
	var logs syncBuffer
	tg := newTarget(t, rabbitmq.Config{URL: u.String(), RoutingKey: "q",
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	_, err = tg.Deliver(t.Context(), []*pipe.Event{event("1", "a", "a")})
	if err == nil || !core.IsPermanent(err) {
		t.Fatalf("Deliver: %v; want a Permanent whole-batch error", err)
	}
	if strings.Contains(err.Error(), password) || strings.Contains(logs.String(), password) {
		t.Fatalf("the password shows: %v\n%s", err, logs.String())
	}
}

func TestDeliverWithoutBrokerFailsWholeAndRetryable(t *testing.T) {
	tg := newTarget(t, rabbitmq.Config{URL: "amqp://guest:Secret-xyz@127.0.0.1:1/", RoutingKey: "q", Timeout: 500 * time.Millisecond})
	start := time.Now()
	_, err := tg.Deliver(t.Context(), []*pipe.Event{event("1", "a", "a")})
	if err == nil || core.IsPermanent(err) {
		t.Fatalf("Deliver: %v; want a retryable whole-batch error", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Deliver took %s; the timeout bounds the wait for a connection", took)
	}
	if strings.Contains(err.Error(), "Secret-xyz") {
		t.Fatalf("the error shows the password: %v", err)
	}
}

// connectionsNamed lists the broker's connections whose client named them
// name.
func connectionsNamed(t *testing.T, name string) []string {
	t.Helper()
	var conns []struct {
		Name             string         `json:"name"`
		ClientProperties map[string]any `json:"client_properties"`
	}
	if err := json.Unmarshal(mgmt(t, http.MethodGet, "/api/connections", ""), &conns); err != nil {
		t.Fatalf("reading the connections: %v", err)
	}
	var out []string
	for _, c := range conns {
		if c.ClientProperties["connection_name"] == name {
			out = append(out, c.Name)
		}
	}
	return out
}

func TestDeliverReconnectsAfterTheConnectionWasClosed(t *testing.T) {
	q := rabbittest.Name(t, "-q")
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{})
	pipeName := rabbittest.Name(t, "-pipe")
	tg := newTarget(t, rabbitmq.Config{URL: rabbittest.URL(t), RoutingKey: q, PipeName: pipeName, Persistent: true, Mandatory: true})
	if res, err := tg.Deliver(t.Context(), []*pipe.Event{event("1", "a", "a")}); err != nil || len(res.Failures) > 0 {
		t.Fatalf("first Deliver: %v %v", err, res.Failures)
	}
	connName := "pipes target " + pipeName
	var conns []string
	for deadline := time.Now().Add(10 * time.Second); len(conns) == 0 && time.Now().Before(deadline); {
		conns = connectionsNamed(t, connName) // the API lists connections after a few seconds
		if len(conns) == 0 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if len(conns) != 1 {
		t.Fatalf("the broker lists %d connections named %q, want 1", len(conns), connName)
	}
	mgmt(t, http.MethodDelete, "/api/connections/"+url.PathEscape(conns[0]), "")
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if len(connectionsNamed(t, connName)) == 0 {
			break
		}
	}
	time.Sleep(200 * time.Millisecond) // the client hears of the close
	res, err := tg.Deliver(t.Context(), []*pipe.Event{event("2", "b", "b")})
	if err != nil || len(res.Failures) > 0 {
		t.Fatalf("Deliver after the connection was closed: %v %v", err, res.Failures)
	}
	if got := rabbittest.Get(t, q); len(got) != 2 {
		t.Fatalf("queue holds %d messages, want 2", len(got))
	}
}

// liveConnection waits until the broker lists the connection named name
// and returns its management name.
func liveConnection(t *testing.T, name string) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if conns := connectionsNamed(t, name); len(conns) == 1 {
			return conns[0]
		}
	}
	t.Fatalf("the broker does not list one connection named %q", name)
	return ""
}

// proxy forwards TCP connections to the broker until cut closes them all.
type proxy struct {
	addr  string
	mu    sync.Mutex
	conns []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); p.cut(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, b)
			p.mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(b, c); _ = b.Close() })
			wg.Go(func() { _, _ = io.Copy(c, b); _ = c.Close() })
		}
	})
	return p
}

// cut closes every connection through the proxy: a connection lost.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func TestDeliverLosingTheConnectionMidwayFailsRetryableAndLosesNothing(t *testing.T) {
	q := rabbittest.Name(t, "-q")
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{})
	u, err := url.Parse(rabbittest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	broker := u.Host
	if u.Port() == "" {
		broker = net.JoinHostPort(u.Hostname(), "5672")
	}
	px := newProxy(t, broker)
	u.Host = px.addr
	tg := newTarget(t, rabbitmq.Config{URL: u.String(), RoutingKey: q, Persistent: true, Mandatory: true})
	payloads := make([]string, 20000)
	for i := range payloads {
		payloads[i] = fmt.Sprintf(`{"n":%d}`, i)
	}
	evs := targettest.Events("midway", payloads...)
	done := make(chan struct{})
	var res pipe.Result
	go func() {
		defer close(done)
		res, err = tg.Deliver(t.Context(), evs)
	}()
	for rabbittest.Count(t, q) == 0 { // publishing has begun
		time.Sleep(2 * time.Millisecond)
	}
	px.cut()
	<-done
	failed := map[string]bool{}
	switch {
	case err != nil:
		if core.IsPermanent(err) {
			t.Errorf("Deliver: %v; a lost connection is retryable", err)
		}
		for _, ev := range evs {
			failed[ev.ID()] = true
		}
	case len(res.Failures) == 0:
		t.Errorf("Deliver reported all %d items confirmed though the connection was lost midway", len(evs))
	default:
		for _, f := range res.Failures {
			failed[f.ID] = true
			if core.IsPermanent(f.Err) {
				t.Errorf("failure of %s: %v; a lost connection is retryable", f.ID, f.Err)
			}
		}
	}
	arrived := map[string]bool{}
	for _, d := range rabbittest.Get(t, q) {
		arrived[string(d.Body)] = true
	}
	for i, ev := range evs {
		if !failed[ev.ID()] && !arrived[payloads[i]] {
			t.Errorf("event %s succeeded but did not arrive", ev.ID())
		}
	}
	t.Logf("whole-batch error: %v; %d of %d items failed; %d arrived", err, len(res.Failures), len(evs), len(arrived))
	if res, err := tg.Deliver(t.Context(), []*pipe.Event{event("after", "b", "b")}); err != nil || len(res.Failures) > 0 {
		t.Fatalf("Deliver after the connection was lost: %v %v", err, res.Failures)
	}
}

func TestDeliverCancelledFailsPromptly(t *testing.T) {
	q := rabbittest.Name(t, "-q")
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{})
	tg := newTarget(t, rabbitmq.Config{URL: rabbittest.URL(t), RoutingKey: q})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := tg.Deliver(ctx, []*pipe.Event{event("1", "a", "a")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Deliver with a cancelled context: %v", err)
	}
}

func TestContract(t *testing.T) {
	targettest.Run(t, targettest.Harness{
		New: func(t *testing.T) (pipe.Target, targettest.Inspect) {
			q := rabbittest.Name(t, "-q")
			rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{})
			tg := newTarget(t, rabbitmq.Config{URL: rabbittest.URL(t), RoutingKey: q, Persistent: true, Mandatory: true})
			var got [][]byte
			return tg, func(t *testing.T) [][]byte {
				for _, d := range rabbittest.Get(t, q) {
					got = append(got, d.Body)
				}
				return got
			}
		},
		Quiet: 50 * time.Millisecond,
	})
}

// BenchmarkDeliverBatchOfTen measures confirmed publishes per second
// (msgs/s) on the local broker: one Deliver of ten events at a time, and
// 8 per CPU at once (the pool of channels lets their confirms overlap).
func BenchmarkDeliverBatchOfTen(b *testing.B) {
	q := rabbittest.Name(b, "-q")
	rabbittest.DeclareQueue(b, q, rabbittest.QueueOptions{Args: amqp.Table{"x-max-length": int32(1000)}})
	evs := targettest.Events("bench", `{"a":1}`, `{"a":2}`, `{"a":3}`, `{"a":4}`, `{"a":5}`, `{"a":6}`, `{"a":7}`, `{"a":8}`, `{"a":9}`, `{"a":10}`)
	deliver := func(b *testing.B, tg *rabbitmq.Target) bool {
		res, err := tg.Deliver(context.Background(), evs)
		if err != nil || len(res.Failures) > 0 {
			b.Errorf("Deliver: %v %v", err, res.Failures)
			return false
		}
		return true
	}
	for _, persistent := range []bool{true, false} {
		b.Run(fmt.Sprintf("persistent=%v", persistent), func(b *testing.B) {
			tg := newTarget(b, rabbitmq.Config{URL: rabbittest.URL(b), RoutingKey: q, Persistent: persistent, Mandatory: true})
			deliver(b, tg) // connect outside the timing
			b.Run("one at a time", func(b *testing.B) {
				start := time.Now()
				for b.Loop() {
					if !deliver(b, tg) {
						return
					}
				}
				b.ReportMetric(float64(b.N*len(evs))/time.Since(start).Seconds(), "msgs/s")
			})
			b.Run("8 per CPU at once", func(b *testing.B) {
				b.SetParallelism(8)
				start := time.Now()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if !deliver(b, tg) {
							return
						}
					}
				})
				b.ReportMetric(float64(b.N*len(evs))/time.Since(start).Seconds(), "msgs/s")
			})
		})
	}
}
