package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/internal/rabbittest"
)

// restartBroker stops and starts the RabbitMQ application of the local
// node (rabbitmqctl stop_app, start_app: the node and its Erlang VM stay
// up, so the restart takes seconds), then waits until AMQP and the
// management API answer again. It is for the one test that must restart
// the shared broker: every other test's connections drop too.
func restartBroker(t *testing.T) time.Duration {
	t.Helper()
	ctl := func(args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "rabbitmqctl", args...).CombinedOutput(); err != nil {
			t.Fatalf("rabbitmqctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	start := time.Now()
	ctl("stop_app")
	started := false
	t.Cleanup(func() {
		if !started { // never leave the shared broker stopped
			_ = exec.Command("rabbitmqctl", "start_app").Run()
		}
	})
	ctl("start_app")
	started = true
	ctl("await_startup")
	waitUntil(t, time.Minute, "AMQP and the management API to answer again", func() bool {
		conn, err := amqp.Dial(rabbittest.URL(t))
		if err != nil {
			return false
		}
		_ = conn.Close()
		req, _ := http.NewRequest(http.MethodGet, rabbittest.ManagementURL(t)+"/api/overview", nil)
		req.SetBasicAuth("guest", "guest")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return time.Since(start)
}

// retryTarget fails every message the first time it sees it (by body) and
// accepts it after, noting the x-pipes-attempts and x-death of what it
// accepts.
type retryTarget struct {
	*httptest.Server
	mu       sync.Mutex
	failed   map[string]int
	ok       map[string]int
	attempts map[string]float64 // x-pipes-attempts of the accepted delivery
	deaths   map[string]string  // the x-death queues and reasons of the accepted delivery
}

func newRetryTarget(t *testing.T) *retryTarget {
	c := &retryTarget{failed: map[string]int{}, ok: map[string]int{}, attempts: map[string]float64{}, deaths: map[string]string{}}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var batch []struct {
			MessageID       string `json:"messageId"`
			Data            []byte `json:"data"`
			BasicProperties struct {
				Headers map[string]json.RawMessage `json:"headers"`
			} `json:"basicProperties"`
		}
		if err := json.NewDecoder(r.Body).Decode(&batch); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var failures []map[string]string
		c.mu.Lock()
		for _, rec := range batch {
			body := string(rec.Data)
			if c.failed[body] == 0 {
				c.failed[body]++
				failures = append(failures, map[string]string{"itemIdentifier": rec.MessageID})
				continue
			}
			c.ok[body]++
			var n float64
			_ = json.Unmarshal(rec.BasicProperties.Headers["x-pipes-attempts"], &n)
			c.attempts[body] = n
			var deaths []struct {
				Queue  struct{ Bytes []byte } `json:"queue"`
				Reason struct{ Bytes []byte } `json:"reason"`
			}
			_ = json.Unmarshal(rec.BasicProperties.Headers["x-death"], &deaths)
			var parts []string
			for _, d := range deaths {
				parts = append(parts, string(d.Queue.Bytes)+":"+string(d.Reason.Bytes))
			}
			c.deaths[body] = strings.Join(parts, ",")
		}
		c.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"batchItemFailures": failures})
	}))
	t.Cleanup(c.Close)
	return c
}

// TestABrokerRestartLosesNoRetryWaitingInADelayQueue: messages that fail
// once wait for their retry as copies in <queue>.pipes-delay.20s; the
// broker restarts meanwhile (stop_app, start_app); every message is still
// delivered once the delay has passed, none is dead-lettered, and each
// carries its attempt count (x-pipes-attempts 1).
//
// It restarts the shared broker, so it runs only when
// PIPES_TEST_BROKER_RESTART=1 (and rabbitmqctl can reach the node);
// PIPES_TEST_BROKER_RESTART=skip runs it without the restart, to check
// the test itself.
//
// Relies on RabbitMQ 3.10: quorum queues with x-delivery-limit, classic
// durable queues keeping persistent messages and their TTL across a
// restart, dead-lettering on expiry.
func TestABrokerRestartLosesNoRetryWaitingInADelayQueue(t *testing.T) {
	mode := os.Getenv("PIPES_TEST_BROKER_RESTART")
	if mode != "1" && mode != "skip" {
		t.Skip("restarts the shared RabbitMQ broker: set PIPES_TEST_BROKER_RESTART=1 to run it")
	}
	amqpURL := rabbittest.URL(t)
	queue := rabbittest.Name(t, "")
	dlq := queue + "-dlq"
	rabbittest.DeclareQueue(t, dlq, rabbittest.QueueOptions{})
	rabbittest.DeclareQueue(t, queue, rabbittest.QueueOptions{Quorum: true, DeliveryLimit: 5,
		Args: amqp.Table{"x-dead-letter-exchange": ""}, DeadLetterRoutingKey: dlq})
	delayQueue := queue + ".pipes-delay.20s"
	t.Cleanup(func() {
		if conn, err := amqp.Dial(amqpURL); err == nil {
			if ch, err := conn.Channel(); err == nil {
				_, _ = ch.QueueDelete(delayQueue, false, false, false)
			}
			_ = conn.Close()
		}
	})
	const n = 30
	bodies := publishBodies(t, queue, n)
	target := newRetryTarget(t)
	file := rabbitPipeFile(t, amqpURL, queue, target.URL, "batch_size: 10", "max_concurrency: 2",
		"retry_backoff: {base: 20s, factor: 1, max: 20s}")
	p := startRunner(t, file)

	waitFor(t, p, 60*time.Second, "every message to fail once and wait in "+delayQueue, func() bool {
		target.mu.Lock()
		failed := len(target.failed)
		target.mu.Unlock()
		return failed == n && rabbittest.Count(t, delayQueue) == n
	})
	var took time.Duration
	if mode == "1" {
		took = restartBroker(t)
	}
	t.Logf("the broker restarted in %v", took.Round(100*time.Millisecond))
	if took > 18*time.Second {
		t.Logf("the restart took longer than most of the delay: some copies may have expired during it (they are dead-lettered back when the queue starts)")
	}

	waitFor(t, p, 3*time.Minute, "every message to be delivered after the restart", func() bool {
		target.mu.Lock()
		defer target.mu.Unlock()
		return len(target.ok) == n
	})
	stopRunner(t, p)
	target.mu.Lock()
	defer target.mu.Unlock()
	for _, b := range bodies {
		if target.ok[b] < 1 {
			t.Errorf("%s was never accepted", b)
		}
		if target.attempts[b] != 1 {
			t.Errorf("%s was accepted with x-pipes-attempts %v, want 1 (its one failure before the restart)", b, target.attempts[b])
		}
		if !strings.Contains(target.deaths[b], delayQueue+":expired") {
			t.Errorf("%s has x-death %q, want the delay queue's expiry", b, target.deaths[b])
		}
	}
	if d := rabbittest.Count(t, dlq); d != 0 {
		t.Errorf("%d messages were dead-lettered", d)
	}
	if left := rabbittest.Count(t, queue) + rabbittest.Count(t, delayQueue); left != 0 {
		t.Errorf("%d messages left in %s and %s", left, queue, delayQueue)
	}
	dupes := 0
	for _, c := range target.ok {
		dupes += c - 1
	}
	t.Logf("%d messages delivered, %d duplicates; x-death of one: %s", len(target.ok), dupes, target.deaths[bodies[0]])
}
