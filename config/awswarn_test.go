package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lint writes a pipeline file and lints it.
func lint(t *testing.T, yml string) (Warnings, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(path, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	_, ws, err := Loader{LookupEnv: func(string) (string, bool) { return "", false }}.Lint(path)
	return ws, err
}

// The template warnings rest on AWS's caveat (SPEC §5.1, from
// eb-pipes-input-transformation, "Implicit body data parsing"): "using bare
// <$.body> on a JSON body yields de-quoted, invalid JSON (e.g. {key:
// value}); wrap it, e.g. {"data": <$.body>}", and on its quoting note: "do
// not put quotes around variables that refer to JSON objects or arrays".
// The filter warnings on Pipes' filtering docs (SPEC §4.4): the metadata
// fields awsRegion, eventSource and eventSourceARN are not seen by filters.
func TestLintWarnsWhereAWSBehaviourSurprises(t *testing.T) {
	tests := []struct {
		name     string
		target   string
		extra    string
		want     string // "" for no warning
		wantPath string
	}{
		{"a bare <$.body>: pipes forwards the body, no warning", `input_template: "<$.body>"`, "", "", ""},
		{"the whole record alone: no warning", `input_template: "<$>"`, "", "", ""},
		{"the body inside a JSON string", `input_template: '{"data": "<$.body>"}'`, "", `"<$.body>" is inside a JSON string`, "target.input_template"},
		{"a wildcard inside a JSON string", `input_template: '{"ids": "<$.body.items[*].id>"}'`, "", `"<$.body.items[*].id>" is inside a JSON string`, "target.input_template"},
		{"the body in free text", `input_template: "got <$.body> today"`, "", `<$.body> in free text`, "target.input_template"},
		{"the real-JSON form", `input_template: '{"data": <$.body>}'`, "", "", ""},
		{"a scalar path alone", `input_template: "<$.body.id>"`, "", "", ""},
		{"a scalar path in a string", `input_template: '{"id": "<$.body.id>"}'`, "", "", ""},
		{"an enrichment template", "", "enrichment: {type: http, url: 'http://127.0.0.1:1/x', input_template: 'got <$.body>'}\n", `<$.body> in free text`, "enrichment.input_template"},
		{"a filter on awsRegion", "", "filter: {patterns: [{awsRegion: [us-east-1]}]}\n", "never lets a filter see awsRegion", "filter.patterns[0].awsRegion"},
		{"a filter on eventSourceARN in JSON text", "", "filter:\n  patterns:\n    - '{\"body\": {\"a\": [1]}}'\n    - '{\"eventSourceARN\": [{\"prefix\": \"arn:\"}]}'\n", "never lets a filter see eventSourceARN", "filter.patterns[1].eventSourceARN"},
		{"a filter on the body", "", "filter: {patterns: [{body: {awsRegion: [x]}}]}\n", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			yml := "name: p\nsource: {type: memory}\n" + tt.extra + "target:\n  type: stdout\n"
			if tt.target != "" {
				yml += "  " + tt.target + "\n"
			}
			ws, err := lint(t, yml)
			if err != nil {
				t.Fatalf("Lint: %v", err)
			}
			if tt.want == "" {
				if len(ws) > 0 {
					t.Errorf("warnings %v, want none", ws)
				}
				return
			}
			if len(ws) != 1 {
				t.Fatalf("warnings %v, want one", ws)
			}
			if !strings.Contains(ws[0].Msg, tt.want) || ws[0].Field != tt.wantPath {
				t.Errorf("warning %s, want field %s and %q", ws[0], tt.wantPath, tt.want)
			}
		})
	}
}

// PipeTargetEventBridgeEventBusParameters: DetailType and Source are
// "Required: No"; without them Pipes' defaults apply (issue 14).
func TestAnEventBridgeTargetNeedsNoSourceOrDetailType(t *testing.T) {
	ws, err := lint(t, "name: p\nsource: {type: memory}\ntarget: {type: eventbridge, resources: [arn:aws:s3:::b, $.body.arn], time: $.body.at, endpoint_id: abcde.veo}\n")
	if err != nil || len(ws) > 0 {
		t.Fatalf("Lint = %v, %v; want a valid file", ws, err)
	}
	_, err = lint(t, "name: p\nsource: {type: memory}\ntarget: {type: eventbridge, resources: [a, b, c, d, e, f, g, h, i, j, k]}\n")
	if err == nil || !strings.Contains(err.Error(), "at most 10") {
		t.Errorf("11 resources: %v, want an error", err)
	}
	_, err = lint(t, "name: p\nsource: {type: memory}\ntarget: {type: sqs, queue_url: 'http://h/1/q', resources: [a]}\n")
	if err == nil || !strings.Contains(err.Error(), "only for eventbridge targets") {
		t.Errorf("resources on sqs: %v, want an error", err)
	}
}

// FuzzLintTemplate: the template scan never panics and every warning it
// gives names the field and quotes a placeholder of the template.
func FuzzLintTemplate(f *testing.F) {
	for _, s := range []string{`<$.body>`, `{"a": "<$.body>"}`, `x <$> y`, `{"a": "\"<$.data>"}`, `<$.body`, `<aws.pipes.event>`, `["<$.body[*]>"]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		d := &decoder{file: "f.yaml"}
		d.lintTemplate(Pos{File: "f.yaml", Line: 1}, "target.input_template", src)
		for _, w := range d.warns {
			if w.Field != "target.input_template" || !strings.Contains(w.Msg, "<") {
				t.Fatalf("warning %s for %q", w, src)
			}
		}
	})
}
