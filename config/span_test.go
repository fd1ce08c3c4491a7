package config

import (
	"strings"
	"testing"
)

// Each character of a filter's jq program, however the YAML writes it, is
// found at its own line and column of the file.
func TestSpanFindsEachCharacterOfAValueInTheFile(t *testing.T) {
	tests := []struct {
		name, jq string // jq: the value as written after "  jq: "
		// find is a character of the program; want its line:col in the
		// file (the jq key is on line 4).
		find string
		want string
	}{
		{"plain", `.a | .b`, "|", "4:10"},
		{"plain, not ASCII", `.é | .b`, "|", "4:10"},
		{"single-quoted", `'.a | .b'`, "|", "4:11"},
		{"single-quoted with ''", `'.a == ''x'' | .b'`, "|", "4:20"},
		{"double-quoted", `".a | .b"`, "|", "4:11"},
		{"double-quoted with escapes", `".a == \"x\" | .b"`, "|", "4:20"},
		{"double-quoted with \\u", `".a == \"\u00e9\" | .b"`, "|", "4:25"},
		{"double-quoted over two lines", "\".a |\n    .b ]\"", "]", "5:8"},
		{"literal block", "|\n    .a\n    | .b\n    | ]", "]", "7:7"},
		{"literal block, kept and indented", "|+\n    .a\n\n      | .b ]\n", "]", "7:12"},
		{"literal block with an indentation indicator", "|2\n      .a\n    | .b ]", "]", "6:10"},
		{"folded block", ">-\n    .a\n    | .b\n\n    | ]", "]", "8:7"},
		{"plain over lines", ".a\n    | .b\n    | ]", "]", "6:7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := "name: a\nsource: {type: memory}\nfilter:\n  jq: " + tt.jq + "\ntarget: {type: stdout}\n"
			ps, err := Loader{}.Parse("p.yaml", []byte(doc))
			if err != nil {
				t.Fatalf("%v\n%s", err, doc)
			}
			f := ps[0].Filter
			off := strings.Index(f.JQ, tt.find)
			if off < 0 {
				t.Fatalf("%q not in the program %q", tt.find, f.JQ)
			}
			if got := f.JQSpan.At(off); got.String() != "p.yaml:"+tt.want {
				t.Errorf("%q of %q is at %s, want p.yaml:%s (runs %+v)\n%s", tt.find, f.JQ, got, tt.want, f.JQSpan.Runs, doc)
			}
			if f.JQPos != f.JQSpan.Start || f.JQPos.Line != 4 {
				t.Errorf("JQPos %s, JQSpan.Start %s: want the value's own start, on line 4", f.JQPos, f.JQSpan.Start)
			}
		})
	}
}

// A value made with ${VAR} cannot be followed character by character: its
// start stands for all of it.
func TestSpanOfAnInterpolatedValueIsItsStart(t *testing.T) {
	doc := "name: a\nsource: {type: memory}\nfilter:\n  jq: |\n    .a == \"${V}\" | ]\ntarget: {type: stdout}\n"
	ps, err := Loader{LookupEnv: func(string) (string, bool) { return "longer value", true }}.Parse("p.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	sp := ps[0].Filter.JQSpan
	if got := sp.At(strings.Index(ps[0].Filter.JQ, "]")); got.String() != "p.yaml:4:7" || sp.Runs != nil {
		t.Errorf("At = %s (runs %+v), want p.yaml:4:7, the value's start", got, sp.Runs)
	}
}

func FuzzSpan(f *testing.F) {
	for _, s := range []string{`.a | .b`, `'.a ''|'`, `".a\t\"\u00e9\x41 \
 |"`, "|\n    .a\n    | .b", ">\n  a\n\n   b\n  c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, jq string) {
		doc := "name: a\nsource: {type: memory}\nfilter:\n  jq: " + jq + "\ntarget: {type: stdout}\n"
		ps, err := Loader{}.Parse("p.yaml", []byte(doc))
		if err != nil || ps[0].Filter == nil {
			return
		}
		sp := ps[0].Filter.JQSpan
		if sp.Start.Line == 0 {
			return // no jq key
		}
		lines := strings.Split(doc, "\n")
		for off := range len(ps[0].Filter.JQ) + 1 {
			p := sp.At(off)
			if p.Line < 1 || p.Line > len(lines) || p.Column < 1 {
				t.Fatalf("offset %d of %q at %s: outside the file", off, ps[0].Filter.JQ, p)
			}
		}
		// Every character the runs place is the file's character there.
		for _, r := range sp.Runs {
			want := []rune(ps[0].Filter.JQ[r.Offset:])[0]
			line := []rune(lines[r.Line-1])
			if r.Column > len(line) {
				t.Fatalf("run %+v past the end of line %q", r, lines[r.Line-1])
			}
			if got := line[r.Column-1]; got != want && got != '\\' {
				t.Fatalf("run %+v: the file has %q there, the value %q", r, got, want)
			}
		}
	})
}
