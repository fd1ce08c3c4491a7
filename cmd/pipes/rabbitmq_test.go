package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/internal/rabbittest"
)

// The fault tests of the binary on a RabbitMQ source. Each says which
// broker behaviour it relies on.

// rabbitTarget is a real HTTP target for records of the Pipes RabbitMQ
// shape: it accepts every batch after delay and counts acceptances per
// body (the decoded data).
type rabbitTarget struct {
	*httptest.Server
	delay    time.Duration
	mu       sync.Mutex
	ok       map[string]int
	started  int
	finished int
	inflight int
	last     time.Time // when a call last started or ended
}

func newRabbitTarget(t *testing.T, delay time.Duration) *rabbitTarget {
	c := &rabbitTarget{ok: map[string]int{}, delay: delay, last: time.Now()}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var batch []struct {
			Data []byte `json:"data"` // base64 in JSON
		}
		if err := json.NewDecoder(r.Body).Decode(&batch); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.started++
		c.inflight++
		c.last = time.Now()
		c.mu.Unlock()
		defer func() {
			c.mu.Lock()
			c.inflight--
			c.last = time.Now()
			c.mu.Unlock()
		}()
		select {
		case <-time.After(c.delay):
		case <-r.Context().Done():
			return // the runner gave up on this call: nothing was accepted
		}
		c.mu.Lock()
		for _, rec := range batch {
			c.ok[string(rec.Data)]++
		}
		c.finished++
		c.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(c.Close)
	return c
}

// snapshot copies the acceptances and counts the calls.
func (c *rabbitTarget) snapshot() (ok map[string]int, started, finished int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ok = make(map[string]int, len(c.ok))
	for k, v := range c.ok {
		ok[k] = v
	}
	return ok, c.started, c.finished
}

// idleFor reports whether no call has been under way for d.
func (c *rabbitTarget) idleFor(d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inflight == 0 && time.Since(c.last) >= d
}

// rabbitPipeFile writes a pipe from the RabbitMQ queue to the http target
// at targetURL; source holds more source keys, one "key: value" each.
func rabbitPipeFile(t *testing.T, amqpURL, queue, targetURL string, source ...string) string {
	file := filepath.Join(t.TempDir(), "pipe.yaml")
	extra := ""
	for _, kv := range source {
		extra += "  " + kv + "\n"
	}
	content := fmt.Sprintf(`
name: rabbit
source:
  type: rabbitmq
  url: %s
  queue: %s
%starget:
  type: http
  url: %s
  timeout: 20s
`, amqpURL, queue, extra, targetURL)
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// bodies are n JSON bodies {"n":i}, published to queue.
func publishBodies(t *testing.T, queue string, n int) []string {
	t.Helper()
	bodies := make([]string, n)
	for i := range bodies {
		bodies[i] = fmt.Sprintf(`{"n":%d}`, i)
	}
	rabbittest.Publish(t, queue, bodies...)
	return bodies
}

// queueWithDLQ declares a classic queue whose dead-letter exchange routes
// to a DLQ, and returns both names.
func queueWithDLQ(t *testing.T, opts rabbittest.QueueOptions) (queue, dlq string) {
	t.Helper()
	dlx, dlq := rabbittest.DeclareDLX(t)
	queue = rabbittest.Name(t, "")
	opts.DeadLetterExchange = dlx
	rabbittest.DeclareQueue(t, queue, opts)
	return queue, dlq
}

// management calls the broker's management API as guest, decoding its
// JSON answer into out when not nil, and returns the status.
func management(t *testing.T, method, path string, body, out any) int {
	t.Helper()
	return rabbittest.Management(t, method, path, body, out)
}

// closeSourceConnections closes, through the management API, the
// connections of pipes' RabbitMQ source on queue: those whose
// client-provided name starts with "pipes rabbitmq source <queue> ".
// Other clients' connections are never touched. The API lists a new
// connection up to 5 s late (its statistics interval): it waits up to 10
// s for one, and returns how many it closed.
func closeSourceConnections(t *testing.T, queue string) int {
	t.Helper()
	return rabbittest.CloseConnections(t, func(name string) bool {
		return strings.HasPrefix(name, "pipes rabbitmq source "+queue+" ")
	})
}

// waitFor is waitUntil that shows the runner's logs when it times out.
func waitFor(t *testing.T, p *proc, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; runner logs:\n%s", timeout, what, p.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopRunner SIGTERMs p and fails the test unless it exits 0.
func stopRunner(t *testing.T, p *proc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("runner still running 20 s after SIGTERM\n%s", p.stderr)
	}
	if p.err != nil {
		t.Fatalf("runner exit after SIGTERM: %v\n%s", p.err, p.stderr)
	}
}

// waitDeliveredAndStop waits until every body was accepted, the target
// has been idle for a second and the queue holds nothing, ready or unacked
// (the management API's count, up to 5 s late: a delivery the source has
// buffered but not handed to the pipe is unacked), then stops the runner.
func waitDeliveredAndStop(t *testing.T, p *proc, target *rabbitTarget, queue string, bodies []string) {
	t.Helper()
	waitFor(t, p, 60*time.Second, "every message accepted and the queue empty", func() bool {
		ok, _, _ := target.snapshot()
		if len(ok) < len(bodies) || !target.idleFor(time.Second) || rabbittest.Count(t, queue) != 0 {
			return false
		}
		var q struct {
			Messages *int `json:"messages"`
		}
		management(t, http.MethodGet, "/api/queues/%2F/"+url.PathEscape(queue), nil, &q)
		return q.Messages != nil && *q.Messages == 0
	})
	stopRunner(t, p)
}

// checkNothingLost checks the end state: every body accepted at least
// once, nothing left in the queue (ready: the runner is stopped, so
// nothing is unacked) and nothing in the DLQ; it returns the duplicates.
func checkNothingLost(t *testing.T, target *rabbitTarget, queue, dlq string, bodies []string) (dupes int) {
	t.Helper()
	ok, _, _ := target.snapshot()
	for _, b := range bodies {
		if ok[b] == 0 {
			t.Errorf("%s was lost", b)
		}
		dupes += max(ok[b]-1, 0)
	}
	if n := rabbittest.Count(t, queue); n != 0 {
		t.Errorf("%d messages left in the queue after the stop, want 0", n)
	}
	if dead := rabbittest.Get(t, dlq); len(dead) != 0 {
		t.Errorf("%d messages dead-lettered (first %s), want none", len(dead), dead[0].Body)
	}
	return dupes
}

// SIGKILL mid-batch: a killed runner never acked what it had in flight,
// and the broker requeues the unacked deliveries of a connection that
// closes (a killed process's socket closes), flagged redelivered. So every
// message is delivered at least once, and none is dead-lettered: a
// connection loss is not a rejection.
//
// Relies on: unacked deliveries requeued on connection close; dead-lettering
// only on basic.nack/reject without requeue (the queue has a DLX).
func TestRabbitMQKillingTheRunnerMidBatchLosesAndDeadLettersNothing(t *testing.T) {
	t.Parallel()
	rabbittest.ManagementURL(t) // skips without it: the queues are counted through the management API
	amqpURL := rabbittest.URL(t)
	queue, dlq := queueWithDLQ(t, rabbittest.QueueOptions{})
	bodies := publishBodies(t, queue, 500)
	target := newRabbitTarget(t, 300*time.Millisecond) // 50 in flight per 300 ms: ~3 s of work
	file := rabbitPipeFile(t, amqpURL, queue, target.URL, "batch_size: 10", "max_concurrency: 5")

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d (kill moments)", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	for kill := range 2 {
		p := startRunner(t, file)
		_, before, _ := target.snapshot()
		waitUntil(t, 30*time.Second, "the runner to deliver", func() bool {
			_, n, _ := target.snapshot()
			return n > before
		})
		time.Sleep(time.Duration(rng.IntN(900)) * time.Millisecond)
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = p.wait()
		ok, started, finished := target.snapshot()
		t.Logf("kill %d: %d of %d bodies accepted so far; %d batches started, %d finished", kill+1, len(ok), len(bodies), started, finished)
	}
	p := startRunner(t, file)
	waitDeliveredAndStop(t, p, target, queue, bodies)
	dupes := checkNothingLost(t, target, queue, dlq, bodies)
	t.Logf("%d duplicates after 2 kills (messages in flight at a kill)", dupes)
}

// SIGTERM with batches in flight at a target slower than the shutdown
// timeout: the runner exits 0 within --shutdown-timeout and a few seconds;
// what was done is acked, what was not is requeued (basic.nack with
// requeue, or the broker's requeue when the connection closes), never
// dead-lettered.
//
// Relies on: basic.nack with requeue never dead-letters; unacked
// deliveries requeued on connection close.
func TestRabbitMQSIGTERMAcksOrRequeuesEverythingAndExitsZero(t *testing.T) {
	t.Parallel()
	amqpURL := rabbittest.URL(t)
	queue, dlq := queueWithDLQ(t, rabbittest.QueueOptions{})
	bodies := publishBodies(t, queue, 200)
	target := newRabbitTarget(t, 2*time.Second)
	file := rabbitPipeFile(t, amqpURL, queue, target.URL, "batch_size: 10", "max_concurrency: 5")

	p := startRunner(t, file, "--shutdown-timeout", "1s")
	waitUntil(t, 30*time.Second, "some batches done and more in flight", func() bool {
		_, started, finished := target.snapshot()
		return finished >= 5 && started >= finished+3
	})
	stopAt := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
		if p.err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", p.err, p.stderr)
		}
	case <-time.After(6 * time.Second):
		t.Fatalf("runner still running 6 s after SIGTERM with --shutdown-timeout 1s\n%s", p.stderr)
	}
	took := time.Since(stopAt)
	ok, started, finished := target.snapshot()
	back := map[string]int{}
	for _, d := range rabbittest.Get(t, queue) {
		back[string(d.Body)]++
	}
	both := 0
	for _, b := range bodies {
		switch {
		case ok[b] == 0 && back[b] == 0:
			t.Errorf("%s is neither delivered nor back in the queue", b)
		case ok[b] > 0 && back[b] > 0:
			both++ // accepted, but its ack did not make it before the stop
		}
	}
	if dead := rabbittest.Get(t, dlq); len(dead) != 0 {
		t.Errorf("%d messages dead-lettered by the stop, want none", len(dead))
	}
	if len(ok) == 0 || len(back) == 0 {
		t.Errorf("%d delivered, %d requeued: the stop should have found both done and unfinished batches", len(ok), len(back))
	}
	if !strings.Contains(p.stderr.String(), "shutdown timeout reached") {
		t.Errorf("no shutdown timeout log:\n%s", p.stderr)
	}
	t.Logf("stopped %v after SIGTERM (--shutdown-timeout 1s): %d delivered, %d requeued, %d both; %d batches started, %d finished",
		took, len(ok), len(back), both, started, finished)
}

// Connections closed from outside mid-batch (the management API's DELETE
// /api/connections/{name}, as `rabbitmqctl close_connection` does): the
// source reconnects with backoff, the broker requeues what the closed
// channel had unacked, and the acks of deliveries from the closed channel
// are refused by the source as stale — which must neither dead-letter nor
// lose them (the broker redelivers them). While the source cannot get back
// in (its user's permissions are taken away for a few seconds), /readyz
// says not ready, with the reason.
//
// Relies on: unacked deliveries requeued on connection close; delivery
// tags valid only on their channel; a user without permissions on the
// vhost refused at connection.open.
func TestRabbitMQConnectionsClosedFromOutsideLoseAndDeadLetterNothing(t *testing.T) {
	t.Parallel()
	rabbittest.ManagementURL(t) // skips without it: the connections are closed through the management API
	rabbittest.URL(t)
	queue, dlq := queueWithDLQ(t, rabbittest.QueueOptions{})
	user := rabbittest.Name(t, "-user")
	pass := "pw-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	userPath := "/api/users/" + url.PathEscape(user)
	permPath := "/api/permissions/%2F/" + url.PathEscape(user)
	allow := func() {
		if code := management(t, http.MethodPut, permPath, map[string]string{"configure": ".*", "write": ".*", "read": ".*"}, nil); code >= 300 {
			t.Fatalf("granting permissions: %d", code)
		}
	}
	if code := management(t, http.MethodPut, userPath, map[string]string{"password": pass, "tags": "management"}, nil); code >= 300 {
		t.Fatalf("creating user %s: %d", user, code)
	}
	t.Cleanup(func() { management(t, http.MethodDelete, userPath, nil, nil) })
	allow()

	// 1000 messages, 10 s of work or more: it outlasts most of the faults, which
	// wait for the management API to list each new connection (≤ 5 s).
	bodies := publishBodies(t, queue, 1000)
	target := newRabbitTarget(t, 500*time.Millisecond)
	amqpURL := "amqp://" + url.PathEscape(user) + ":" + pass + "@127.0.0.1:5672/"
	if u, _ := url.Parse(rabbittest.URL(t)); u.Host != "127.0.0.1:5672" {
		t.Skipf("the test makes its own user on the machine's broker; PIPES_RABBITMQ_URL points at %s", u.Host)
	}
	file := rabbitPipeFile(t, amqpURL, queue, target.URL, "batch_size: 10", "max_concurrency: 5")
	addr := freePort(t)
	p := startRunner(t, file, "--metrics-addr", addr)

	var notReady []string
	pollDone, stopPoll := make(chan struct{}), make(chan struct{})
	go func() { // /readyz while the faults go on
		defer close(pollDone)
		for {
			select {
			case <-stopPoll:
				return
			case <-time.After(20 * time.Millisecond):
			}
			resp, err := http.Get("http://" + addr + "/readyz")
			if err != nil {
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				notReady = append(notReady, strings.TrimSpace(string(b)))
			}
		}
	}()

	reconnected := func() int { return strings.Count(p.stderr.String(), "reconnected to RabbitMQ") }
	closed := 0
	for round := range 2 { // closed mid-batch, the source gets back in at once
		_, before, _ := target.snapshot()
		waitUntil(t, 30*time.Second, "deliveries", func() bool {
			_, n, _ := target.snapshot()
			return n > before
		})
		closed += closeSourceConnections(t, queue)
		waitFor(t, p, 20*time.Second, "a reconnection", func() bool { return reconnected() > round })
	}
	// Closed, and kept out for 4 s: the source cannot reconnect, and after
	// three failed rounds of receives the pipe is not ready.
	management(t, http.MethodDelete, permPath, nil, nil)
	closed += closeSourceConnections(t, queue)
	time.Sleep(4 * time.Second)
	allow()
	waitFor(t, p, 45*time.Second, "the reconnection once allowed again", func() bool { return reconnected() >= 3 })
	close(stopPoll)
	<-pollDone

	waitDeliveredAndStop(t, p, target, queue, bodies)
	dupes := checkNothingLost(t, target, queue, dlq, bodies)
	logs := p.stderr.String()
	stale := strings.Count(logs, "deleting messages failed")
	if closed < 3 {
		t.Errorf("closed %d connections, want one per close (3)", closed)
	}
	reason := ""
	for _, r := range notReady {
		if strings.Contains(r, "not ready: ") && strings.Contains(r, queue) {
			reason = r
			break
		}
	}
	if reason == "" {
		t.Errorf("/readyz never said not ready with the reason while the source was kept out (%d not-ready answers: %q)", len(notReady), notReady)
	}
	if strings.Contains(logs, pass) {
		t.Errorf("the password appears in the logs")
	}
	if os.Getenv("PIPES_TEST_SHOW_LOGS") != "" {
		t.Log(logs)
	}
	t.Logf("%d connections closed, %d reconnections, %d stale ack logs, %d duplicates, %d not-ready answers, e.g. %q",
		closed, reconnected(), stale, dupes, len(notReady), reason)
}

// Messages whose per-queue TTL runs out before a slow pipe gets to them
// are dead-lettered by the broker with x-death reason expired; the pipe
// neither fails nor dead-letters anything itself, and logs no error.
//
// Relies on: x-message-ttl expiry at the queue's head dead-lettering
// (reason expired) through x-dead-letter-exchange; prefetch 1 keeping the
// rest in the queue, where they expire.
func TestRabbitMQTTLExpiredMessagesReachTheDLQWithoutThePipeFailingAny(t *testing.T) {
	amqpURL := rabbittest.URL(t)
	queue, dlq := queueWithDLQ(t, rabbittest.QueueOptions{MessageTTL: time.Second})
	bodies := publishBodies(t, queue, 30)
	target := newRabbitTarget(t, 400*time.Millisecond)
	file := rabbitPipeFile(t, amqpURL, queue, target.URL, "batch_size: 1", "max_concurrency: 1", "prefetch: 1")
	addr := freePort(t)
	p := startRunner(t, file, "--metrics-addr", addr)

	var dead []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, d := range rabbittest.Get(t, dlq) {
			dead = append(dead, string(d.Body))
			list, _ := d.Headers["x-death"].([]any)
			if len(list) != 1 {
				t.Fatalf("dead letter %s has x-death %v, want one entry", d.Body, d.Headers["x-death"])
			}
			xd, _ := list[0].(amqp.Table)
			reason, q := xd["reason"], xd["queue"]
			if reason != "expired" || q != queue {
				t.Errorf("dead letter %s: x-death reason %s queue %s, want expired from %s", d.Body, reason, q, queue)
			}
		}
		ok, _, _ := target.snapshot()
		if len(ok)+len(dead) >= len(bodies) && rabbittest.Count(t, queue) == 0 && target.idleFor(500*time.Millisecond) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %d delivered, %d dead-lettered, %d left of %d", len(ok), len(dead), rabbittest.Count(t, queue), len(bodies))
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, metrics := httpGet(t, "http://"+addr+"/metrics")
	stopRunner(t, p)
	ok, _, _ := target.snapshot()
	for _, b := range dead {
		if ok[b] > 0 {
			t.Errorf("%s was delivered and dead-lettered", b)
		}
	}
	if len(ok) == 0 || len(dead) == 0 {
		t.Errorf("%d delivered, %d expired: want both", len(ok), len(dead))
	}
	if len(ok)+len(dead) != len(bodies) {
		t.Errorf("%d delivered + %d expired != %d published", len(ok), len(dead), len(bodies))
	}
	for _, bad := range []string{`pipes_messages_failed_total{`, `pipes_messages_dead_lettered_total{`, `pipes_execution_failed_total{`} {
		if m := regexp.MustCompile(regexp.QuoteMeta(bad) + `[^}]*} ([0-9.e+]+)`).FindStringSubmatch(metrics); m != nil && m[1] != "0" {
			t.Errorf("/metrics: %s = %s, want 0", bad, m[1])
		}
	}
	if delivered := regexp.MustCompile(`pipes_messages_delivered_total\{pipe="rabbit"\} (\d+)`).FindStringSubmatch(metrics); delivered == nil || delivered[1] != strconv.Itoa(len(ok)) {
		t.Errorf("/metrics delivered = %v, want %d", delivered, len(ok))
	}
	if strings.Contains(p.stderr.String(), "level=ERROR") {
		t.Errorf("the pipe logged an error:\n%s", p.stderr)
	}
	t.Logf("%d delivered, %d expired into the DLQ with reason expired", len(ok), len(dead))
}

// `pipes test --records` with records of the Pipes RabbitMQ shape: data is
// the base64 body, which the filter and the template see decoded when it is
// JSON; basicProperties are there to read. A record as Pipes gives it has
// no messageId: pipes makes one up, as its source does.
func TestPipesTestTakesRabbitMQRecords(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "p.yaml")
	os.WriteFile(file, []byte(`name: r
source: {type: rabbitmq, url: "amqp://guest:guest@127.0.0.1:5672/", queue: orders}
filter:
  patterns: ['{"data": {"x": [{"numeric": [">", 1]}]}}']
target: {type: stdout, input_template: '{"x": <$.data.x>, "type": "<$.basicProperties.contentType>", "id": "<$.messageId>"}'}
`), 0o644)
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	records := strings.Join([]string{
		// as Pipes gives it: no messageId
		`{"eventSource":"aws:rmq","eventSourceArn":"arn:aws:mq:us-east-1:123456789012:broker:b:b-1","eventSourceKey":"orders::/","basicProperties":{"contentType":"application/json","contentEncoding":null,"headers":{"h":{"bytes":[104,105]}},"deliveryMode":2,"priority":0,"correlationId":null,"replyTo":null,"expiration":null,"messageId":null,"timestamp":"Jan 1, 1970, 12:33:41 AM","type":null,"userId":null,"appId":null,"clusterId":null,"bodySize":7},"redelivered":false,"data":"` + b64(`{"x":2}`) + `"}`,
		`{"messageId":"m-2","eventSource":"aws:rmq","basicProperties":{"contentType":"application/json"},"redelivered":false,"data":"` + b64(`{"x":1}`) + `"}`,
		`{"messageId":"m-3","eventSource":"aws:rmq","basicProperties":{"contentType":"text/x-json"},"redelivered":true,"data":"` + b64(`{"x":7}`) + `"}`,
		`{"messageId":"m-4","eventSource":"aws:rmq","basicProperties":{"contentType":"text/plain"},"redelivered":false,"data":"` + b64(`not json`) + `"}`,
		`{"messageId":"m-5","eventSource":"aws:rmq","data":"%%%"}`,
	}, "\n") + "\n"
	input := filepath.Join(dir, "records.jsonl")
	os.WriteFile(input, []byte(records), 0o644)
	code, stdout, stderr := runCLI(t, "test", "-f", file, "--records", "--input", input)
	if code != 1 || !strings.Contains(stderr, "1 event line(s) could not be read") {
		t.Errorf("exit %d, stderr %s; want 1 for the line that is not a record", code, stderr)
	}
	want := `{"index":0,"passed":true,"target_input":{"x":2,"type":"application/json","id":"pipes-test-0"}}
{"index":1,"passed":false,"target_input":null}
{"index":2,"passed":true,"target_input":{"x":7,"type":"text/x-json","id":"m-3"}}
{"index":3,"passed":false,"target_input":null}
{"index":4,"passed":false,"target_input":null,"error":"` + input + `:5: not a Pipes RabbitMQ record: record field data is not base64: illegal base64 data at input byte 0"}
`
	if stdout != want {
		t.Errorf("output:\n%s\nwant:\n%s", stdout, want)
	}
}

// `pipes validate` accepts the RabbitMQ example and locates every problem
// of a bad file: a url that is not amqp(s), a missing queue, a
// rabbitmq-only key on an sqs source.
func TestValidateChecksRabbitMQSources(t *testing.T) {
	code, stdout, stderr := runCLI(t, "validate", "-f", "../../examples/rabbitmq/pipeline.yaml")
	if code != 0 || !strings.Contains(stdout, "ok: 2 pipe") {
		t.Errorf("the example: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	file := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(file, []byte(`pipes:
  - name: rabbit
    source:
      type: rabbitmq
      url: http://
    target: {type: stdout}
  - name: sqsy
    source:
      type: sqs
      queue_name: orders
      prefetch: 10
    target: {type: stdout}
`), 0o644)
	code, _, stderr = runCLI(t, "validate", "-f", file)
	if code != 2 {
		t.Fatalf("exit %d, want 2\n%s", code, stderr)
	}
	for _, want := range []string{
		file + ":4:7: pipes[0].source: queue is required for a rabbitmq source",
		file + ":5:12: pipes[0].source.url: must be an amqp:// or amqps:// URL, not http://",
		file + ":11:7: pipes[1].source.prefetch: only for rabbitmq sources",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}
