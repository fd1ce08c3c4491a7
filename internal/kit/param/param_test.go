package param

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/template"
)

func TestParamsAreConstantsUnlessTheyHoldPlaceholdersOrAreAPath(t *testing.T) {
	ev, err := pipe.NewEvent(&source.Message{MessageID: "m1", Body: `{"c":"ada"}`})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, src, want string
		wantTemplate    bool
		wantSet         bool
	}{
		{"an empty string is an unset constant", "", "", false, false},
		{"a plain string is a constant", "orders", "orders", false, true},
		{"a string with braces is a constant", "{x}", "{x}", false, true},
		{"a Pipes dynamic path is evaluated", "$.body.c", "ada", true, true},
		{"the whole record is a path", "$", "", true, true},
		{"placeholders are rendered", "g-<$.body.c>-<aws.pipes.pipe-name>", "g-ada-p", true, true},
		{"a path that matches nothing renders empty", "$.body.missing", "", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse("x", tt.src)
			if err != nil {
				t.Fatal(err)
			}
			if (p.Template() != nil) != tt.wantTemplate || p.Set() != tt.wantSet {
				t.Errorf("template %t, set %t; want %t, %t", p.Template() != nil, p.Set(), tt.wantTemplate, tt.wantSet)
			}
			if tt.src != "$" {
				if got := p.Render(ev, template.Vars{PipeName: "p"}); got != tt.want {
					t.Errorf("Render = %q, want %q", got, tt.want)
				}
			}
			if !tt.wantTemplate && p.String() != tt.src {
				t.Errorf("String = %q, want %q", p.String(), tt.src)
			}
		})
	}
}

func TestParseNamesTheParameterInItsError(t *testing.T) {
	_, err := Parse("message group id", "<aws.pipes.nope>")
	if err == nil {
		t.Fatal("an unknown reserved variable parsed")
	}
	if got := err.Error(); len(got) < len(`message group id "<aws.pipes.nope>": `) || got[:len(`message group id "<aws.pipes.nope>": `)] != `message group id "<aws.pipes.nope>": ` {
		t.Errorf("error %q does not start with the parameter's name and value", got)
	}
}

func TestRenderOfANilEventIsEmpty(t *testing.T) {
	p, err := Parse("x", "$.body.c")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Render(nil, template.Vars{}); got != "" {
		t.Errorf("Render(nil) = %q, want empty", got)
	}
}

func TestRecordViewSeesTheRecordNotThePayload(t *testing.T) {
	ev, err := pipe.NewEvent(&source.Message{MessageID: "m1", Body: `{"c":"ada"}`})
	if err != nil {
		t.Fatal(err)
	}
	ev.RecordJSON = []byte(`{"c":"transformed"}`)
	p, err := Parse("x", "$.body.c")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Render(RecordView(ev), template.Vars{}); got != "ada" {
		t.Errorf("Render(RecordView) = %q, want the record's %q", got, "ada")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"orders", "$.body.c", "<$.body.c>-x", "$.", "<aws.pipes.nope>", "$[0]", "<$", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		p, err := Parse("x", src)
		switch {
		case err != nil && p.Set():
			t.Fatalf("Parse(%q) failed but gave a set parameter", src)
		case err == nil && p.Set() != (src != ""):
			t.Fatalf("Parse(%q).Set() = %t", src, p.Set())
		case err == nil && p.Template() == nil && p.Render(nil, template.Vars{}) != src:
			t.Fatalf("constant %q renders %q", src, p.Render(nil, template.Vars{}))
		}
	})
}

func TestMessageGroupRendersTheGroupAndTheDeduplicationID(t *testing.T) {
	ev, err := pipe.NewEvent(&source.Message{MessageID: "m1", Body: `{"c":"ada"}`})
	if err != nil {
		t.Fatal(err)
	}
	ev.RecordJSON = []byte(`{"c":"payload","long":"` + strings.Repeat("g", 129) + `","max":"` + strings.Repeat("g", 128) + `"}`)
	mustParse := func(s string) Param {
		p, err := Parse("x", s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name                 string
		mg                   MessageGroup
		wantGroup, wantDedup string
		wantErr              string
	}{
		{"nothing set renders nothing", MessageGroup{FIFO: true, Kind: "queue"}, "", "", ""},
		{"the payload is rendered by default", MessageGroup{Group: mustParse("$.c"), Dedup: mustParse("$.body.c")}, "payload", "", ""},
		{"the record is rendered when asked", MessageGroup{Group: mustParse("$.body.c"), Dedup: mustParse("<$.messageId>"), FromRecord: true}, "ada", "m1", ""},
		{"an empty group on a standard destination is none", MessageGroup{Group: mustParse("$.body.missing"), Kind: "topic"}, "", "", ""},
		{"an empty group on a FIFO destination fails", MessageGroup{Group: mustParse("$.body.missing"), FIFO: true, Kind: "topic"}, "", "",
			`message m1: the message group id "<$.body.missing>" rendered empty; a FIFO topic needs one`},
		{"a group of 128 characters is sent", MessageGroup{Group: mustParse("$.max"), FIFO: true, Kind: "queue"}, strings.Repeat("g", 128), "", ""},
		{"a group over 128 characters fails", MessageGroup{Group: mustParse("$.long"), FIFO: true, Kind: "queue"}, "", "",
			"message m1: the message group id rendered 129 characters long; a queue takes at most 128"},
		{"a deduplication id over 128 characters fails", MessageGroup{Group: mustParse("g"), Dedup: mustParse("$.long"), FIFO: true, Kind: "topic"}, "", "",
			"message m1: the message deduplication id rendered 129 characters long; a topic takes at most 128"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, d, err := tt.mg.Render(ev)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr || !core.IsPermanent(err) {
					t.Fatalf("Render error = %v, want permanent %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || g != tt.wantGroup || d != tt.wantDedup {
				t.Errorf("Render = %q, %q, %v; want %q, %q", g, d, err, tt.wantGroup, tt.wantDedup)
			}
		})
	}
}

func BenchmarkRenderAPath(b *testing.B) {
	p, err := Parse("x", "$.body.customer")
	if err != nil {
		b.Fatal(err)
	}
	ev, err := pipe.NewEvent(&source.Message{MessageID: "m1", Body: `{"customer":"ada"}`})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = p.Render(ev, template.Vars{})
	}
}

func TestMessageGroupCheckRefusesConstantsSQSWouldRefuse(t *testing.T) {
	for _, tt := range []struct {
		group, dedup, wantErr string
	}{
		{"orders", "", ""},
		{strings.Repeat("g", 128), strings.Repeat("d", 128), ""},
		{strings.Repeat("g", 129), "", "the message group id is 129 characters long; SQS and SNS take at most 128"},
		{"g", strings.Repeat("d", 200), "the message deduplication id is 200 characters long; SQS and SNS take at most 128"},
		{"<$.body." + strings.Repeat("x", 200) + ">", "", ""}, // a template is judged per message
	} {
		g, err := Parse("group", tt.group)
		if err != nil {
			t.Fatal(err)
		}
		d, err := Parse("dedup", tt.dedup)
		if err != nil {
			t.Fatal(err)
		}
		err = MessageGroup{Group: g, Dedup: d}.Check()
		if got := fmt.Sprint(err); (tt.wantErr == "" && err != nil) || (tt.wantErr != "" && got != tt.wantErr) {
			t.Errorf("Check(%.20q, %.20q) = %v, want %q", tt.group, tt.dedup, err, tt.wantErr)
		}
	}
}
