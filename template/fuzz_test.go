package template

import (
	"encoding/json"
	"testing"

	"github.com/pipesproject/pipes/pipe"
)

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`Hello, sender`, `<$.attributes.SenderId>`, `"Hello, <$.attributes.SenderId>"`,
		`{"key1": "value1", "key2": <$.body.key>, "d": <aws.pipes.event.ingestion-time>}`,
		`{"ids": <$.body.items[*].id>}`, `x <$.a`, `<$..a>`, `{"a": "\<$.x>"}`, `[1, <$.x>`, `<aws.pipes.nope>`,
	} {
		f.Add(s)
	}
	ev, err := pipe.NewEvent(sqsMessage(`{"key": "v", "items": [{"id": 1}]}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src string) {
		tp, err := Parse(src)
		if err != nil {
			return
		}
		out, err := tp.Render(ev, testVars())
		if err != nil {
			t.Fatalf("Render: %v", err)
		}
		if tp.Kind() == KindJSON && !json.Valid(out) {
			t.Fatalf("template %q gave invalid JSON %q", src, out)
		}
	})
}

func FuzzRender(f *testing.F) {
	for _, s := range [][2]string{
		{`{"data": <$.body>}`, `{"key": "value"}`},
		{`{"a": "<$.body.s> <$.body>"}`, `{"s": "q\"\n\u2028"}`},
		{`[<$.body.*>, <$.body[*]>, <$.body[0]>]`, `[1, "x", {"y": null}]`},
		{`<$.body>`, "not json \xff"},
		{`{"e": <aws.pipes.event.json>, "r": <aws.pipes.event>}`, `{"n": 1e400}`},
		{`"\u00<$.body.s>41"`, `{"s": "zz"}`},
		{`"<$.body.a.b>"`, `{"a": {"b": [true, false]}}`},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, src, body string) {
		tp, err := Parse(src)
		if err != nil {
			return
		}
		ev, err := pipe.NewEvent(sqsMessage(body))
		if err != nil {
			return
		}
		out, err := tp.Render(ev, testVars())
		if err != nil {
			return
		}
		if tp.Kind() == KindJSON && !json.Valid(out) {
			t.Fatalf("template %q over body %q gave invalid JSON %q", src, body, out)
		}
		// After an enrichment the payload is the body: the same must hold.
		ev.RecordJSON = []byte(body)
		out, err = tp.Render(ev, testVars())
		if err == nil && tp.Kind() == KindJSON && !json.Valid(out) {
			t.Fatalf("template %q over payload %q gave invalid JSON %q", src, body, out)
		}
	})
}
