package template

import (
	"encoding/json"
	"testing"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

func TestTemplatesReadARabbitMQRecord(t *testing.T) {
	const rec = `{"messageId":"m-1","eventSource":"aws:rmq","eventSourceArn":"arn:pipes:rabbitmq:localhost","eventSourceKey":"orders::/",` +
		`"basicProperties":{"contentType":"application/json","headers":{"tries":2},"priority":null},"redelivered":false,"data":"eyJraW5kIjoieCIsIm4iOjF9"}`
	var m source.Message
	if err := json.Unmarshal([]byte(rec), &m); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, template, want string }{
		{"a path into data's JSON", `{"kind": <$.data.kind>, "n": <$.data.n>}`, `{"kind": "x", "n": 1}`},
		{"a path into basic properties", `<$.basicProperties.contentType> from <$.eventSourceKey>`, `application/json from orders::/`},
		{"the whole data", `{"d": <$.data>}`, `{"d": {"kind":"x","n":1}}`},
		{"the message id", `<$.messageId>`, `m-1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := Parse(tt.template)
			if err != nil {
				t.Fatal(err)
			}
			ev, err := pipe.NewEvent(&m)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl.Render(ev, Vars{})
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("rendered %s, want %s", got, tt.want)
			}
		})
	}
	whole, _ := Parse(`<$>`)
	ev, _ := pipe.NewEvent(&m)
	got, err := whole.Render(ev, Vars{})
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(got, &v); err != nil {
		t.Fatalf("<$> rendered %s: %v", got, err)
	}
	if d, _ := v["data"].(map[string]any); d["kind"] != "x" {
		t.Fatalf("<$> rendered %s, want data decoded", got)
	}
}
