package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/pipesproject/pipes/internal/sqstest"
)

func TestDLQInspectThenRedriveMovesTheDeadLettersBack(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDPIPESTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "pipes-test-secret")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	endpoint := sqstest.Endpoint(t)
	client := sqstest.Client(t)
	queueURL, dlqURL := sqstest.CreateQueue(t, client, sqstest.QueueOptions{MaxReceiveCount: 3})
	entries := make([]types.SendMessageBatchRequestEntry, 4)
	for i := range entries {
		entries[i] = types.SendMessageBatchRequestEntry{
			Id:          aws.String(strconv.Itoa(i)),
			MessageBody: aws.String(`{"kind":"` + []string{"order", "refund"}[i%2] + `","n":` + strconv.Itoa(i) + `}`),
			MessageAttributes: map[string]types.MessageAttributeValue{
				"ErrorCode":  {DataType: aws.String("String"), StringValue: aws.String("ClientError")},
				"pipes-pipe": {DataType: aws.String("String"), StringValue: aws.String("orders")},
			},
		}
	}
	if _, err := client.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(dlqURL), Entries: entries}); err != nil {
		t.Fatal(err)
	}
	file := sqsPipeFile(t, queueURL, endpoint, "http://127.0.0.1:1/")

	code, stdout, stderr := runCLI(t, "dlq", "inspect", "-f", file, "--max", "10", "--format", "json")
	if code != 0 || !strings.Contains(stderr, "4 visible") {
		t.Fatalf("inspect: exit %d, stderr:\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	for _, l := range lines {
		var rec struct {
			MessageID         string                     `json:"messageId"`
			MessageAttributes map[string]json.RawMessage `json:"messageAttributes"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec.MessageID == "" || rec.MessageAttributes["pipes-pipe"] == nil {
			t.Errorf("inspect printed %s, want a Pipes SQS record with its pipes-* attributes", l)
		}
	}
	if len(lines) != 4 {
		t.Fatalf("inspect printed %d records, want 4:\n%s", len(lines), stdout)
	}

	// By default, text: per message its id, body, receive count, age and
	// attributes, the failure context first.
	code, stdout, stderr = runCLI(t, "dlq", "inspect", "-f", file, "--max", "10")
	if code != 0 || !strings.Contains(stderr, "4 visible") {
		t.Fatalf("inspect as text: exit %d, stderr:\n%s", code, stderr)
	}
	block := regexp.MustCompile(`(?m)^message [0-9a-f-]+\n` +
		`  body \(\d+ bytes\): "\{\\"kind\\":\\"(order|refund)\\",\\"n\\":\d\}"\n` +
		`  receive count: \d+\n` +
		`  sent: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(\d+s ago\)\n` +
		`  ErrorCode: "ClientError"\n` +
		`  pipes-pipe: "orders"\n\n`)
	if n := len(block.FindAllString(stdout, -1)); n != 4 {
		t.Errorf("inspect as text shows %d messages in the expected layout, want 4:\n%s", n, stdout)
	}

	code, stdout, stderr = runCLI(t, "dlq", "redrive", "-f", file, "--dry-run")
	if code != 0 || !strings.Contains(stderr, "4 would move") || strings.Count(stdout, `"would_move"`) != 4 {
		t.Fatalf("dry run: exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	code, stdout, stderr = runCLI(t, "dlq", "redrive", "-f", file, "--rate", "100", "--filter", `{"body":{"kind":["order"]}}`)
	if code != 0 || !strings.Contains(stderr, "2 moved, 2 skipped by filter, 0 failed") || strings.ContainsAny(stderr, "\r\033") {
		t.Fatalf("redrive: exit %d, stdout:\n%s\nstderr (no terminal: the summary line, no progress bar):\n%q", code, stdout, stderr)
	}
	moved := sqstest.DrainBodies(t, client, queueURL)
	left := sqstest.DrainBodies(t, client, dlqURL)
	if len(moved) != 2 || len(left) != 2 || !strings.Contains(strings.Join(moved, " "), `"order"`) || strings.Contains(strings.Join(left, " "), `"order"`) {
		t.Errorf("moved %v and left %v, want the orders moved and the refunds left", moved, left)
	}
}

func TestDLQRefusesBadUsage(t *testing.T) {
	dir := t.TempDir()
	memory := filepath.Join(dir, "memory.yaml")
	sqsFile := filepath.Join(dir, "sqs.yaml")
	os.WriteFile(memory, []byte("name: m\nsource: {type: memory}\ntarget: {type: stdout}\n"), 0o644)
	os.WriteFile(sqsFile, []byte("name: q\nsource: {type: sqs, queue_url: 'http://127.0.0.1:1/000000000000/q', region: us-east-1}\ntarget: {type: stdout}\n"), 0o644)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"inspecting a memory source says it is meaningless across processes", []string{"dlq", "inspect", "-f", memory}, "memory queue"},
		{"redriving a memory source says it is meaningless across processes", []string{"dlq", "redrive", "-f", memory}, "memory queue"},
		{"a filter that is not an event pattern is refused", []string{"dlq", "redrive", "-f", sqsFile, "--filter", `{"body":`}, "--filter"},
		{"a negative rate is refused", []string{"dlq", "redrive", "-f", sqsFile, "--rate", "-1"}, "--rate"},
		{"inspecting zero messages is refused", []string{"dlq", "inspect", "-f", sqsFile, "--max", "0"}, "--max"},
		{"no file is refused", []string{"dlq", "inspect"}, "no pipeline file"},
		{"an unknown flag is refused", []string{"dlq", "redrive", "--bogus"}, "unknown flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tt.args...)
			if code != 2 || !strings.Contains(stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 mentioning %q", code, stderr, tt.want)
			}
		})
	}
}

// TestDLQFlagsOverrideTheSourcesRegionEndpointAndProfile runs inspect and
// redrive on a pipe file whose source has no region and a dead endpoint:
// --endpoint, --region and --profile (a shared config profile holding the
// region and the only credentials) make them work. It relies on
// local-aws-sqs accepting any signature, and on the SDK signing nothing
// without credentials.
func TestDLQFlagsOverrideTheSourcesRegionEndpointAndProfile(t *testing.T) {
	const secret = "pipes-profile-secret-xyz"
	dir := t.TempDir()
	configFile, credsFile := filepath.Join(dir, "config"), filepath.Join(dir, "credentials")
	if err := os.WriteFile(configFile, []byte("[profile pipes-test]\nregion = us-east-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(credsFile, []byte("[pipes-test]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	endpoint := sqstest.Endpoint(t)
	client := sqstest.Client(t)
	queueURL, dlqURL := sqstest.CreateQueue(t, client, sqstest.QueueOptions{MaxReceiveCount: 3})
	sqstest.SendBodies(t, client, dlqURL, `{"n":1}`, `{"n":2}`)
	for k, v := range map[string]string{
		"AWS_CONFIG_FILE": configFile, "AWS_SHARED_CREDENTIALS_FILE": credsFile,
		"AWS_REGION": "", "AWS_DEFAULT_REGION": "", "AWS_PROFILE": "", "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "",
		"AWS_SESSION_TOKEN": "", "AWS_ENDPOINT_URL": "", "AWS_ENDPOINT_URL_SQS": "", "AWS_EC2_METADATA_DISABLED": "true",
	} {
		t.Setenv(k, v)
	}
	file := filepath.Join(dir, "pipe.yaml")
	os.WriteFile(file, []byte("name: orders\nsource: {type: sqs, queue_url: '"+queueURL+"', endpoint: 'http://127.0.0.1:1'}\ntarget: {type: stdout}\n"), 0o644)

	tests := []struct {
		name     string
		args     []string
		code     int
		want     string
		stdoutN  int // records or lines on stdout
		wantLeft int // messages left in the dead-letter queue afterwards; -1: not checked
	}{
		{"without a region nothing can be called", []string{"dlq", "inspect", "-f", file, "--endpoint", endpoint}, 2, "no AWS region", 0, -1},
		{"a profile that does not exist is named", []string{"dlq", "inspect", "-f", file, "--endpoint", endpoint, "--profile", "nope"}, 2, `profile "nope"`, 0, -1},
		{"the source's dead endpoint fails", []string{"dlq", "inspect", "-f", file, "--profile", "pipes-test"}, 1, "127.0.0.1:1", 0, -1},
		{"--profile gives the region and credentials, --endpoint the server", []string{"dlq", "inspect", "-f", file, "--endpoint", endpoint, "--profile", "pipes-test", "--format", "json"}, 0, "2 visible", 2, 2},
		{"redrive takes them too", []string{"dlq", "redrive", "-f", file, "--endpoint", endpoint, "--profile", "pipes-test", "--region", "us-east-1", "--rate", "0"}, 0, "2 moved", 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit %d mentioning %q", code, stderr, tt.code, tt.want)
			}
			if strings.Contains(stdout+stderr, secret) || strings.Contains(stdout+stderr, "AKIDPROFILE") {
				t.Fatalf("the profile's credentials were printed:\n%s\n%s", stdout, stderr)
			}
			if n := countLines(stdout); n != tt.stdoutN {
				t.Errorf("stdout has %d lines, want %d:\n%s", n, tt.stdoutN, stdout)
			}
			if tt.wantLeft >= 0 {
				if visible, _ := sqstest.Count(t, client, dlqURL); visible != tt.wantLeft {
					t.Errorf("%d messages in the dead-letter queue, want %d", visible, tt.wantLeft)
				}
			}
		})
	}
}

// countLines counts the non-empty lines of s.
func countLines(s string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			n++
		}
	}
	return n
}
