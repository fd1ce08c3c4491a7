package template_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/template"
)

// Dynamic path parameters (SPEC §5.1, from eb-pipes-event-target):
// "the whole value must be a JSON path (no string interpolation),
// evaluated against the event before input transformation, same path
// syntax"; e.g. SQS target `MessageGroupId: "$.body.customer_id"`.
func TestParseParameterTakesBareJSONPathsAndPlaceholders(t *testing.T) {
	ev, err := pipe.NewEvent(&source.Message{MessageID: "m1", Body: `{"detail":{"accountId":"123"},"list":["a","b"]}`})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, param string
		constant    bool
		want        string
	}{
		{"a bare path is evaluated", "$.body.detail.accountId", false, "123"},
		{"a bare path with an index", "$.body.list[1]", false, "b"},
		{"the record itself", "$.messageId", false, "m1"},
		{"a missing path renders nothing", "$.body.nope", false, ""},
		{"a placeholder inside text", "acct-<$.body.detail.accountId>", false, "acct-123"},
		{"text that only starts with a dollar is a constant", "$5 off", true, ""},
		{"a dollar path inside text is not interpolated (AWS: the whole value)", "id $.body.x", true, ""},
		{"a plain constant", "orders", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := template.ParseParameter(tt.param)
			if err != nil {
				t.Fatalf("ParseParameter(%q): %v", tt.param, err)
			}
			if tt.constant {
				if tmpl != nil {
					t.Errorf("ParseParameter(%q) is a template, want a constant", tt.param)
				}
				return
			}
			if tmpl == nil {
				t.Fatalf("ParseParameter(%q) is a constant, want a template", tt.param)
			}
			out, err := tmpl.Render(ev, template.Vars{})
			if err != nil || string(out) != tt.want {
				t.Errorf("Render = %q, %v; want %q", out, err, tt.want)
			}
		})
	}
	if _, err := template.ParseParameter("$.body..x"); err == nil {
		t.Error("a bare path outside the supported subset is accepted")
	}
}

// A bare path's syntax error is located in the path as written (it is
// read as the placeholder <path>, one character longer at the start).
func TestABarePathsErrorIsWhereTheUserWroteIt(t *testing.T) {
	for _, tt := range []struct {
		param       string
		offset, col int
		msg         string
	}{
		{"$.body.", 7, 8, `invalid path "$.body."`},
		{"$.body..x", 7, 8, `invalid path "$.body..x"`},
		{"<$.body.>", 8, 9, `invalid path "<$.body.>"`}, // a placeholder is located as written too
	} {
		_, err := template.ParseParameter(tt.param)
		var se *template.SyntaxError
		if !errors.As(err, &se) {
			t.Fatalf("ParseParameter(%q) = %v, want a SyntaxError", tt.param, err)
		}
		if se.Offset != tt.offset || se.Column != tt.col || !strings.Contains(se.Msg, tt.msg) {
			t.Errorf("ParseParameter(%q): offset %d column %d %q; want offset %d column %d with %q", tt.param, se.Offset, se.Column, se.Msg, tt.offset, tt.col, tt.msg)
		}
	}
}
