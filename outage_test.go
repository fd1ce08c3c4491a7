package pipes_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/internal/rabbittest"
	"github.com/pipesproject/pipes/internal/sqstest"
)

// outageTarget is an HTTP target that goes down: once it has taken
// downAfter good messages it answers 503 to every call for downFor, then
// works again. Whenever it works it names the bad messages (a body with
// "bad") as failed items (a verdict on them) and takes the good ones,
// noting the attempt count each record shows at its first success.
type outageTarget struct {
	*httptest.Server
	downAfter int
	downFor   time.Duration
	latency   time.Duration
	// read gives a record's body and its attempt count as the record
	// shows it.
	read func(rec map[string]any) (body string, attempts int)

	mu        sync.Mutex
	taken     int
	downFrom  time.Time
	refused   int            // calls answered 503
	attempts  map[string]int // good body → attempts at its first success
	order     []string       // good bodies in the order of their first success
	successes map[string]int // good body → successes (more than 1: a duplicate)
	failed    map[string]int // bad body → times named failed
}

func newOutageTarget(t *testing.T, downAfter int, downFor time.Duration, read func(map[string]any) (string, int)) *outageTarget {
	o := &outageTarget{downAfter: downAfter, downFor: downFor, latency: 20 * time.Millisecond, read: read,
		attempts: map[string]int{}, successes: map[string]int{}, failed: map[string]int{}}
	o.Server = httptest.NewServer(http.HandlerFunc(o.serve))
	t.Cleanup(o.Close)
	return o
}

func (o *outageTarget) serve(w http.ResponseWriter, r *http.Request) {
	var batch []map[string]any
	if err := json.NewDecoder(r.Body).Decode(&batch); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	time.Sleep(o.latency)
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.downFrom.IsZero() && time.Since(o.downFrom) < o.downFor {
		o.refused++
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		return
	}
	var failures []map[string]string
	for _, rec := range batch {
		body, attempts := o.read(rec)
		if strings.Contains(body, "bad") {
			o.failed[body]++
			id, _ := rec["messageId"].(string)
			failures = append(failures, map[string]string{"itemIdentifier": id})
			continue
		}
		if o.successes[body] == 0 {
			o.attempts[body] = attempts
			o.order = append(o.order, body)
		}
		o.successes[body]++
		o.taken++
	}
	if o.downFrom.IsZero() && o.taken >= o.downAfter {
		o.downFrom = time.Now() // the next call finds it down
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"batchItemFailures": failures})
}

// outageBodies are n bodies, every tenth bad.
func outageBodies(n int) []string {
	out := make([]string, n)
	for i := range out {
		kind := "good"
		if i%10 == 7 {
			kind = "bad"
		}
		out[i] = fmt.Sprintf(`{"%s":%d}`, kind, i)
	}
	return out
}

// check asserts what an outage must leave: no good message dead-lettered,
// every good one delivered on its first attempt (the outage used none),
// every bad one dead-lettered (its failures were verdicts), the target
// really was down for a while. dead are the dead-lettered bodies.
func (o *outageTarget) check(t *testing.T, bodies, dead []string) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.refused < 3 {
		t.Fatalf("the target refused %d calls, want an outage long enough to open the circuit", o.refused)
	}
	goodDead, badDead := 0, map[string]bool{}
	for _, b := range dead {
		if strings.Contains(b, "bad") {
			badDead[b] = true
			continue
		}
		goodDead++
		if goodDead <= 5 {
			t.Errorf("a good message was dead-lettered: %s", b)
		}
	}
	lost, counted, dupes, bad := 0, 0, 0, 0
	for _, b := range bodies {
		if strings.Contains(b, "bad") {
			bad++
			continue
		}
		switch {
		case o.successes[b] == 0:
			lost++
		case o.attempts[b] != 1:
			counted++
			if counted <= 5 {
				t.Errorf("%s succeeded on attempt %d, want 1: the outage used up attempts", b, o.attempts[b])
			}
		}
		if o.successes[b] > 1 {
			dupes++
		}
	}
	t.Logf("%d messages, %d bad; the target refused %d calls for %s; %d good dead-lettered, %d good with attempts used up, %d good not delivered, %d duplicates; %d distinct bad dead-lettered",
		len(bodies), bad, o.refused, o.downFor, goodDead, counted, lost, dupes, len(badDead))
	if goodDead > 0 || counted > 0 {
		t.Errorf("the outage was a verdict: %d good messages dead-lettered, %d with attempts used up", goodDead, counted)
	}
	if lost > 0 {
		t.Errorf("%d good messages were never delivered", lost)
	}
	if len(badDead) != bad {
		t.Errorf("%d of the %d bad messages dead-lettered, want all", len(badDead), bad)
	}
}

// rabbitRecord reads a Pipes RabbitMQ record: its data, and its attempts
// as the source counts them (x-pipes-attempts on a copy, x-delivery-count
// on a quorum queue, the redelivered flag on a classic one).
func rabbitRecord(rec map[string]any) (string, int) {
	data, _ := rec["data"].(string)
	body, _ := base64.StdEncoding.DecodeString(data)
	props, _ := rec["basicProperties"].(map[string]any)
	headers, _ := props["headers"].(map[string]any)
	copied, _ := headers["x-pipes-attempts"].(float64)
	if n, ok := headers["x-delivery-count"].(float64); ok {
		return string(body), int(copied) + int(n) + 1
	}
	n := int(copied) + 1
	if rec["redelivered"] == true {
		n++
	}
	return string(body), n
}

// A 10 s target outage (503) over 3000 messages, 10% of them bad, on the
// three RabbitMQ queue kinds that count failures: a classic queue with a
// dead-letter exchange (a failure is final), a quorum queue with
// x-delivery-limit 3, a classic one with max_receive_count 3. The outage
// is no verdict: no good message is dead-lettered and none has an attempt
// used up (it succeeds on attempt 1), although batches were failing
// before the circuit opened and were in flight when it did; nothing is
// lost; every bad message (named failed: a verdict) ends in the
// dead-letter queue. Before, the batches of the outage's first moments
// were settled as failures: on the classic queue with a DLX those were
// dead-lettered at once.
//
// Relies on: basic.nack without requeue dead-lettering, the quorum
// queue's delivery limit, delay queues' TTL dead-lettering back.
func TestATargetOutageOnRabbitMQIsNoVerdict(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("three runs of 3000 messages through a 10 s outage")
	}
	url := rabbittest.URL(t)
	const n = 3000
	for _, kind := range []string{"classic-dlx", "quorum-limit", "max-receive-count"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			dlx, dlq := rabbittest.DeclareDLX(t)
			q := rabbittest.Name(t, "")
			opts := rabbittest.QueueOptions{DeadLetterExchange: dlx}
			extra := ""
			switch kind {
			case "quorum-limit":
				opts.Quorum, opts.DeliveryLimit = true, 3
			case "max-receive-count":
				extra = "max_receive_count: 3"
			}
			rabbittest.DeclareQueue(t, q, opts)
			bodies := outageBodies(n)
			for i := 0; i < n; i += 200 { // each call confirms within 10 s
				rabbittest.Publish(t, q, bodies[i:min(i+200, n)]...)
			}
			target := newOutageTarget(t, n/5, 10*time.Second, rabbitRecord)
			built := buildPipe(t, pipes.NewRegistry(), pipes.Env{Drain: true}, fmt.Sprintf(`
name: outage
source:
  type: rabbitmq
  url: %s
  queue: %s
  batch_size: 10
  max_concurrency: 5
  %s
target:
  type: http
  url: %s
`, url, q, extra, target.URL))
			runUntilDrained(t, 3*time.Minute, built)
			var dead []string
			deadline := time.Now().Add(10 * time.Second)
			for {
				for _, d := range rabbittest.Get(t, dlq) {
					dead = append(dead, string(d.Body))
				}
				if len(dead) >= n/10 || time.Now().After(deadline) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			target.check(t, bodies, dead)
			if left := rabbittest.Count(t, q); left != 0 {
				t.Errorf("%d messages left in the queue, want 0", left)
			}
		})
	}
}

// sqsRecord reads a Pipes SQS record: its body and ApproximateReceiveCount.
func sqsRecord(rec map[string]any) (string, int) {
	body, _ := rec["body"].(string)
	attrs, _ := rec["attributes"].(map[string]any)
	rc, _ := attrs["ApproximateReceiveCount"].(string)
	n, _ := strconv.Atoi(rc)
	return body, n
}

// fauxqs only (local-aws-sqs counts every ChangeMessageVisibility, the
// heartbeat's included, as a receive): a 10 s target outage (503) over
// 1000 messages, 10% bad, on a queue whose redrive policy moves a message
// to its DLQ after 3 receives, with a 3 s visibility timeout. The outage
// is no verdict: its batches are held by the pipe, leased by the
// heartbeat, and sent again; no good message is received twice or
// dead-lettered; every bad one (named failed) is dead-lettered after its
// 3 receives. Before, each batch failed before the circuit opened came
// back after its visibility timeout with a receive used up.
//
// Relies on: fauxqs counting receives only (not visibility changes) and
// applying the redrive policy.
func TestATargetOutageOnSQSIsNoVerdict(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("1000 messages through a 10 s outage")
	}
	fakeAWSEnv(t)
	endpoint := sqstest.EndpointOf(t, sqstest.Fauxqs)
	client := sqstest.ClientOf(t, sqstest.Fauxqs)
	queueURL, dlqURL := sqstest.CreateQueue(t, client, sqstest.QueueOptions{VisibilityTimeout: 3 * time.Second, MaxReceiveCount: 3})
	const n = 1000
	bodies := outageBodies(n)
	sqstest.SendBodies(t, client, queueURL, bodies...)
	target := newOutageTarget(t, n/5, 10*time.Second, sqsRecord)
	built := buildPipe(t, pipes.NewRegistry(), pipes.Env{Drain: true}, fmt.Sprintf(`
name: outage
source: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1, wait_time: 1s, batch_size: 10, max_concurrency: 5}
target: {type: http, url: %s}
`, queueURL, endpoint, target.URL))
	runUntilDrained(t, 3*time.Minute, built)
	dead := sqstest.DrainBodies(t, client, dlqURL)
	target.check(t, bodies, dead)
	if visible, inflight := sqstest.Count(t, client, queueURL); visible+inflight != 0 {
		t.Errorf("the queue still has %d visible and %d in-flight messages, want none", visible, inflight)
	}
}

// poisonServer is an HTTP target that answers 500 to a whole call whose
// batch holds a poison record (a body with "poison"), as a server that
// cannot parse one record fails the request, and takes every other call,
// counting each good body's successes.
func poisonServer(t *testing.T, read func(map[string]any) (string, int)) (*httptest.Server, func() (map[string]int, int)) {
	var mu sync.Mutex
	taken := map[string]int{}
	poisoned := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var batch []map[string]any
		if err := json.NewDecoder(r.Body).Decode(&batch); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, rec := range batch {
			if body, _ := read(rec); strings.Contains(body, "poison") {
				poisoned++
				http.Error(w, "cannot parse a record", http.StatusInternalServerError)
				return
			}
		}
		for _, rec := range batch {
			body, _ := read(rec)
			taken[body]++
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func() (map[string]int, int) {
		mu.Lock()
		defer mu.Unlock()
		out := make(map[string]int, len(taken))
		for k, v := range taken {
			out[k] = v
		}
		return out, poisoned
	}
}

// A poison record among 300 good ones, on RabbitMQ, with a target that
// answers 500 to any batch holding it: a whole failure, so an outage at
// first (deferred uncounted), but one that recurs while the target takes
// other batches. The pipe bisects it (Lambda's BisectBatchOnFunctionError):
// the good messages are delivered, and the poison, failing whole on its
// own while the target works, fails as a named failure would, until its
// queue's limit dead-letters it: x-delivery-limit 3 on a quorum queue,
// max_receive_count 3 on a classic one. Nothing is lost, no good message
// is dead-lettered. Before, the poison's batch was deferred again and
// again for ever (every 1 s … 60 s) and the drain never ended.
func TestAPoisonBatchOnRabbitMQIsBisected(t *testing.T) {
	t.Parallel()
	url := rabbittest.URL(t)
	for _, kind := range []string{"quorum-limit", "max-receive-count"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			dlx, dlq := rabbittest.DeclareDLX(t)
			q := rabbittest.Name(t, "")
			opts := rabbittest.QueueOptions{DeadLetterExchange: dlx}
			extra := ""
			switch kind {
			case "quorum-limit":
				opts.Quorum, opts.DeliveryLimit = true, 3
			case "max-receive-count":
				extra = "max_receive_count: 3"
			}
			rabbittest.DeclareQueue(t, q, opts)
			const n, poison = 300, 137
			bodies := make([]string, n)
			for i := range bodies {
				bodies[i] = fmt.Sprintf(`{"n":%d}`, i)
				if i == poison {
					bodies[i] = fmt.Sprintf(`{"n":%d,"poison":true}`, i)
				}
			}
			rabbittest.Publish(t, q, bodies...)
			srv, taken := poisonServer(t, rabbitRecord)
			built := buildPipe(t, pipes.NewRegistry(), pipes.Env{Drain: true}, fmt.Sprintf(`
name: poison
source:
  type: rabbitmq
  url: %s
  queue: %s
  batch_size: 10
  max_concurrency: 5
  %s
target:
  type: http
  url: %s
`, url, q, extra, srv.URL))
			start := time.Now()
			runUntilDrained(t, 2*time.Minute, built)
			var dead []string
			deadline := time.Now().Add(10 * time.Second)
			for len(dead) == 0 && time.Now().Before(deadline) {
				for _, d := range rabbittest.Get(t, dlq) {
					dead = append(dead, string(d.Body))
				}
				time.Sleep(100 * time.Millisecond)
			}
			got, poisoned := taken()
			t.Logf("drained in %v; %d calls failed for the poison", time.Since(start).Round(time.Millisecond), poisoned)
			if len(dead) != 1 || !strings.Contains(dead[0], "poison") {
				t.Errorf("dead-lettered %q, want the poison only", dead)
			}
			for i, b := range bodies {
				if i != poison && got[b] == 0 {
					t.Errorf("%s was never delivered", b)
				}
			}
			if left := rabbittest.Count(t, q); left != 0 {
				t.Errorf("%d messages left in the queue, want 0", left)
			}
		})
	}
}
