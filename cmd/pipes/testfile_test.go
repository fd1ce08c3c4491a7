package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// offlinePipe needs variables for its source and target, set nowhere:
// pipes test must not.
const offlinePipe = `name: offline
source:
  type: sqs
  queue_url: ${PIPES_TEST_OFFLINE_QUEUE_URL}
  region: ${PIPES_TEST_OFFLINE_REGION}
filter:
  patterns:
    - '{"body": {"kind": ["order"]}}'
target:
  type: http
  url: ${PIPES_TEST_OFFLINE_URL}
  headers:
    Authorization: Bearer ${PIPES_TEST_OFFLINE_TOKEN}
  input_template: '{"id": "<$.body.id>", "n": <$.body.n>}'
`

func writeTestPair(t *testing.T, pipeline, cases string) string {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "pipeline.yaml")
	if err := os.WriteFile(file, []byte(pipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	if cases != "" {
		if err := os.WriteFile(filepath.Join(dir, "pipeline_test.yaml"), []byte(cases), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return file
}

func TestPipesTestRunsTheTestFileBesideThePipelineOffline(t *testing.T) {
	file := writeTestPair(t, offlinePipe, `cases:
  - name: an order passes
    input: {kind: order, id: a-1, n: 3}
    expect:
      outcome: passed
      target_input: {id: a-1, n: 3}
  - name: a refund is filtered
    input: {kind: refund, id: r-1}
    expect: {outcome: filtered}
  - name: a whole record
    record: {messageId: m-1, body: '{"kind":"order","id":"x","n":1}', attributes: {}, messageAttributes: {}, eventSource: "aws:sqs"}
    expect:
      outcome: passed
      target_input_text: '{"id": "x", "n": 1}'
`)
	code, stdout, stderr := runCLI(t, "test", "-f", file)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "3 passed, 0 failed") || strings.Count(stdout, "ok   ") != 3 {
		t.Errorf("stdout:\n%s", stdout)
	}
	// The folder form finds the same test file.
	if code, stdout, _ := runCLI(t, "test", "-f", filepath.Dir(file)+"/..."); code != 0 || !strings.Contains(stdout, "3 passed") {
		t.Errorf("-f FOLDER/...: exit %d\n%s", code, stdout)
	}
}

func TestPipesTestFailsWithADiffOnAMismatch(t *testing.T) {
	file := writeTestPair(t, offlinePipe, `cases:
  - name: wrong n
    input: {kind: order, id: a-1, n: 3}
    expect:
      outcome: passed
      target_input: {id: a-1, n: 4}
  - name: wrong outcome
    input: {kind: refund}
    expect: {outcome: passed}
  - name: right
    input: {kind: order, id: a-2, n: 1}
    expect: {outcome: passed}
`)
	code, stdout, stderr := runCLI(t, "test", "-f", file)
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"FAIL " + filepath.Join(filepath.Dir(file), "pipeline_test.yaml") + ":2: wrong n",
		`     -   "n": 4` + "\n" + `     +   "n": 3`, `         "id": "a-1",`,
		"wrong outcome\n    outcome: want passed, got filtered",
		"ok   ", "1 passed, 2 failed",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Count(stdout, "1 passed, 2 failed") != 1 || stderr != "" {
		t.Errorf("the summary is not printed once, on stdout alone:\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
}

func TestPipesTestNeedsTheVariablesOfWhatItRunsOnly(t *testing.T) {
	pipeline := strings.Replace(offlinePipe, `'{"body": {"kind": ["order"]}}'`, `'{"body": {"kind": ["${PIPES_TEST_OFFLINE_KIND}"]}}'`, 1)
	file := writeTestPair(t, pipeline, "")
	input := writeFile(t, "events.jsonl", `{"kind":"order","id":"a","n":1}`+"\n")
	code, _, stderr := runCLI(t, "test", "-f", file, "--input", input)
	if code != 2 || !strings.Contains(stderr, "filter.patterns") || !strings.Contains(stderr, "pipes test needs") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
	for _, v := range []string{"QUEUE_URL", "REGION", "_URL:", "TOKEN"} {
		if strings.Contains(stderr, "PIPES_TEST_OFFLINE_"+v) {
			t.Errorf("stderr asks for a source or target variable:\n%s", stderr)
		}
	}
	t.Setenv("PIPES_TEST_OFFLINE_KIND", "order")
	code, stdout, stderr := runCLI(t, "test", "-f", file, "--input", input)
	if code != 0 || !strings.Contains(stdout, `"passed":true`) {
		t.Errorf("with the filter's variable set: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

func TestParseTestFileRefusesBadCases(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"unknown key", "cases:\n  - input: x\n    expect: {outcome: passed}\n    colour: red\n", "t.yaml:4:5: cases[0].colour: unknown key; known keys: name, pipe, input, record, expect"},
		{"a typo in expect", "cases:\n  - input: x\n    expect: {outcome: passed}\n  - input: y\n    expect: {outcome: passed}\n  - input: z\n    expect:\n      outcom: passed\n", "t.yaml:8:7: cases[2].expect.outcom: unknown key; did you mean outcome?"},
		{"a typo at the top", "case:\n  - input: x\n", "t.yaml:1:1: case: unknown key; did you mean cases?"},
		{"a value of the wrong kind", "cases:\n  - name: [1]\n    input: x\n    expect: {outcome: passed}\n", "t.yaml:2: cannot unmarshal !!seq into string"},
		{"cases not a list", "cases: {input: x}\n", "t.yaml:1:8: cases: must be a list of cases"},
		{"no cases", "cases: []\n", "no cases"},
		{"empty", "", "no cases"},
		{"bad outcome", "cases:\n  - input: x\n    expect: {outcome: maybe}\n", "t.yaml:3:23: cases[0].expect.outcome: must be passed or filtered, got \"maybe\""},
		{"input and record", "cases:\n  - input: x\n    record: {}\n    expect: {outcome: passed}\n", "give input"},
		{"no input", "cases:\n  - expect: {outcome: passed}\n", "give input"},
		{"filtered with a target input", "cases:\n  - input: x\n    expect: {outcome: filtered, target_input: 1}\n", "no target input"},
		{"both expectations", "cases:\n  - input: x\n    expect: {outcome: passed, target_input: 1, target_input_text: '1'}\n", "not both"},
		{"non-string keys", "cases:\n  - input: {1: x}\n    expect: {outcome: passed}\n", "keys must be strings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseTestFile("t.yaml", []byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func FuzzParseTestFile(f *testing.F) {
	f.Add("cases:\n  - name: a\n    input: {kind: order}\n    expect: {outcome: passed, target_input: [1, {a: b}], ignore: [a.0]}\n")
	f.Add("pipe: p\ncases:\n  - record: {messageId: m, body: x}\n    expect: {outcome: filtered}\n")
	f.Fuzz(func(t *testing.T, in string) {
		tf, err := parseTestFile("t.yaml", []byte(in))
		if err != nil {
			return
		}
		for _, c := range tf.Cases {
			if c.Expect.Outcome != "passed" && c.Expect.Outcome != "filtered" {
				t.Fatalf("outcome %q accepted", c.Expect.Outcome)
			}
		}
	})
}

func TestLineDiffKeepsCommonLines(t *testing.T) {
	got := lineDiff("a\nb\nc", "a\nx\nc")
	want := "     (- want, + got)\n       a\n     - b\n     + x\n       c\n"
	if got != want {
		t.Errorf("lineDiff:\n%s\nwant:\n%s", got, want)
	}
}

// A typo in a test file reads like pipes validate's errors, with the file,
// line and column of the key and the key it was meant to be.
func TestATypoInATestFileIsLocatedAsValidateLocatesIt(t *testing.T) {
	file := writeTestPair(t, offlinePipe, `cases:
  - input: {kind: order, id: a-1, n: 3}
    expect: {outcome: passed}
  - input: {kind: refund}
    expect: {outcome: filtered}
  - input: {kind: order, id: a-2, n: 1}
    expect:
      outcom: passed
`)
	code, stdout, stderr := runCLI(t, "test", "-f", file)
	want := filepath.Join(filepath.Dir(file), "pipeline_test.yaml") + ":8:7: cases[2].expect.outcom: unknown key; did you mean outcome?\n"
	if code != 2 || stderr != want || stdout != "" {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant stderr:\n%s", code, stdout, stderr, want)
	}
}
