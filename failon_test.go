package pipes

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

// fail_on, as the examples write it: the path form matches the record's
// field whatever the body's spacing ("poison": true with a space was missed
// by the text form); the text form still looks for text; a path form that
// is not one is a located error.
func TestFailOnMatchesAPathOrText(t *testing.T) {
	bodies := map[string]string{
		"spaced":  `{"order_id": "o-4", "poison": true}`,
		"compact": `{"order_id":"o-5","poison":true}`,
		"false":   `{"order_id": "o-6", "poison": false}`,
		"text":    `{"order_id": "o-7", "note": "poison"}`,
		"no JSON": `poison`,
	}
	tests := []struct {
		name, failOn string
		failed       []string
	}{
		{"the path form", `'$.body.poison == true'`, []string{"compact", "spaced"}},
		{"the path form on a string", `'$.body.note == "poison"'`, []string{"text"}},
		{"the path form without spaces", `$.body.poison==true`, []string{"compact", "spaced"}},
		{"the text form, as before", `'"poison":true'`, []string{"compact"}},
		{"the text form, any text", `poison`, []string{"compact", "false", "no JSON", "spaced", "text"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := "name: p\nsource: {type: memory}\ntarget:\n  type: stdout\n  fail_on: " + tt.failOn + "\n"
			specs, err := config.Loader{}.Parse("p.yaml", []byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			tg, err := newStdoutTarget(context.Background(), specs[0], &Env{Stdout: &out})
			if err != nil {
				t.Fatal(err)
			}
			var evs []*pipe.Event
			for id, body := range bodies {
				evs = append(evs, &pipe.Event{Message: &source.Message{MessageID: id, Body: body}, RecordJSON: []byte(body)})
			}
			r, err := tg.Deliver(context.Background(), evs)
			if err != nil {
				t.Fatal(err)
			}
			var failed []string
			for _, f := range r.Failures {
				failed = append(failed, f.ID)
			}
			slices.Sort(failed)
			if !slices.Equal(failed, tt.failed) {
				t.Errorf("fail_on %s failed %q, want %q", tt.failOn, failed, tt.failed)
			}
		})
	}
	for _, bad := range []struct{ failOn, want string }{
		{`'$.body.poison == maybe'`, `p.yaml:5:12: target.fail_on: "maybe" after == is not JSON`},
		{`'$.body..poison == true'`, `p.yaml:5:12: target.fail_on: path "$.body..poison": want field names joined by dots`},
		{`'$.body == {"a": 1}'`, `p.yaml:5:12: target.fail_on: {"a": 1} after == is an object or array`},
	} {
		doc := "name: p\nsource: {type: memory}\ntarget:\n  type: stdout\n  fail_on: " + bad.failOn + "\n"
		if _, err := (config.Loader{}).Parse("p.yaml", []byte(doc)); err == nil || !strings.HasPrefix(err.Error(), bad.want) {
			t.Errorf("fail_on %s: error %v, want %s…", bad.failOn, err, bad.want)
		}
	}
}
