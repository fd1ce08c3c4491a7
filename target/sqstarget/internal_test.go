package sqstarget

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pipesproject/pipes/internal/kit/awsbatch"
	"github.com/pipesproject/pipes/source"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/template"
)

func sizes(chunks [][]entry) [][]int {
	out := make([][]int, len(chunks))
	for i, c := range chunks {
		for _, e := range c {
			out[i] = append(out[i], e.Size)
		}
	}
	return out
}

func TestSplitKeepsCallsWithinTenEntriesAndTheByteLimit(t *testing.T) {
	const k = 1 << 10
	tests := []struct {
		name  string
		sizes []int
		want  string
	}{
		{"no entries make no calls", nil, "[]"},
		{"eleven small entries make calls of ten and one", []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, "[[1 1 1 1 1 1 1 1 1 1] [1]]"},
		{"entries past the byte limit start a new call", []int{200 * k, 56 * k, 1}, fmt.Sprintf("[[%d %d] [1]]", 200*k, 56*k)},
		{"an entry larger than the limit goes alone", []int{1, 300 * k, 1}, fmt.Sprintf("[[1] [%d] [1]]", 300*k)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var es []entry
			for i, s := range tt.sizes {
				es = append(es, entry{Ev: i, Size: s})
			}
			got := sizes(awsbatch.Split(es, limits))
			if got == nil {
				got = [][]int{}
			}
			if fmt.Sprint(got) != tt.want {
				t.Errorf("split = %v, want %s", got, tt.want)
			}
		})
	}
}

func TestParamsAreConstantsUnlessTheyHoldPlaceholdersOrAreAPath(t *testing.T) {
	ev, err := pipe.NewEvent(&source.Message{MessageID: "m1", Body: `{"c":"ada"}`})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, src, want string }{
		{"a plain string is a constant", "orders", "orders"},
		{"a string with braces is a constant", "{x}", "{x}"},
		{"a Pipes dynamic path is evaluated", "$.body.c", "ada"},
		{"placeholders are rendered", "g-<$.body.c>-<aws.pipes.pipe-name>", "g-ada-p"},
		{"a path that matches nothing renders empty", "$.body.missing", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := parseParam("x", tt.src)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.render(ev, template.Vars{PipeName: "p"}); got != tt.want {
				t.Errorf("render = %q, want %q", got, tt.want)
			}
		})
	}
}

func FuzzParseParam(f *testing.F) {
	for _, s := range []string{"orders", "$.body.c", "<$.body.c>-x", "$.", "<aws.pipes.nope>", "$[0]", "<$"} {
		f.Add(s)
	}
	ev, err := pipe.NewEvent(&source.Message{MessageID: "m1", Body: `{"c":"ada","n":[1,2]}`})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src string) {
		p, err := parseParam("x", src)
		if err != nil {
			return
		}
		got := p.render(ev, template.Vars{})
		if p.tmpl == nil && got != src {
			t.Fatalf("constant %q rendered %q", src, got)
		}
	})
}

func BenchmarkEntryWithAFIFOGroupTemplate(b *testing.B) {
	tg, err := newTarget(Config{QueueURL: "http://h/1/q.fifo", MessageGroupID: "$.body.customer", MessageDeduplicationID: "<$.messageId>"})
	if err != nil {
		b.Fatal(err)
	}
	ev, err := pipe.NewEvent(&source.Message{MessageID: "m1", Body: `{"customer":"ada","note":"` + strings.Repeat("x", 900) + `"}`})
	if err != nil {
		b.Fatal(err)
	}
	ev.Attributes = map[string]source.MessageAttribute{"a": {DataType: "String", StringValue: &ev.Message.MessageID}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tg.entry(0, ev); err != nil {
			b.Fatal(err)
		}
	}
}
