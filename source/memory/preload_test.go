package memory_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pipesproject/pipes/source/memory"
)

func TestPreloadFile(t *testing.T) {
	q, _ := memory.NewBroker().Queue("orders", memory.Options{})
	n, err := q.Preload(t.Context(), "testdata/orders.jsonl")
	if err != nil || n != 3 {
		t.Fatalf("Preload = %d, %v; want 3", n, err)
	}
	got := q.Snapshot()
	want := []string{`{"order":1,"item":"book"}`, `{"order":2,"item":"lamp","fail":true}`, "plain text order 3"}
	for i, m := range got {
		if m.Body != want[i] {
			t.Errorf("message %d body %q, want %q", i, m.Body, want[i])
		}
	}
	if p := got[1].MessageAttributes["priority"]; p.DataType != "Number" || *p.StringValue != "5" {
		t.Errorf("attribute %+v", p)
	}
	if _, err := q.Preload(t.Context(), "testdata/missing.jsonl"); err == nil {
		t.Error("no error for a missing file")
	}
}

func TestPreloadReader(t *testing.T) {
	tests := []struct {
		name  string
		fifo  bool
		input string
		want  int
		err   string // the whole error text, "" for success
	}{
		{"blank lines and comments are skipped", false, "\n  # note\n{\"body\":\"a\"}\n\n{\"body\":[1, 2]}\n", 2, ""},
		{"FIFO lines carry groups and deduplication ids, and duplicates are dropped", true,
			`{"body":"a","group_id":"g","deduplication_id":"d"}` + "\n" + `{"body":"a","group_id":"g","deduplication_id":"d"}`, 1, ""},
		{"binary attributes are base64", false, `{"body":"a","message_attributes":{"b":{"data_type":"Binary","binary_value":"AQI="}}}`, 1, ""},
		{"an unknown key is an error", false, `{"body":"a","bdy":"b"}`,
			0, `preloading memory queue q: in.jsonl:1: unknown key "bdy" (known: body, message_attributes, group_id, deduplication_id; in attributes: data_type, string_value, binary_value)`},
		{"a missing body is an error", false, "{\"body\":\"ok\"}\n{}",
			0, "preloading memory queue q: in.jsonl:2: the line has no body"},
		{"a null body is an error", false, `{"body":null}`,
			0, "preloading memory queue q: in.jsonl:1: the line has no body"},
		{"an empty body is an error", false, `{"body":""}`,
			0, "preloading memory queue q: in.jsonl:1: the body is empty"},
		{"invalid JSON is an error", false, `{"body":`,
			0, "preloading memory queue q: in.jsonl:1: invalid JSON: unexpected EOF"},
		{"two values on a line are an error", false, `{"body":"a"} {"body":"b"}`,
			0, "preloading memory queue q: in.jsonl:1: more than one JSON value on the line"},
		{"a line that is not an object is an error", false, `"text"`,
			0, "preloading memory queue q: in.jsonl:1: the line must be a JSON object, not string"},
		{"a group id of the wrong type is an error", false, `{"body":"a","group_id":7}`,
			0, "preloading memory queue q: in.jsonl:1: group_id must be a JSON string, not number"},
		{"a group on a standard queue is an error", false, `{"body":"a","group_id":"g"}`,
			0, "preloading memory queue q: in.jsonl:1: group and deduplication ids are for FIFO queues only"},
		{"a FIFO line without a group is an error", true, `{"body":"a"}`,
			0, "preloading memory queue q: in.jsonl:1: a FIFO queue needs a message group id"},
		{"an attribute without a value is an error", false, `{"body":"a","message_attributes":{"p":{"data_type":"String"}}}`,
			0, `preloading memory queue q: in.jsonl:1: message attribute "p" of type String needs a string value`},
		{"bad base64 is an error", false, `{"body":"a","message_attributes":{"p":{"data_type":"Binary","binary_value":"%%"}}}`,
			0, `preloading memory queue q: in.jsonl:1: message attribute "p": binary_value is not base64: illegal base64 data at input byte 0`},
		{"every bad line is reported and nothing is sent", false, "{\"x\":1}\n{\"body\":\"good\"}\n[]",
			0, "preloading memory queue q: in.jsonl:1: unknown key \"x\" (known: body, message_attributes, group_id, deduplication_id; in attributes: data_type, string_value, binary_value)\n" +
				"in.jsonl:3: the line must be a JSON object, not array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, _ := memory.NewBroker().Queue("q", memory.Options{FIFO: tt.fifo})
			n, err := q.PreloadReader(t.Context(), "in.jsonl", strings.NewReader(tt.input))
			var text string
			if err != nil {
				text = err.Error()
			}
			if n != tt.want || text != tt.err {
				t.Fatalf("PreloadReader = %d, %q\nwant %d, %q", n, text, tt.want, tt.err)
			}
			if s := q.Stats(); int(s.Sent) != tt.want {
				t.Errorf("sent %d, want %d", s.Sent, tt.want)
			}
		})
	}
}

// A quickstart preloads a queue whose failing messages end in a
// dead-letter queue after two receives.
func ExampleQueue_PreloadReader() {
	ctx := context.Background()
	b := memory.NewBroker()
	q, _ := b.Queue("orders", memory.Options{MaxReceiveCount: 2, DeadLetterQueue: "orders-dlq"})
	n, err := q.PreloadReader(ctx, "orders.jsonl", strings.NewReader(`{"body": {"order": 1}}
{"body": {"order": 2}}`))
	fmt.Println(n, err)
	msgs, _ := q.Receive(ctx, 10)
	for _, m := range msgs {
		fmt.Println(m.Body, m.Attributes["ApproximateReceiveCount"])
	}
	fmt.Printf("%+v\n", q.Stats())
	// Output:
	// 2 <nil>
	// {"order":1} 1
	// {"order":2} 1
	// {Visible:0 InFlight:2 Delayed:0 Sent:2 Received:2 Deleted:0 DeadLettered:0}
}

// A message that keeps failing is dead-lettered once it was received
// MaxReceiveCount times; here each failure releases it at once.
func ExampleBroker() {
	ctx := context.Background()
	b := memory.NewBroker()
	q, _ := b.Queue("orders", memory.Options{MaxReceiveCount: 2, DeadLetterQueue: "orders-dlq"})
	q.Send(ctx, memory.SendInput{Body: `{"order":7}`})
	for {
		msgs, _ := q.Receive(ctx, 10)
		if len(msgs) == 0 {
			break
		}
		fmt.Println("failed", msgs[0].Body, "receive", msgs[0].Attributes["ApproximateReceiveCount"])
		q.ChangeVisibility(ctx, msgs, 0) // give it back at once
	}
	dlq, _ := b.Lookup("orders-dlq")
	for _, m := range dlq.Snapshot() {
		fmt.Println("dead-lettered", m.Body, "from", m.Attributes["DeadLetterQueueSourceArn"])
	}
	// Output:
	// failed {"order":7} receive 1
	// failed {"order":7} receive 2
	// dead-lettered {"order":7} from arn:pipes:memory:local:000000000000:orders
}
