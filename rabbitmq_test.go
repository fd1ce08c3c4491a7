package pipes_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/internal/rabbittest"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source/memory"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Any source with a rabbitmq target: a memory queue's messages are
// published, routed by a template, confirmed, and only then deleted; a
// message no queue is bound for fails and comes back (mandatory), never
// lost. Relies on the broker's publisher confirms and basic.return.
func TestAMemoryPipeToARabbitMQTargetRoutesByTemplate(t *testing.T) {
	t.Parallel()
	url := rabbittest.URL(t)
	ch := rabbittest.Channel(t)
	exchange := rabbittest.Name(t, "-x")
	if err := ch.ExchangeDeclare(exchange, "topic", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	orders, refunds := rabbittest.Name(t, "-orders"), rabbittest.Name(t, "-refunds")
	for q, key := range map[string]string{orders: "shop.order", refunds: "shop.refund"} {
		rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{})
		if err := ch.QueueBind(q, key, exchange, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	preload := writeFile(t, "events.jsonl", `{"body":{"kind":"order","n":1}}
{"body":{"kind":"refund","n":2}}
{"body":{"kind":"order","n":3}}
{"body":{"kind":"unknown","n":4}}
`)
	file := writeFile(t, "pipeline.yaml", fmt.Sprintf(`
name: shop
source:
  type: memory
  preload: %s
  visibility_timeout: 1s
  wait_time: 1s
  redrive_policy: {max_receive_count: 2, dead_letter_queue: shop-dlq}
target:
  type: rabbitmq
  url: %s
  exchange: %s
  routing_key: shop.<$.body.kind>
  headers: {x-kind: <$.body.kind>}
`, preload, url, exchange))
	specs, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	env := pipes.Env{Drain: true, Broker: memory.NewBroker()}
	built, err := pipes.NewRegistry().Build(context.Background(), specs, env)
	if err != nil {
		t.Fatal(err)
	}
	if err := pipe.NewRunner(built...).Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for name, q := range map[string]string{"orders": orders, "refunds": refunds} {
		for _, d := range rabbittest.Get(t, q) {
			var rec struct{ Body string }
			var body map[string]any
			if err := json.Unmarshal(d.Body, &rec); err != nil || json.Unmarshal([]byte(rec.Body), &body) != nil {
				t.Fatalf("published %s: want a Pipes SQS record", d.Body)
			}
			got = append(got, fmt.Sprintf("%s:%v:%v", name, body["kind"], d.Headers["x-kind"]))
		}
	}
	sort.Strings(got)
	dlq, _ := env.Broker.Lookup("shop-dlq")
	if dead := dlq.Snapshot(); len(dead) != 1 || !strings.Contains(dead[0].Body, "unknown") {
		t.Errorf("the unroutable message is not in the dead-letter queue after its 2 receives")
	}
	want := "[orders:order:order orders:order:order refunds:refund:refund]"
	if fmt.Sprint(got) != want {
		t.Fatalf("published %v, want %s", got, want)
	}
}

// A rabbitmq source end to end: records in the Pipes RabbitMQ shape reach
// an http target, a filter on data drops some (acked), the target's
// partial answer fails others, which the queue's dead-letter exchange
// takes with x-death reason rejected; the queue ends empty. Relies on the
// broker's dead-lettering of basic.nack(requeue=false).
func TestARabbitMQPipeDeliversFiltersAndDeadLettersThroughTheExchange(t *testing.T) {
	t.Parallel()
	rabbittest.ManagementURL(t) // skips without it: the source reads the queue's dead-letter exchange from the management API
	url := rabbittest.URL(t)
	dlx, dlq := rabbittest.DeclareDLX(t)
	queue := rabbittest.Name(t, "")
	rabbittest.DeclareQueue(t, queue, rabbittest.QueueOptions{DeadLetterExchange: dlx})
	rabbittest.Publish(t, queue, `{"kind":"order","n":1}`, `{"kind":"order","n":2,"fail":true}`, `{"kind":"noise","n":3}`, `{"kind":"order","n":4}`)

	var mu sync.Mutex
	var got []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var batch []map[string]any
		if err := json.NewDecoder(r.Body).Decode(&batch); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var failures []map[string]string
		mu.Lock()
		for _, rec := range batch {
			got = append(got, rec)
			data, _ := base64.StdEncoding.DecodeString(rec["data"].(string))
			if strings.Contains(string(data), "fail") {
				failures = append(failures, map[string]string{"itemIdentifier": rec["messageId"].(string)})
			}
		}
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"batchItemFailures": failures})
	}))
	t.Cleanup(srv.Close)
	file := writeFile(t, "pipeline.yaml", fmt.Sprintf(`
name: rabbit-orders
source:
  type: rabbitmq
  url: %s
  queue: %s
  batch_size: 10
  batch_window: 1s
filter:
  patterns: ['{"data": {"kind": ["order"]}}']
target:
  type: http
  url: %s
`, url, queue, srv.URL))
	specs, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	built, err := pipes.NewRegistry().Build(context.Background(), specs, pipes.Env{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pipe.NewRunner(built...).Run(ctx) }()
	var dead []amqp.Delivery
	waitFor(t, 30*time.Second, "the failed message in the dead-letter queue", func() bool {
		dead = append(dead, rabbittest.Get(t, dlq)...)
		return len(dead) >= 1
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := rabbittest.Count(t, queue); n != 0 {
		t.Errorf("%d messages left in the queue, want 0 (delivered and filtered ones acked)", n)
	}
	if len(dead) != 1 || !strings.Contains(string(dead[0].Body), `"fail":true`) {
		t.Fatalf("dead-lettered %d messages, want the failing one", len(dead))
	}
	deaths, _ := dead[0].Headers["x-death"].([]any)
	if len(deaths) != 1 {
		t.Fatalf("x-death %v", dead[0].Headers["x-death"])
	}
	death := deaths[0].(amqp.Table)
	if death["reason"] != "rejected" || death["queue"] != queue {
		t.Errorf("x-death %v, want reason rejected from %s", death, queue)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("the target got %d records, want the 3 orders", len(got))
	}
	rec := got[0]
	if rec["eventSource"] != "aws:rmq" || rec["eventSourceKey"] != queue+"::/" || rec["basicProperties"] == nil {
		t.Errorf("record %v is not in the Pipes RabbitMQ shape", rec)
	}
}
