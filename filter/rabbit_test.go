package filter

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

// rabbitEvent is an event of a Pipes RabbitMQ record (SPEC.md §2.2) whose
// body is body.
func rabbitEvent(t *testing.T, body string) *pipe.Event {
	t.Helper()
	rec := map[string]any{
		"messageId": "m-1", "eventSource": "aws:rmq", "eventSourceArn": "arn:pipes:rabbitmq:localhost", "eventSourceKey": "orders::/",
		"basicProperties": map[string]any{"contentType": "application/json", "headers": map[string]any{"tries": 2}, "priority": nil},
		"redelivered":     true, "data": []byte(body),
	}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	var m source.Message
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return &pipe.Event{Message: &m}
}

func TestFiltersSeeARabbitMQRecordWithItsDataDecoded(t *testing.T) {
	tests := []struct {
		name, kind, src, body string
		want                  bool
	}{
		{"a pattern on data's JSON", "pattern", `{"data":{"kind":["x"]}}`, `{"kind":"x"}`, true},
		{"a pattern on data's JSON that does not match", "pattern", `{"data":{"kind":["y"]}}`, `{"kind":"x"}`, false},
		{"a pattern on basic properties", "pattern", `{"basicProperties":{"contentType":["application/json"],"headers":{"tries":[{"numeric":[">",1]}]}}}`, `{}`, true},
		{"a pattern on redelivered", "pattern", `{"redelivered":[true]}`, `{}`, true},
		{"the poller's fields are not filterable", "pattern", `{"eventSourceKey":["orders::/"]}`, `{}`, false},
		{"a body that is not JSON is its base64 text", "pattern", `{"data":["cGxhaW4="]}`, `plain`, true},
		{"jq sees data decoded", "jq", `.data.kind == "x" and .basicProperties.contentType == "application/json"`, `{"kind":"x"}`, true},
		{"expr sees data decoded", "expr", `data.kind == "x" && redelivered && eventSourceKey == "orders::/"`, `{"kind":"x"}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f pipe.Filter
			var err error
			switch tt.kind {
			case "pattern":
				f, err = CompilePatterns([]string{tt.src})
			case "jq":
				f, err = CompileJQ(tt.src)
			case "expr":
				f, err = CompileExpr(tt.src)
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.Match(context.Background(), rabbitEvent(t, tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("match = %v, want %v", got, tt.want)
			}
		})
	}
}
