package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/sqstest"
)

// The --native and tasks tests run on local-aws-sqs, which has message
// move tasks (it moves up to the rate each second, shows a task's handle
// only while it runs and refuses a source no RedrivePolicy names); fauxqs
// has none (it answers InvalidAction), which the refusal test relies on.

// moveTaskLine is what the move task lines on stdout hold.
type moveTaskLine struct {
	TaskHandle string `json:"taskHandle"`
	Status     string `json:"status"`
	Moved      int    `json:"approximateNumberOfMessagesMoved"`
	SourceARN  string `json:"sourceArn"`
}

func parseTaskLines(t *testing.T, stdout string) []moveTaskLine {
	t.Helper()
	var tasks []moveTaskLine
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if l == "" {
			continue
		}
		var m moveTaskLine
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("stdout line %q is not a move task: %v", l, err)
		}
		tasks = append(tasks, m)
	}
	return tasks
}

func dlqEnv(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDPIPESTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "pipes-test-secret")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

func TestDLQRedriveNativeMovesWithAMoveTaskAndTasksListsIt(t *testing.T) {
	dlqEnv(t)
	endpoint := sqstest.EndpointOf(t, sqstest.LocalAWSSQS)
	client := sqstest.ClientOf(t, sqstest.LocalAWSSQS)
	queueURL, dlqURL := sqstest.CreateQueue(t, client, sqstest.QueueOptions{MaxReceiveCount: 3})
	sqstest.SendBodies(t, client, dlqURL, `{"n":1}`, `{"n":2}`, `{"n":3}`)
	file := sqsPipeFile(t, queueURL, endpoint, "http://127.0.0.1:1/")

	code, stdout, stderr := runCLI(t, "dlq", "redrive", "-f", file, "--native", "--rate", "100")
	if code != 0 || !strings.Contains(stderr, "message move task COMPLETED: 3 of 3 moved") || strings.ContainsAny(stderr, "\r\033") {
		t.Fatalf("redrive --native: exit %d, stdout:\n%s\nstderr (no terminal: no progress bar):\n%q", code, stdout, stderr)
	}
	lines := parseTaskLines(t, stdout)
	if len(lines) != 2 || lines[0].TaskHandle == "" || lines[1].Status != "COMPLETED" || lines[1].Moved != 3 {
		t.Errorf("stdout has %+v, want the started task then its COMPLETED state with 3 moved", lines)
	}
	if moved := sqstest.DrainBodies(t, client, queueURL); len(moved) != 3 {
		t.Errorf("the source queue got %v, want the 3 messages", moved)
	}

	code, stdout, stderr = runCLI(t, "dlq", "tasks", "-f", file)
	if code != 0 || !strings.Contains(stderr, "1 message move task(s), 0 running") {
		t.Fatalf("tasks: exit %d, stderr:\n%s", code, stderr)
	}
	if tasks := parseTaskLines(t, stdout); len(tasks) != 1 || tasks[0].Status != "COMPLETED" || tasks[0].SourceARN == "" {
		t.Errorf("tasks printed %+v, want the one COMPLETED task", tasks)
	}
}

func TestDLQTasksCancelsARunningMoveTask(t *testing.T) {
	dlqEnv(t)
	endpoint := sqstest.EndpointOf(t, sqstest.LocalAWSSQS)
	client := sqstest.ClientOf(t, sqstest.LocalAWSSQS)
	queueURL, dlqURL := sqstest.CreateQueue(t, client, sqstest.QueueOptions{MaxReceiveCount: 3})
	bodies := make([]string, 20)
	for i := range bodies {
		bodies[i] = strconv.Itoa(i)
	}
	sqstest.SendBodies(t, client, dlqURL, bodies...)
	file := sqsPipeFile(t, queueURL, endpoint, "http://127.0.0.1:1/")

	// One message a second: the task still runs when it is cancelled.
	code, stdout, stderr := runCLI(t, "dlq", "redrive", "-f", file, "--native", "--rate", "1", "--no-wait")
	started := parseTaskLines(t, stdout)
	if code != 0 || len(started) != 1 || started[0].TaskHandle == "" || !strings.Contains(stderr, "--cancel "+started[0].TaskHandle) {
		t.Fatalf("redrive --native --no-wait: exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, "dlq", "tasks", "-f", file)
	if tasks := parseTaskLines(t, stdout); code != 0 || len(tasks) != 1 || tasks[0].Status != "RUNNING" || tasks[0].TaskHandle != started[0].TaskHandle {
		t.Fatalf("tasks: exit %d, %+v, stderr:\n%s; want the running task with its handle", code, tasks, stderr)
	}
	code, _, stderr = runCLI(t, "dlq", "tasks", "-f", file, "--cancel", started[0].TaskHandle)
	if code != 0 || !strings.Contains(stderr, "stay moved") {
		t.Fatalf("tasks --cancel: exit %d, stderr:\n%s", code, stderr)
	}
	var last []moveTaskLine
	waitUntil(t, 30*time.Second, "the task to be cancelled", func() bool {
		_, stdout, _ := runCLI(t, "dlq", "tasks", "-f", file)
		last = parseTaskLines(t, stdout)
		return len(last) == 1 && last[0].Status == "CANCELLED"
	})
	inSource := len(sqstest.DrainBodies(t, client, queueURL))
	left := len(sqstest.DrainBodies(t, client, dlqURL))
	if inSource != last[0].Moved || inSource+left != len(bodies) {
		t.Errorf("%d moved and %d left, the task says %d moved; want all %d in one queue or the other", inSource, left, last[0].Moved, len(bodies))
	}
	code, _, stderr = runCLI(t, "dlq", "tasks", "-f", file, "--cancel", started[0].TaskHandle)
	if code != 1 {
		t.Errorf("cancelling an ended task: exit %d, stderr:\n%s; want 1", code, stderr)
	}
}

func TestDLQNativeRefusesWhatItCannotDo(t *testing.T) {
	dlqEnv(t)
	local := sqstest.ClientOf(t, sqstest.LocalAWSSQS)
	queueURL, _ := sqstest.CreateQueue(t, local, sqstest.QueueOptions{MaxReceiveCount: 3})
	plainURL, _ := sqstest.CreateQueue(t, local, sqstest.QueueOptions{})
	file := sqsPipeFile(t, queueURL, sqstest.EndpointOf(t, sqstest.LocalAWSSQS), "http://127.0.0.1:1/")
	faux := sqstest.ClientOf(t, sqstest.Fauxqs)
	fauxQueue, _ := sqstest.CreateQueue(t, faux, sqstest.QueueOptions{MaxReceiveCount: 3})
	fauxFile := sqsPipeFile(t, fauxQueue, sqstest.EndpointOf(t, sqstest.Fauxqs), "http://127.0.0.1:1/")
	rabbitFile := filepath.Join(t.TempDir(), "rabbit.yaml")
	os.WriteFile(rabbitFile, []byte("name: r\nsource: {type: rabbitmq, url: 'amqp://guest:guest@127.0.0.1:5672/', queue: q}\ntarget: {type: stdout}\n"), 0o644)
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"--filter cannot go with --native", []string{"dlq", "redrive", "-f", file, "--native", "--filter", `{"body":{"a":["b"]}}`}, 2, "--filter cannot go with --native"},
		{"--max cannot go with --native", []string{"dlq", "redrive", "-f", file, "--native", "--max", "3"}, 2, "--max cannot go with --native"},
		{"--dry-run cannot go with --native", []string{"dlq", "redrive", "-f", file, "--native", "--dry-run"}, 2, "--dry-run cannot go with --native"},
		{"a fractional native rate is refused", []string{"dlq", "redrive", "-f", file, "--native", "--rate", "1.5"}, 2, "whole number from 1 to 500"},
		{"a native rate above 500 is refused", []string{"dlq", "redrive", "-f", file, "--native", "--rate", "501"}, 2, "whole number from 1 to 500"},
		{"--no-wait without --native is refused", []string{"dlq", "redrive", "-f", file, "--no-wait"}, 2, "--no-wait is for --native"},
		{"a queue no RedrivePolicy names is no dead-letter queue", []string{"dlq", "redrive", "-f", file, "--native", "--queue-url", plainURL}, 2, "without --native moves from any queue"},
		{"a server without move tasks says so (fauxqs)", []string{"dlq", "redrive", "-f", fauxFile, "--native"}, 1, "does not support message move tasks"},
		{"tasks on a server without move tasks says so (fauxqs)", []string{"dlq", "tasks", "-f", fauxFile}, 1, "does not support message move tasks"},
		{"a rabbitmq pipe has no native redrive", []string{"dlq", "redrive", "-f", rabbitFile, "--native"}, 2, "RabbitMQ has not"},
		{"a rabbitmq pipe has no move tasks", []string{"dlq", "tasks", "-f", rabbitFile}, 2, "RabbitMQ has none"},
		{"the AWS flags are for sqs sources", []string{"dlq", "inspect", "-f", rabbitFile, "--region", "eu-west-1", "--profile", "p"}, 2, "--region, --profile are for sqs sources"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit %d mentioning %q", code, stderr, tt.code, tt.want)
			}
		})
	}
}

func TestDLQRedriveNativeMovesToTheQueueOfTo(t *testing.T) {
	dlqEnv(t)
	endpoint := sqstest.EndpointOf(t, sqstest.LocalAWSSQS)
	client := sqstest.ClientOf(t, sqstest.LocalAWSSQS)
	queueURL, dlqURL := sqstest.CreateQueue(t, client, sqstest.QueueOptions{MaxReceiveCount: 3})
	otherURL, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{})
	sqstest.SendBodies(t, client, dlqURL, "a", "b")
	file := sqsPipeFile(t, queueURL, endpoint, "http://127.0.0.1:1/")

	code, _, stderr := runCLI(t, "dlq", "redrive", "-f", file, "--native", "--rate", "0", "--to", otherURL)
	if code != 0 || !strings.Contains(stderr, "at SQS's rate") || !strings.Contains(stderr, "COMPLETED: 2 of 2 moved") {
		t.Fatalf("redrive --native --to: exit %d, stderr:\n%s", code, stderr)
	}
	if got, inSource := sqstest.DrainBodies(t, client, otherURL), sqstest.DrainBodies(t, client, queueURL); len(got) != 2 || len(inSource) != 0 {
		t.Errorf("--to got %v and the source queue %v, want both messages in --to's queue", got, inSource)
	}
}
