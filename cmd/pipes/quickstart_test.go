package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/pipesproject/pipes/internal/sqstest"
)

// The quickstart's own data is a preload file; pipes test reads it as the
// memory source does, whether --input names it or is left out, so each
// order is one record with the order as its body, not wrapped twice.
func TestPipesTestReadsTheQuickstartPreloadFileAsTheMemorySourceDoes(t *testing.T) {
	const file = "../../examples/quickstart/pipeline.yaml"
	for _, args := range [][]string{
		{"test", "-f", file},
		{"test", "-f", file, "--input", "../../examples/quickstart/orders.jsonl"},
		{"test", "-f", file, "--preload", "--input", "-"},
	} {
		t.Run(strings.Join(args[3:], " "), func(t *testing.T) {
			var code int
			var stdout, stderr string
			if args[len(args)-1] == "-" {
				data, err := os.ReadFile("../../examples/quickstart/orders.jsonl")
				if err != nil {
					t.Fatal(err)
				}
				code, stdout, stderr = runCLIWithInput(t, string(data), args...)
			} else {
				code, stdout, stderr = runCLI(t, args...)
			}
			if code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr)
			}
			lines := strings.Split(strings.TrimSpace(stdout), "\n")
			if len(lines) != 13 {
				t.Fatalf("%d results, want the 13 orders:\n%s", len(lines), stdout)
			}
			var res struct {
				Passed      bool `json:"passed"`
				TargetInput struct {
					Body string `json:"body"`
				} `json:"target_input"`
			}
			if err := json.Unmarshal([]byte(lines[0]), &res); err != nil || !res.Passed || !strings.HasPrefix(res.TargetInput.Body, `{"order_id":"o-001"`) {
				t.Errorf("first result %s, want the record of order o-001 with the order as its body", lines[0])
			}
		})
	}
	code, _, stderr := runCLI(t, "test", "-f", file, "--preload", "--records")
	if code != 2 || !strings.Contains(stderr, "--preload and --records") {
		t.Errorf("--preload --records: exit %d, stderr:\n%s", code, stderr)
	}
}

// The README's "Run it against a local SQS-compatible server", command by
// command, on the test's local-aws-sqs (the example's port and queue name
// swapped for the test server's and a unique one). Relies on local-aws-sqs's
// CreateQueue with a RedrivePolicy and its redrive after maxReceiveCount
// receives (no heartbeat runs: the stdout target answers at once, so no
// ChangeMessageVisibility spends a receive).
func TestTheLocalSQSQuickstartRunsAsTheReadmeSays(t *testing.T) {
	sqsTestEnv(t)
	endpoint := sqstest.Endpoint(t)
	client := sqstest.Client(t)
	name := sqstest.QueueName(t.Name(), "")
	deleteQueueAtEnd(t, client, name)
	deleteQueueAtEnd(t, client, name+"-dlq")
	data, err := os.ReadFile("../../examples/quickstart/local-sqs/pipeline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	content := strings.ReplaceAll(string(data), "http://127.0.0.1:9324", endpoint)
	content = strings.ReplaceAll(content, "/123456789012/orders", "/123456789012/"+name)
	file := writeFile(t, "pipeline.yaml", content)
	const events = "../../examples/quickstart/local-sqs/orders.jsonl"

	code, _, stderr := runCLI(t, "send", "--create", "--max-receive-count", "3", "-f", file, "--input", events)
	if code != 0 || !strings.Contains(stderr, "sent 13 of 13") {
		t.Fatalf("send: exit %d, stderr:\n%s", code, stderr)
	}
	code, stdout, stderr := runCLI(t, "run", "--drain", "--metrics-addr", "", "-f", file)
	if code != 0 {
		t.Fatalf("run: exit %d, stderr:\n%s", code, stderr)
	}
	if n := strings.Count(stdout, `"eventSource":"aws:sqs"`); n != 11 {
		t.Errorf("run printed %d records, want the 11 good orders:\n%s", n, stdout)
	}
	code, stdout, stderr = runCLI(t, "dlq", "inspect", "-f", file)
	if code != 0 || !strings.Contains(stderr, "2 visible") {
		t.Fatalf("dlq inspect: exit %d, stderr:\n%s", code, stderr)
	}
	for _, id := range []string{"o-004", "o-009"} {
		if !strings.Contains(stdout, id) {
			t.Errorf("dlq inspect lacks poison order %s:\n%s", id, stdout)
		}
	}
	// The same orders, one body per line, also work with pipes test.
	code, stdout, stderr = runCLI(t, "test", "-f", file, "--input", events)
	if code != 0 || strings.Count(stdout, `"passed":true`) != 13 {
		t.Errorf("test: exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// runCLIWithInput is runCLI with stdin.
func runCLIWithInput(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}
