package eventbridge

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

func FuzzIsJSONObject(f *testing.F) {
	for _, s := range []string{`{}`, ` {"a":1}`, `[]`, `"x"`, `{"a":`, ``, `{} {}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got := isJSONObject([]byte(p))
		var m map[string]any
		want := json.Unmarshal([]byte(p), &m) == nil && m != nil
		if got != want {
			t.Fatalf("isJSONObject(%q) = %t, want %t", p, got, want)
		}
	})
}

func BenchmarkEntryWithTemplatedSourceAndDetailType(b *testing.B) {
	tg, err := newTarget(Config{Source: "$.body.app", DetailType: "Order <$.body.kind>"})
	if err != nil {
		b.Fatal(err)
	}
	ev, err := pipe.NewEvent(&source.Message{MessageID: "m1", Body: `{"app":"shop","kind":"placed","note":"` + strings.Repeat("x", 900) + `"}`})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tg.entry(0, ev); err != nil {
			b.Fatal(err)
		}
	}
}
