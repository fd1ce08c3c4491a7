package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
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

// The keys of a test file, of a case and of a case's expect block.
var (
	testFileKeys   = []string{"pipe", "cases"}
	testCaseKeys   = []string{"name", "pipe", "input", "record", "expect"}
	testExpectKeys = []string{"outcome", "target_input", "target_input_text", "ignore"}
)

// parseTestFile decodes a test file strictly. Its problems are
// config.Errors, worded and located as pipes validate words them
// (file:line:col: cases[2].expect.outcom: unknown key; did you mean
// outcome?): unknown keys, values of the wrong kind, a bad outcome, a case
// without input.
func parseTestFile(name string, data []byte) (testFile, error) {
	var tf testFile
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return tf, yamlErrors(name, err)
	}
	if len(root.Content) == 0 || root.Content[0].Tag == "!!null" {
		return tf, config.Errors{{Pos: config.Pos{File: name}, Msg: "the test file holds no cases (cases: [...])"}}
	}
	pos := func(n *yaml.Node) config.Pos { return config.Pos{File: name, Line: n.Line, Column: n.Column} }
	var errs config.Errors
	// mapping checks that n is a mapping of known keys, reporting every
	// other key, and returns its values by key (nil when n is not one).
	mapping := func(n *yaml.Node, field string, known []string) map[string]*yaml.Node {
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		if n.Kind != yaml.MappingNode {
			errs = append(errs, &config.Error{Pos: pos(n), Field: field, Msg: "must be a mapping of " + strings.Join(known, ", ")})
			return nil
		}
		vals := map[string]*yaml.Node{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			f := k.Value
			if field != "" {
				f = field + "." + k.Value
			}
			if !slices.Contains(known, k.Value) {
				errs = append(errs, config.UnknownKey(pos(k), f, k.Value, known))
				continue
			}
			vals[k.Value] = n.Content[i+1]
		}
		return vals
	}
	top := mapping(root.Content[0], "", testFileKeys)
	type caseNodes struct{ node, expect, outcome *yaml.Node }
	var cases []caseNodes
	if list := top["cases"]; list != nil {
		if list.Kind != yaml.SequenceNode {
			errs = append(errs, &config.Error{Pos: pos(list), Field: "cases", Msg: "must be a list of cases"})
		} else {
			for i, c := range list.Content {
				field := fmt.Sprintf("cases[%d]", i)
				cn := caseNodes{node: c}
				if vals := mapping(c, field, testCaseKeys); vals != nil && vals["expect"] != nil {
					cn.expect = vals["expect"]
					if ev := mapping(cn.expect, field+".expect", testExpectKeys); ev != nil {
						cn.outcome = ev["outcome"]
					}
				}
				cases = append(cases, cn)
			}
		}
	}
	if len(errs) > 0 {
		sortErrors(errs)
		return tf, errs
	}
	if err := root.Decode(&tf); err != nil {
		return tf, yamlErrors(name, err)
	}
	if len(tf.Cases) == 0 {
		return tf, config.Errors{{Pos: pos(root.Content[0]), Field: "cases", Msg: "the test file holds no cases (cases: [...])"}}
	}
	for i := range tf.Cases {
		c, cn := &tf.Cases[i], cases[i]
		c.line = cn.node.Line
		field := fmt.Sprintf("cases[%d]", i)
		at, outcomeAt := pos(cn.node), pos(cn.node)
		if cn.expect != nil {
			outcomeAt = pos(cn.expect)
		}
		if cn.outcome != nil {
			outcomeAt = pos(cn.outcome)
		}
		hasInput, hasRecord := c.Input.Kind != 0, c.Record.Kind != 0
		switch {
		case hasInput == hasRecord:
			errs = append(errs, &config.Error{Pos: at, Field: field, Msg: "give input (a message body) or record (a whole Pipes record)"})
		case c.Expect.Outcome != "passed" && c.Expect.Outcome != "filtered":
			errs = append(errs, &config.Error{Pos: outcomeAt, Field: field + ".expect.outcome", Msg: fmt.Sprintf("must be passed or filtered, got %q", c.Expect.Outcome)})
		case c.Expect.Outcome == "filtered" && (c.Expect.TargetInput.Kind != 0 || c.Expect.TargetInputText != nil):
			errs = append(errs, &config.Error{Pos: outcomeAt, Field: field + ".expect", Msg: "a filtered event has no target input"})
		case c.Expect.TargetInput.Kind != 0 && c.Expect.TargetInputText != nil:
			errs = append(errs, &config.Error{Pos: pos(&c.Expect.TargetInput), Field: field + ".expect", Msg: "give target_input (JSON) or target_input_text, not both"})
		}
		for key, n := range map[string]*yaml.Node{"input": &c.Input, "record": &c.Record, "expect.target_input": &c.Expect.TargetInput} {
			if n.Kind != 0 {
				if _, err := nodeJSON(n); err != nil {
					errs = append(errs, &config.Error{Pos: pos(n), Field: field + "." + key, Msg: err.Error()})
				}
			}
		}
	}
	if len(errs) > 0 {
		sortErrors(errs)
		return tf, errs
	}
	return tf, nil
}

// yamlLine finds the "line N: " yaml.v3 starts its messages with.
var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): `)

// yamlErrors are a YAML syntax or type error of a test file as located
// problems: "t.yaml:3: cases[0].name: cannot unmarshal !!seq into string"
// becomes t.yaml:3: cannot unmarshal !!seq into string.
func yamlErrors(name string, err error) config.Errors {
	msgs := []string{err.Error()}
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msgs = te.Errors
	}
	var out config.Errors
	for _, msg := range msgs {
		e := &config.Error{Pos: config.Pos{File: name}, Msg: msg}
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			e.Pos.Line, _ = strconv.Atoi(m[1])
			e.Msg = msg[len(m[0]):]
		}
		out = append(out, e)
	}
	return out
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
	// The summary, once: a failure exits 1 without repeating it on stderr.
	fmt.Fprintf(stdout, "%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return runtimeErr(errors.New(""))
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
		if enr, err = pipes.EnricherWith(ctx, spec, nil); err != nil {
			return "", err
		}
	}
	var msg *source.Message
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
		source.Unwrap(msg, u)
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
