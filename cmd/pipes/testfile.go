package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/pipe"
)

// testFile is a pipeline's test file (pipeline_test.yaml beside
// pipeline.yaml): cases of input events and what the pipe should make of
// them.
type testFile struct {
	// Pipe names the pipe the cases test when the pipeline file holds
	// several; a case may name another.
	Pipe  string     `yaml:"pipe"`
	Cases []testCase `yaml:"cases"`
}

// testCase is one event and its expected outcome.
type testCase struct {
	Name string `yaml:"name"`
	Pipe string `yaml:"pipe"`
	// Input is the message body: a string is the body as written, any
	// other value its JSON. Record is a whole Pipes SQS or RabbitMQ record
	// instead.
	Input  yaml.Node `yaml:"input"`
	Record yaml.Node `yaml:"record"`
	Expect struct {
		// Outcome is passed or filtered.
		Outcome string `yaml:"outcome"`
		// TargetInput is the expected target input as JSON (any value);
		// TargetInputText as text (the payload when it is not JSON, else
		// its compact JSON).
		TargetInput     yaml.Node `yaml:"target_input"`
		TargetInputText *string   `yaml:"target_input_text"`
		// Ignore lists dotted paths (order.received, items.0.id) left out
		// of both sides of the target_input comparison: values that change
		// on every run, like <aws.pipes.event.ingestion-time>.
		Ignore []string `yaml:"ignore"`
	} `yaml:"expect"`
	line int
}

// testFileFor is the test file of a pipeline file: NAME_test.yaml or
// NAME_test.yml beside NAME.yaml; "" when there is none.
func testFileFor(pipelineFile string) string {
	base := strings.TrimSuffix(pipelineFile, filepath.Ext(pipelineFile))
	for _, ext := range []string{".yaml", ".yml"} {
		if st, err := os.Stat(base + "_test" + ext); err == nil && !st.IsDir() {
			return base + "_test" + ext
		}
	}
	return ""
}

// parseTestFile decodes a test file strictly: unknown keys, a bad outcome
// or a case without input are errors naming the line.
func parseTestFile(name string, data []byte) (testFile, error) {
	var tf testFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&tf); err != nil {
		if errors.Is(err, io.EOF) {
			return tf, fmt.Errorf("%s: the test file holds no cases", name)
		}
		return tf, fmt.Errorf("%s: %w", name, err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err == nil && len(root.Content) > 0 {
		for i, n := range root.Content[0].Content {
			if n.Value == "cases" && i+1 < len(root.Content[0].Content) {
				for j, c := range root.Content[0].Content[i+1].Content {
					if j < len(tf.Cases) {
						tf.Cases[j].line = c.Line
					}
				}
			}
		}
	}
	if len(tf.Cases) == 0 {
		return tf, fmt.Errorf("%s: the test file holds no cases (cases: [...])", name)
	}
	var errs []error
	for i, c := range tf.Cases {
		at := fmt.Sprintf("%s:%d: cases[%d]", name, c.line, i)
		hasInput, hasRecord := c.Input.Kind != 0, c.Record.Kind != 0
		switch {
		case hasInput == hasRecord:
			errs = append(errs, fmt.Errorf("%s: give input (a message body) or record (a whole Pipes record)", at))
		case c.Expect.Outcome != "passed" && c.Expect.Outcome != "filtered":
			errs = append(errs, fmt.Errorf("%s: expect.outcome must be passed or filtered, got %q", at, c.Expect.Outcome))
		case c.Expect.Outcome == "filtered" && (c.Expect.TargetInput.Kind != 0 || c.Expect.TargetInputText != nil):
			errs = append(errs, fmt.Errorf("%s: a filtered event has no target input", at))
		case c.Expect.TargetInput.Kind != 0 && c.Expect.TargetInputText != nil:
			errs = append(errs, fmt.Errorf("%s: give target_input (JSON) or target_input_text, not both", at))
		}
		for _, n := range []*yaml.Node{&c.Input, &c.Record, &c.Expect.TargetInput} {
			if n.Kind != 0 {
				if _, err := nodeJSON(n); err != nil {
					errs = append(errs, fmt.Errorf("%s: line %d: %w", at, n.Line, err))
				}
			}
		}
	}
	return tf, errors.Join(errs...)
}

// nodeJSON is the JSON of a YAML value.
func nodeJSON(n *yaml.Node) ([]byte, error) {
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, err
	}
	v, err := jsonable(v)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// jsonable turns what yaml.v3 decodes into what encoding/json encodes.
func jsonable(v any) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			j, err := jsonable(x)
			if err != nil {
				return nil, err
			}
			v[k] = j
		}
		return v, nil
	case map[any]any:
		return nil, errors.New("mapping keys must be strings")
	case []any:
		for i, x := range v {
			j, err := jsonable(x)
			if err != nil {
				return nil, err
			}
			v[i] = j
		}
		return v, nil
	}
	return v, nil
}

// runTestFiles runs the cases of each pipeline file's test file; it
// returns how many passed and failed. Problems of the files themselves are
// usage errors.
func runTestFiles(ctx context.Context, pairs [][2]string, specs map[string][]config.Pipe, f testFlags, stdout io.Writer) error {
	passed, failed := 0, 0
	for _, pr := range pairs {
		file, tfName := pr[0], pr[1]
		data, err := os.ReadFile(tfName)
		if err != nil {
			return usageErr(fmt.Errorf("reading test file: %w", err))
		}
		tf, err := parseTestFile(tfName, data)
		if err != nil {
			return usageErr(err)
		}
		for i, c := range tf.Cases {
			name := c.Name
			if name == "" {
				name = fmt.Sprintf("cases[%d]", i)
			}
			pipeName := cmpOr(c.Pipe, tf.Pipe, f.pipe)
			spec, err := pickPipe(specs[file], pipeName)
			if err != nil {
				return usageErr(fmt.Errorf("%s:%d: %s: %w", tfName, c.line, name, err))
			}
			diff, err := runCase(ctx, spec, c, i, f.enrich)
			switch {
			case err != nil:
				failed++
				fmt.Fprintf(stdout, "FAIL %s:%d: %s\n    %v\n", tfName, c.line, name, err)
			case diff != "":
				failed++
				fmt.Fprintf(stdout, "FAIL %s:%d: %s\n%s", tfName, c.line, name, diff)
			default:
				passed++
				fmt.Fprintf(stdout, "ok   %s:%d: %s\n", tfName, c.line, name)
			}
		}
	}
	fmt.Fprintf(stdout, "%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return runtimeErr(fmt.Errorf("%d of %d test case(s) failed", failed, passed+failed))
	}
	return nil
}

func cmpOr(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// runCase runs one case and returns the diff of what came out against
// what was expected, "" when they agree.
func runCase(ctx context.Context, spec config.Pipe, c testCase, n int, withEnrich bool) (string, error) {
	flt, tr, err := pipes.Stages(spec)
	if err != nil {
		return "", err
	}
	var enr pipe.Enricher
	if withEnrich {
		if enr, err = pipes.Enricher(spec); err != nil {
			return "", err
		}
	}
	var msg *pipe.Message
	if c.Record.Kind != 0 {
		rec, _ := nodeJSON(&c.Record)
		msg, err = testMessage(spec, string(rec), true, n)
	} else {
		body := c.Input.Value
		if c.Input.Kind != yaml.ScalarNode || c.Input.ShortTag() != "!!str" {
			b, _ := nodeJSON(&c.Input)
			body = string(b)
		}
		msg, err = testMessage(spec, body, false, n)
	}
	if err != nil {
		return "", err
	}
	if u := spec.Source.Unwrap; u != "" && u != "none" {
		pipe.Unwrap(msg, u)
	}
	ok, got, err := evaluate(ctx, msg, flt, enr, tr)
	if err != nil {
		return "", errors.New(testSecrets(spec).Redact(err.Error()))
	}
	outcome := "filtered"
	if ok {
		outcome = "passed"
	}
	if outcome != c.Expect.Outcome {
		return fmt.Sprintf("    outcome: want %s, got %s\n", c.Expect.Outcome, outcome), nil
	}
	switch {
	case c.Expect.TargetInputText != nil:
		text := string(got)
		var s string
		if json.Unmarshal(got, &s) == nil {
			text = s
		}
		if text != *c.Expect.TargetInputText {
			return "    target_input_text:\n" + lineDiff(*c.Expect.TargetInputText, text), nil
		}
	case c.Expect.TargetInput.Kind != 0:
		wantJSON, _ := nodeJSON(&c.Expect.TargetInput)
		var want, have any
		_ = json.Unmarshal(wantJSON, &want)
		if err := json.Unmarshal(got, &have); err != nil {
			return "", fmt.Errorf("reading the target input: %w", err)
		}
		for _, p := range c.Expect.Ignore {
			want, have = dropPath(want, p), dropPath(have, p)
		}
		if !reflect.DeepEqual(want, have) {
			w, _ := json.MarshalIndent(want, "", "  ")
			h, _ := json.MarshalIndent(have, "", "  ")
			return "    target_input:\n" + lineDiff(string(w), string(h)), nil
		}
	}
	return "", nil
}

// dropPath removes the value at a dotted path (keys, or indexes of
// arrays) from v.
func dropPath(v any, path string) any {
	head, rest, more := strings.Cut(path, ".")
	switch x := v.(type) {
	case map[string]any:
		if !more {
			delete(x, head)
		} else if c, ok := x[head]; ok {
			x[head] = dropPath(c, rest)
		}
	case []any:
		var i int
		if _, err := fmt.Sscanf(head, "%d", &i); err == nil && i >= 0 && i < len(x) {
			if !more {
				x[i] = nil
			} else {
				x[i] = dropPath(x[i], rest)
			}
		}
	}
	return v
}

// lineDiff shows want against got line by line: "-" lines only in want,
// "+" lines only in got, indented; a longest common subsequence keeps the
// shared lines in place.
func lineDiff(want, got string) string {
	a, b := strings.Split(want, "\n"), strings.Split(got, "\n")
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			fmt.Fprintf(&out, "       %s\n", a[i])
			i++
			j++
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			fmt.Fprintf(&out, "     - %s\n", a[i])
			i++
		default:
			fmt.Fprintf(&out, "     + %s\n", b[j])
			j++
		}
	}
	return "     (- want, + got)\n" + out.String()
}
