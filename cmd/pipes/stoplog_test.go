package main

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/sqstest"
)

// The first Ctrl-C on an idle SQS pipe (a long poll under way, local-aws-
// sqs) says how long the stop waits at most: the wait_time left of the
// poll, which is waited for rather than abandoned.
func TestTheFirstSignalOnAnIdleSQSPipeSaysHowLongItWaits(t *testing.T) {
	t.Parallel() // the runner is a child with the fake AWS environment (startRunner); the pipe file names the endpoint
	endpoint := sqstest.Endpoint(t)
	client := sqstest.Client(t)
	queueURL, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{})
	file := sqsPipeFile(t, queueURL, endpoint, "http://127.0.0.1:1/unused")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(string(data), "wait_time: 1s", "wait_time: 6s", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startRunner(t, file, "--log-level", "info")
	time.Sleep(1500 * time.Millisecond) // well into the first long poll
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`waiting for the long polls under way \(at most (\d+)s, the wait_time left\)`)
	waitUntil(t, 20*time.Second, "the stop's log line", func() bool { return re.MatchString(p.stderr.String()) })
	n, _ := strconv.Atoi(re.FindStringSubmatch(p.stderr.String())[1])
	if n < 1 || n > 6 {
		t.Errorf("at most %ds left of a 6 s poll begun before the signal: want 1..6 s\n%s", n, p.stderr)
	}
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("still running 20 s after SIGINT\n%s", p.stderr)
	}
	if p.err != nil {
		t.Errorf("exit after SIGINT: %v\n%s", p.err, p.stderr)
	}
}
