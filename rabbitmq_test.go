package pipes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/internal/rabbittest"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source/memory"
)

// Any source with a rabbitmq target: a memory queue's messages are
// published, routed by a template, confirmed, and only then deleted; a
// message no queue is bound for fails and comes back (mandatory), never
// lost. Relies on the broker's publisher confirms and basic.return.
func TestAMemoryPipeToARabbitMQTargetRoutesByTemplate(t *testing.T) {
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
