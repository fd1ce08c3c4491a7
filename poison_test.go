package pipes_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source/memory"
)

// Poison messages get a per-item failure with a logged reason; the other
// items of their batch go on and the runner keeps running.
func TestPoisonMessagesFailAloneAndTheRestGoesOn(t *testing.T) {
	var mu sync.Mutex
	var delivered []string
	reg := pipes.NewRegistry()
	reg.MustRegisterFunc("collect", pipe.TargetFunc(func(_ context.Context, events []*pipe.Event) (pipe.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range events {
			delivered = append(delivered, string(ev.RecordJSON))
		}
		return pipe.Result{}, nil
	}))
	specs, err := config.Loader{}.Parse("poison.yaml", []byte(`
name: poison
source:
  type: memory
  wait_time: 50ms
  visibility_timeout: 1s
  batch_size: 10
  redrive_policy: {max_receive_count: 1, dead_letter_queue: poison-dlq}
filter:
  jq: '(.body.n // 0) / (if .body.zero then 0 else 1 end) | . >= 0'
target:
  type: func
  func: collect
  input_template: '{"n": <$.body.n>, "tag": "<$.body.tag>"}'
`))
	if err != nil {
		t.Fatal(err)
	}
	broker := memory.NewBroker()
	built, err := reg.Build(context.Background(), specs, pipes.Env{Broker: broker, Drain: true})
	if err != nil {
		t.Fatal(err)
	}
	q, _ := broker.Lookup("poison")
	bodies := []string{
		`{"n":1,"tag":"ok"}`,
		`{"n":2,"zero":true}`, // the jq filter errors: division by zero
		`{"n":3,"tag":"` + strings.Repeat("x", 256*1024-20) + `"}`, // a 256 KB body
		`{"n":4,"tag":"ok"}`,
		"\xff\xfe not UTF-8", // refused by the queue or failed alone
		`{"n":6,"tag":"ünïcødé \"quoted\""}`,
	}
	sent := 0
	for _, b := range bodies {
		if _, err := q.Send(context.Background(), memory.SendInput{Body: b}); err == nil {
			sent++
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pipe.NewRunner(built...).Run(ctx); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatal("the pipe did not drain")
	}
	joined := strings.Join(delivered, "\n")
	for _, want := range []string{`"n": 1`, `"n": 3`, `"n": 4`, `"n": 6`} {
		if !strings.Contains(joined, want) {
			t.Errorf("good message with %s was not delivered:\n%.300s", want, joined)
		}
	}
	if strings.Contains(joined, `"n": 2`) {
		t.Error("the message whose filter errored was delivered")
	}
	dlq, _ := broker.Lookup("poison-dlq")
	if n := len(dlq.Snapshot()); n != sent-4 {
		t.Errorf("dead-letter queue holds %d, want %d (the poison ones)", n, sent-4)
	}
}

func TestSNSEnvelopesAreUnwrappedBeforeFilterAndTemplate(t *testing.T) {
	var mu sync.Mutex
	var got []string
	reg := pipes.NewRegistry()
	reg.MustRegisterFunc("collect", pipe.TargetFunc(func(_ context.Context, events []*pipe.Event) (pipe.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range events {
			got = append(got, string(ev.RecordJSON))
		}
		return pipe.Result{}, nil
	}))
	specs, err := config.Loader{}.Parse("unwrap.yaml", []byte(`
name: fanout
source: {type: memory, wait_time: 50ms, unwrap: sns}
filter:
  patterns:
    - {"body": {"kind": ["order"]}, "messageAttributes": {"tenant": {"stringValue": ["acme"]}}}
target:
  type: func
  func: collect
  input_template: '{"order": <$.body.id>, "topic": "<$.envelope.TopicArn>"}'
`))
	if err != nil {
		t.Fatal(err)
	}
	broker := memory.NewBroker()
	built, err := reg.Build(context.Background(), specs, pipes.Env{Broker: broker, Drain: true})
	if err != nil {
		t.Fatal(err)
	}
	q, _ := broker.Lookup("fanout")
	note := func(msg, tenant string) string {
		return `{"Type":"Notification","MessageId":"n","TopicArn":"arn:aws:sns:us-east-1:123456789012:orders","Message":` +
			strconv.Quote(msg) + `,"MessageAttributes":{"tenant":{"Type":"String","Value":"` + tenant + `"}}}`
	}
	for _, b := range []string{note(`{"kind":"order","id":1}`, "acme"), note(`{"kind":"refund","id":2}`, "acme"), note(`{"kind":"order","id":3}`, "other")} {
		if _, err := q.Send(context.Background(), memory.SendInput{Body: b}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := pipe.NewRunner(built...).Run(ctx); err != nil {
		t.Fatal(err)
	}
	want := `{"order": 1, "topic": "arn:aws:sns:us-east-1:123456789012:orders"}`
	if len(got) != 1 || got[0] != want {
		t.Fatalf("target got %q, want only %s", got, want)
	}
}

// rate_limit in the file reaches the runtime: 40 messages at 20 a second
// (a burst of 20) cannot drain in less than a second.
func TestRateLimitFromThePipelineFile(t *testing.T) {
	reg := pipes.NewRegistry()
	reg.MustRegisterFunc("noop", pipe.TargetFunc(func(context.Context, []*pipe.Event) (pipe.Result, error) { return pipe.Result{}, nil }))
	specs, err := config.Loader{}.Parse("rate.yaml", []byte("name: slow\nsource: {type: memory, wait_time: 50ms, rate_limit: 20}\ntarget: {type: func, func: noop}\n"))
	if err != nil {
		t.Fatal(err)
	}
	broker := memory.NewBroker()
	built, err := reg.Build(context.Background(), specs, pipes.Env{Broker: broker, Drain: true})
	if err != nil {
		t.Fatal(err)
	}
	q, _ := broker.Lookup("slow")
	for i := range 40 {
		q.Send(context.Background(), memory.SendInput{Body: strconv.Itoa(i)})
	}
	start := time.Now()
	if err := pipe.NewRunner(built...).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 900*time.Millisecond {
		t.Fatalf("40 messages drained in %v: the rate limit of 20/s was not applied", took)
	}
}
