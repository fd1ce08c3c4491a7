package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/pipesproject/pipes/internal/rabbittest"
)

// closedPort is a management URL nothing listens on: a port taken and let
// go again (the shared broker's management plugin stays on).
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// failingTarget is an http target that names every record whose body
// holds "bad" in batchItemFailures and counts the others.
type failingTarget struct {
	*httptest.Server
	mu  sync.Mutex
	ok  map[string]int
	bad int
}

func newFailingTarget(t *testing.T) *failingTarget {
	f := &failingTarget{ok: map[string]int{}}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var batch []struct {
			MessageID string `json:"messageId"`
			Data      []byte `json:"data"`
		}
		if err := json.NewDecoder(r.Body).Decode(&batch); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var failed []map[string]string
		f.mu.Lock()
		for _, rec := range batch {
			if strings.Contains(string(rec.Data), "bad") {
				f.bad++
				failed = append(failed, map[string]string{"itemIdentifier": rec.MessageID})
			} else {
				f.ok[string(rec.Data)]++
			}
		}
		f.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"batchItemFailures": failed})
	}))
	t.Cleanup(f.Close)
	return f
}

// TestFallbackKeysDescribeTheQueueThatSendCreates: `pipes send --create`
// makes a quorum queue with x-delivery-limit, x-dead-letter-exchange ""
// and x-dead-letter-routing-key <queue>-dlq. With the management API
// unreachable (a closed port), the fallback keys say the same
// (dead_letter_exchange "amq.default"; the other spelling, "" with a
// routing key, is TestFallbackKeysSpellTheDefaultExchangeAsRabbitMQDoes
// in source/rabbitmq and TestSourceDeadLetterReadsTheFallbackKeys in
// config); a message that keeps failing
// reaches the dead-letter queue, the good ones the target, and `pipes
// dlq inspect` finds the dead-letter queue without the API.
//
// Relies on RabbitMQ 3.10: quorum queues with x-delivery-limit.
func TestFallbackKeysDescribeTheQueueThatSendCreates(t *testing.T) {
	t.Parallel()
	for _, spelling := range []string{"amq.default"} {
		t.Run("dead_letter_exchange "+spelling, func(t *testing.T) {
			amqpURL := rabbittest.URL(t)
			queue := rabbittest.Name(t, "")
			dlq := queue + "-dlq"
			t.Cleanup(func() {
				ch := rabbittest.Channel(t)
				_, _ = ch.QueueDelete(queue, false, false, false)
				_, _ = ch.QueueDelete(dlq, false, false, false)
			})
			target := newFailingTarget(t)
			file := rabbitPipeFile(t, amqpURL, queue, target.URL,
				"management_url: "+closedPort(t),
				"dead_letter_exchange: "+spelling,
				"dead_letter_routing_key: "+dlq,
				"delivery_limit: 2",
				"batch_size: 5", "max_concurrency: 2")
			events := writeFile(t, "events.jsonl", "{\"n\":1}\n{\"n\":2,\"bad\":true}\n{\"n\":3}\n")
			code, _, stderr := runCLI(t, "send", "-f", file, "--input", events, "--create", "--max-receive-count", "2")
			if code != 0 || !strings.Contains(stderr, "created RabbitMQ quorum queue") {
				t.Fatalf("send --create: exit %d, stderr:\n%s", code, stderr)
			}

			code, _, stderr = runCLIProc(t, nil, "run", "--drain", "--metrics-addr", "", "-f", file)
			if code != 0 {
				t.Fatalf("run --drain: exit %d, stderr:\n%s", code, stderr)
			}
			if !strings.Contains(stderr, "the management API cannot be used") || !strings.Contains(stderr, "rabbitmq-plugins enable rabbitmq_management") {
				t.Errorf("no warning that the management API is unreachable and the fallback keys are used:\n%s", stderr)
			}
			if strings.Contains(stderr, "no dead-letter exchange") || strings.Contains(stderr, "no redrive policy") {
				t.Errorf("the fallback keys name a dead-letter exchange, yet a warning says there is none:\n%s", stderr)
			}
			if strings.Contains(stderr, "visibility timeout") {
				t.Errorf("a visibility-timeout warning on a RabbitMQ pipe (the target's timeout is 20 s):\n%s", stderr)
			}
			if n := strings.Count(stderr, `msg="batch failed"`); n < 1 || strings.Contains(stderr, `msg="message failed"`) {
				t.Errorf("%d `batch failed` lines and per-message lines at the default level:\n%s", n, stderr)
			}
			target.mu.Lock()
			ok, bad := fmt.Sprint(target.ok), target.bad
			target.mu.Unlock()
			// x-delivery-limit 2 dead-letters at the third return.
			if ok != `map[{"n":1}:1 {"n":3}:1]` || bad < 2 || bad > 3 {
				t.Errorf("the target accepted %s and failed the bad message %d times, want the good ones once and the bad one 2 or 3 times (delivery_limit 2)", ok, bad)
			}
			got := rabbittest.Get(t, dlq)
			if len(got) != 1 || !strings.Contains(string(got[0].Body), "bad") {
				t.Fatalf("the dead-letter queue %s holds %q, want the bad message", dlq, bodiesOf(got))
			}
			if got[0].Headers["x-death"] == nil {
				t.Errorf("the dead letter has no x-death: %v", got[0].Headers)
			}
			if n := rabbittest.Count(t, queue); n != 0 {
				t.Errorf("%d messages left in %s", n, queue)
			}

			// pipes dlq finds the dead-letter queue from the fallback keys.
			code, _, stderr = runCLI(t, "dlq", "inspect", "-f", file)
			if code != 0 || !strings.Contains(stderr, "dead-letter queue "+dlq) {
				t.Errorf("dlq inspect without the management API: exit %d, stderr:\n%s", code, stderr)
			}
		})
	}
}
