package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/sqstest"
	"github.com/pipesproject/pipes/internal/syncbuf"
	"github.com/pipesproject/pipes/internal/testenv"
)

// The test binary doubles as the pipes binary: with PIPES_TEST_MAIN=1 it
// runs the CLI, so tests can start, SIGTERM and SIGKILL real processes.
//
// Otherwise it runs the tests, with the default -test.parallel raised to
// parallelIntegration.
func TestMain(m *testing.M) {
	if os.Getenv("PIPES_TEST_MAIN") == "1" {
		main()
		return
	}
	if err := testenv.DefaultParallel(parallelIntegration); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// parallelIntegration is how many tests of this package that called
// t.Parallel run at once when -test.parallel is not given. Those tests
// start the CLI as a child process (startRunner, runCLIProc,
// runUntilMoved) and spend most of their time waiting on it, on a queue or
// on a target, so more of them than the machine has cores overlap their
// waits. Tests that set the environment (t.Setenv) or run the run verb in
// this process (it sizes GOMAXPROCS and the memory limit, which are the
// process's) stay serial; serial tests never overlap the parallel ones.
const parallelIntegration = 4

// childEnv is the environment of a child process of the test binary that
// runs the CLI: this process's, the fake AWS credentials and region, and
// then env (later entries win).
func childEnv(env ...string) []string {
	return append(append(os.Environ(), "PIPES_TEST_MAIN=1",
		"AWS_ACCESS_KEY_ID=AKIDPIPESTEST", "AWS_SECRET_ACCESS_KEY=pipes-test-secret", "AWS_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true"), env...)
}

// runCLIProc runs the CLI with args in a child process of the test binary
// with env added to its environment (childEnv), and returns its exit code
// and output: runCLI for a parallel test, or for the run verb.
func runCLIProc(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = childEnv(env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("starting pipes %v: %v", args, err)
	}
	return code, out.String(), errb.String()
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestQuickstartShowsTheWholeLifecycle(t *testing.T) {
	code, stdout, stderr := runCLI(t, "run", "--drain", "--metrics-addr", "", "-f", "../../examples/quickstart/pipeline.yaml")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 11 {
		t.Errorf("stdout has %d records, want the 11 good orders:\n%s", len(lines), stdout)
	}
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec["eventSource"] != "aws:sqs" {
			t.Errorf("stdout line is not a Pipes SQS record: %s", l)
		}
	}
	for _, want := range []string{"queue orders: 0 left", "2 dead-lettered", "queue orders-dlq: 2 left", `"order_id":"o-004"`, `"order_id":"o-009"`, "after 3 receives"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

func TestValidateReportsEveryProblemWithFileLineAndField(t *testing.T) {
	file := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(file, []byte("name: orders\nsource:\n  type: sqs\n  queue_name: orders\n  batch_size: 50\n  colour: red\n"), 0o644)
	code, _, stderr := runCLI(t, "validate", "-f", file)
	if code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	for _, want := range []string{
		file + ":1:1: target is required",
		file + ":5:15: source.batch_size: batch_size > 10 needs batch_window of at least 1s",
		file + ":6:3: source.colour: unknown key",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

func TestValidateAcceptsTheExamples(t *testing.T) {
	code, stdout, stderr := runCLI(t, "validate", "-f", "../../examples/quickstart")
	if code != 0 || !strings.Contains(stdout, "ok: 2 pipes in 2 files") { // the folder is walked: local-sqs/ too
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{{"run"}, {"nope"}, {"run", "--bogus"}, {"run", "-f", "/does/not/exist.yaml"}} {
		if code, _, _ := runCLI(t, args...); code != 2 {
			t.Errorf("pipes %v: exit %d, want 2", args, code)
		}
	}
}

// countingTarget is a real HTTP target that accepts every batch after an
// optional delay and counts acceptances per body.
type countingTarget struct {
	*httptest.Server
	mu       sync.Mutex
	ok       map[string]int
	started  int
	delay    time.Duration
	finished int
}

func newCountingTarget(t *testing.T, delay time.Duration) *countingTarget {
	c := &countingTarget{ok: map[string]int{}, delay: delay}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var batch []struct {
			Body string `json:"body"`
		}
		if err := json.NewDecoder(r.Body).Decode(&batch); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.started++
		c.mu.Unlock()
		select {
		case <-time.After(c.delay):
		case <-r.Context().Done():
			return // the runner gave up on this call: nothing was accepted
		}
		c.mu.Lock()
		for _, rec := range batch {
			c.ok[rec.Body]++
		}
		c.finished++
		c.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *countingTarget) snapshot() (ok map[string]int, started int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ok = make(map[string]int, len(c.ok))
	for k, v := range c.ok {
		ok[k] = v
	}
	return ok, c.started
}

type proc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{} // closed when the process has exited
	err    error         // its exit error, once done is closed
}

// wait waits for the process to exit and returns its exit error.
func (p *proc) wait() error {
	<-p.done
	return p.err
}

// syncBuffer is a log or output destination the test reads while the code under test writes it.
type syncBuffer = syncbuf.Buffer

func startRunner(t *testing.T, file string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"run", "--metrics-addr", "", "-f", file}, extra...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = childEnv()
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, stderr: stderr, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	// Signals are handled once the pipes have started.
	waitUntil(t, 30*time.Second, "the runner to start", func() bool {
		return strings.Contains(stderr.String(), "pipe started")
	})
	return p
}

func sqsPipeFile(t *testing.T, queueURL, endpoint, targetURL string) string {
	file := filepath.Join(t.TempDir(), "pipe.yaml")
	content := fmt.Sprintf(`
name: orders
source:
  type: sqs
  queue_url: %s
  endpoint: %s
  region: us-east-1
  wait_time: 1s
target:
  type: http
  url: %s
  timeout: 20s
`, queueURL, endpoint, targetURL)
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestKillingTheRunnerAtRandomMomentsLosesNothing(t *testing.T) {
	t.Parallel()
	endpoint := sqstest.Endpoint(t)
	client := sqstest.Client(t)
	queueURL, dlqURL := sqstest.CreateQueue(t, client, sqstest.QueueOptions{VisibilityTimeout: 2 * time.Second, MaxReceiveCount: 20})
	var bodies []string
	for i := range 2000 {
		bodies = append(bodies, fmt.Sprintf(`{"n":%d}`, i))
	}
	sqstest.SendBodies(t, client, queueURL, bodies...)
	target := newCountingTarget(t, 50*time.Millisecond)
	file := sqsPipeFile(t, queueURL, endpoint, target.URL)

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d (kill moments)", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	for kill := range 3 {
		p := startRunner(t, file)
		_, before := target.snapshot()
		waitUntil(t, 30*time.Second, "the runner to deliver", func() bool {
			_, n := target.snapshot()
			return n > before
		})
		time.Sleep(time.Duration(rng.IntN(700)) * time.Millisecond)
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = p.wait()
		ok, _ := target.snapshot()
		t.Logf("kill %d: %d of %d bodies accepted so far", kill+1, len(ok), len(bodies))
	}
	p := startRunner(t, file)
	waitUntil(t, 90*time.Second, "every message accepted and the queue empty", func() bool {
		ok, _ := target.snapshot()
		if len(ok) < len(bodies) {
			return false
		}
		visible, inflight := sqstest.Count(t, client, queueURL)
		return visible+inflight == 0
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(); err != nil {
		t.Fatalf("runner exit after SIGTERM: %v\n%s", err, p.stderr)
	}
	ok, _ := target.snapshot()
	dupes := 0
	for _, b := range bodies {
		if ok[b] == 0 {
			t.Errorf("%s was lost", b)
		}
		dupes += ok[b] - 1
	}
	if dead := sqstest.DrainBodies(t, client, dlqURL); len(dead) != 0 {
		t.Errorf("%d messages dead-lettered by the kills, want none", len(dead))
	}
	t.Logf("%d duplicates after 3 kills (messages in flight at a kill)", dupes)
}

func TestSIGTERMFinishesOrReleasesInFlightMessagesAndExitsZero(t *testing.T) {
	endpoint := sqstest.Endpoint(t)
	client := sqstest.Client(t)
	// A long visibility timeout: released messages must be visible again at
	// once, not after it.
	queueURL, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{VisibilityTimeout: 60 * time.Second})
	var bodies []string
	for i := range 200 {
		bodies = append(bodies, fmt.Sprintf(`{"n":%d}`, i))
	}
	sqstest.SendBodies(t, client, queueURL, bodies...)
	target := newCountingTarget(t, 10*time.Second) // slower than the shutdown timeout
	file := sqsPipeFile(t, queueURL, endpoint, target.URL)

	p := startRunner(t, file, "--shutdown-timeout", "1s")
	waitUntil(t, 30*time.Second, "batches in flight", func() bool {
		_, started := target.snapshot()
		return started >= 5
	})
	stopAt := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
		if err := p.err; err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, p.stderr)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("runner still running 15 s after SIGTERM\n%s", p.stderr)
	}
	took := time.Since(stopAt)
	visible, inflight := sqstest.Count(t, client, queueURL)
	ok, _ := target.snapshot()
	if inflight != 0 {
		t.Errorf("%d messages still invisible after shutdown, want every unfinished one released", inflight)
	}
	if visible+len(ok) != len(bodies) {
		t.Errorf("%d visible + %d accepted != %d sent", visible, len(ok), len(bodies))
	}
	if !strings.Contains(p.stderr.String(), "shutdown timeout reached") {
		t.Errorf("no shutdown timeout log:\n%s", p.stderr)
	}
	t.Logf("stopped %v after SIGTERM with --shutdown-timeout 1s (long poll wait 1s)", took)
}

func TestPipesTestRunsFilterAndTemplateOfflineOneLinePerEvent(t *testing.T) {
	code, stdout, stderr := runCLI(t, "test", "-f", "../../examples/filter-template/pipeline.yaml",
		"--input", "../../examples/filter-template/events.jsonl")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("output line %q is not JSON: %v", l, err)
		}
		got = append(got, m)
	}
	wantPassed := []bool{true, false, false, true, false}
	if len(got) != len(wantPassed) {
		t.Fatalf("%d output lines, want %d:\n%s", len(got), len(wantPassed), stdout)
	}
	for i, m := range got {
		if m["index"] != float64(i) || m["passed"] != wantPassed[i] {
			t.Errorf("line %d = %v, want index %d passed %v", i, m, i, wantPassed[i])
		}
	}
	in, _ := got[0]["target_input"].(map[string]any)
	if in["order"] != "o-1" || in["total"] != float64(250) || in["pipe"] != "big-orders" {
		t.Errorf("target_input = %v, want the rendered template", got[0]["target_input"])
	}
}

func TestPipesTestTakesWholeRecordsFromStandardInput(t *testing.T) {
	file := filepath.Join(t.TempDir(), "p.yaml")
	os.WriteFile(file, []byte(`name: p
source: {type: sqs, queue_name: q}
filter:
  patterns: ['{"attributes": {"ApproximateReceiveCount": ["3"]}}']
target: {type: stdout, input_template: "retry of <$.messageId>: <$.body>"}
`), 0o644)
	records := `{"messageId":"m-1","receiptHandle":"h","body":"hello","attributes":{"ApproximateReceiveCount":"3"},"messageAttributes":{},"md5OfBody":"","eventSource":"aws:sqs","eventSourceARN":"arn:aws:sqs:us-east-1:1:q","awsRegion":"us-east-1"}
{"messageId":"m-2","body":"first","attributes":{"ApproximateReceiveCount":"1"}}
`
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"test", "-f", file, "--records", "--input", "-"}, strings.NewReader(records), &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	want := `{"index":0,"passed":true,"target_input":"retry of m-1: hello"}
{"index":1,"passed":false,"target_input":null}
`
	if out.String() != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestPipesTestReportsLinesThatAreNotRecords(t *testing.T) {
	file := filepath.Join(t.TempDir(), "p.yaml")
	os.WriteFile(file, []byte("name: p\nsource: {type: sqs, queue_name: q}\ntarget: {type: stdout}\n"), 0o644)
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"test", "-f", file, "--records", "--input", "-"}, strings.NewReader("[1,2]\n"), &out, &errb)
	if code != 1 || !strings.Contains(out.String(), `"error":"-:1: not a Pipes SQS record`) {
		t.Fatalf("exit %d, output %s", code, out.String())
	}
}

func TestPipesTestCallsTheEnrichmentOnlyWithEnrich(t *testing.T) {
	file := filepath.Join(t.TempDir(), "p.yaml")
	os.WriteFile(file, []byte(`name: p
source: {type: sqs, queue_name: q}
enrichment:
  type: jq
  jq: 'select(.body.ok) | {id: .body.id, lines: [.body.lines[] | . * 2]}'
target: {type: stdout}
`), 0o644)
	input := "{\"ok\":true,\"id\":7,\"lines\":[1,2]}\n{\"ok\":false}\n"
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"test", "-f", file, "--enrich", "--input", "-"}, strings.NewReader(input), &out, &errb)
	want := `{"index":0,"passed":true,"target_input":{"id":7,"lines":[2,4]}}
{"index":1,"passed":false,"target_input":null}
`
	if code != 0 || out.String() != want {
		t.Fatalf("exit %d, output:\n%s\nwant:\n%s\n%s", code, out.String(), want, errb.String())
	}
	out.Reset()
	code = run(context.Background(), []string{"test", "-f", file, "--input", "-"}, strings.NewReader(input), &out, &errb)
	if code != 0 || !strings.Contains(out.String(), `"eventSource":"aws:sqs"`) {
		t.Fatalf("without --enrich the target input should be the record; exit %d, output:\n%s", code, out.String())
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A known secret, put in a header from the environment, must appear in no
// log line (at trace level, payloads included), no error, no metric and no
// output, even when the target echoes it back in its error answers.
func TestSecretsNeverAppearInLogsErrorsOrMetrics(t *testing.T) {
	const secret = "s3cr3t-T0KEN-do-not-leak"
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "denied for "+r.Header.Get("Authorization"), http.StatusInternalServerError)
	}))
	defer echo.Close()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "events.jsonl"), []byte("{\"body\":{\"n\":1}}\n{\"body\":{\"n\":2}}\n"), 0o644)
	file := filepath.Join(dir, "pipe.yaml")
	os.WriteFile(file, []byte(fmt.Sprintf(`
name: secretive
source: {type: memory, preload: events.jsonl, visibility_timeout: 1s, wait_time: 200ms}
target:
  type: http
  url: %s
  headers: {Authorization: "Bearer ${PIPES_TEST_SECRET}"}
logging: {level: trace, include_execution_data: true}
`, echo.URL)), 0o644)
	addr := freePort(t)
	t.Setenv("PIPES_TEST_SECRET", secret)
	p := startRunner(t, file, "--metrics-addr", addr, "--log-level", "debug")
	waitUntil(t, 20*time.Second, "a failed delivery", func() bool {
		return strings.Contains(p.stderr.String(), "batch failed")
	})
	code, ready := httpGet(t, "http://"+addr+"/readyz")
	if code != http.StatusOK {
		t.Errorf("/readyz = %d %q while running", code, ready)
	}
	code, metrics := httpGet(t, "http://"+addr+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics = %d", code)
	}
	for _, want := range []string{`pipes_messages_received_total{pipe="secretive"}`, `pipes_concurrency{pipe="secretive"} 5`,
		`pipes_messages_failed_total{pipe="secretive",stage="target"}`, `pipes_execution_failed_total{pipe="secretive"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
	for what, text := range map[string]string{"logs": p.stderr.String(), "metrics": metrics} {
		if strings.Contains(text, secret) {
			t.Errorf("the secret appears in the %s", what)
		}
	}
	if !strings.Contains(p.stderr.String(), "500") {
		t.Errorf("the logs do not say what failed:\n%s", p.stderr.String())
	}
}

func TestValidateChecksTemplatesInHTTPTargetParameters(t *testing.T) {
	file := filepath.Join(t.TempDir(), "p.yaml")
	os.WriteFile(file, []byte("name: p\nsource: {type: sqs, queue_name: q}\ntarget:\n  type: http\n  url: http://h/orders/<$.body..id>\n  query: {v: <$.body.v>}\n"), 0o644)
	code, _, stderr := runCLI(t, "validate", "-f", file)
	// At the url, not at the target block.
	if code != 2 || !strings.Contains(stderr, file+":5:8: target.url: url: input template:") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
}

func TestDryRunPrintsWhatTargetsWouldGetAndConsumesNothing(t *testing.T) {
	code, stdout, stderr := runCLI(t, "run", "--drain", "--dry-run", "--metrics-addr", "", "-f", "../../examples/quickstart/pipeline.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 13 {
		t.Fatalf("%d lines, want one per message (13): the dry run calls no target, so none fails\n%s", len(lines), stdout)
	}
	var line struct {
		Pipe        string         `json:"pipe"`
		MessageID   string         `json:"messageId"`
		TargetInput map[string]any `json:"target_input"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &line); err != nil || line.Pipe != "orders" || line.MessageID == "" || line.TargetInput["eventSource"] != "aws:sqs" {
		t.Fatalf("line %s: %v", lines[0], err)
	}
	if !strings.Contains(stderr, "queue orders: 13 left, 13 received, 0 deleted, 0 dead-lettered") {
		t.Fatalf("the queue was consumed:\n%s", stderr)
	}
}

// TestPipesTestNeverShowsEchoedEnrichmentCredentials runs `pipes test
// --enrich` against an enrichment that echoes the bearer token of its
// Authorization header (given from the environment) in a 401 answer.
func TestPipesTestNeverShowsEchoedEnrichmentCredentials(t *testing.T) {
	const token = "sk-live-0123456789abcdef"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "invalid token: "+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), http.StatusUnauthorized)
	}))
	defer srv.Close()
	t.Setenv("PIPES_TEST_TOKEN", token)
	file := filepath.Join(t.TempDir(), "p.yaml")
	os.WriteFile(file, []byte(fmt.Sprintf(`name: p
source: {type: sqs, queue_name: q}
enrichment:
  type: http
  url: %s/enrich
  headers: {Authorization: "Bearer ${PIPES_TEST_TOKEN}"}
target: {type: stdout}
`, srv.URL)), 0o644)
	var out, errb bytes.Buffer
	run(context.Background(), []string{"test", "-f", file, "--enrich", "--input", "-"}, strings.NewReader("{\"n\":1}\n"), &out, &errb)
	text := out.String() + errb.String()
	if !strings.Contains(out.String(), "401") || !strings.Contains(out.String(), "[redacted]") {
		t.Fatalf("output does not show the redacted 401:\n%s", text)
	}
	for _, part := range []string{token, token[:8], token[len(token)-8:]} {
		if strings.Contains(text, part) {
			t.Errorf("output shows %q, part of the token:\n%s", part, text)
		}
	}
}

// A hung target and a long --shutdown-timeout: the first SIGTERM is logged
// and the runner waits for the in-flight batch; the second is logged, cuts
// the stop short (the target call is cancelled) and the process exits 0
// long before the shutdown timeout.
func TestASecondSIGTERMCutsTheStopShortAndExitsZero(t *testing.T) {
	target := newCountingTarget(t, 10*time.Minute) // hangs until its call is cancelled
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "events.jsonl"), []byte("{\"body\":{\"n\":1}}\n{\"body\":{\"n\":2}}\n"), 0o644)
	file := filepath.Join(dir, "pipe.yaml")
	os.WriteFile(file, []byte(fmt.Sprintf(`
name: hung
source: {type: memory, preload: events.jsonl, visibility_timeout: 30s, wait_time: 200ms}
target: {type: http, url: %s, timeout: 5m}
`, target.URL)), 0o644)
	p := startRunner(t, file, "--shutdown-timeout", "60s")
	waitUntil(t, 20*time.Second, "a batch at the target", func() bool {
		_, started := target.snapshot()
		return started >= 1
	})

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the first signal logged", func() bool {
		return strings.Contains(p.stderr.String(), `level=INFO msg="signal received, stopping: polling stops, in-flight batches get --shutdown-timeout" signal=terminated shutdown_timeout=1m0s`)
	})
	select {
	case <-p.done:
		t.Fatalf("the runner exited (%v) after one SIGTERM with a batch in flight and --shutdown-timeout 60s\n%s", p.err, p.stderr)
	case <-time.After(time.Second):
	}

	secondAt := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		t.Fatalf("runner still running 15 s after the second SIGTERM\n%s", p.stderr)
	}
	if p.err != nil {
		t.Fatalf("exit after the second SIGTERM: %v, want 0\n%s", p.err, p.stderr)
	}
	if !strings.Contains(p.stderr.String(), `level=WARN msg="second signal received, stopping now`) {
		t.Errorf("the forced stop is not logged:\n%s", p.stderr)
	}
	if ok, _ := target.snapshot(); len(ok) != 0 {
		t.Errorf("the hung target accepted %v: its call should have been cancelled", ok)
	}
	t.Logf("exited %v after the second SIGTERM", time.Since(secondAt))
}

func TestSignalsStopThenAbortThenExitOne(t *testing.T) {
	var log syncBuffer
	cancelled, exited := 0, -1
	in := newInterrupts(func() { cancelled++ }, func(code int) { exited = code }, &log)
	aborts := 0
	in.handle(syscall.SIGINT)
	in.handle(syscall.SIGINT)
	in.runStarted(slog.New(slog.NewTextHandler(&log, nil)), time.Second, func() { aborts++ })
	if cancelled != 1 || aborts != 1 || exited != -1 {
		t.Fatalf("after two signals and then the run's start: %d cancels, %d aborts, exit %d; want 1, 1 and no exit", cancelled, aborts, exited)
	}
	in.handle(syscall.SIGINT)
	if exited != 1 {
		t.Fatalf("a third signal exited with %d, want 1", exited)
	}
	for _, want := range []string{`msg="signal received, stopping" signal=interrupt`, `msg="second signal received`, `msg="third signal received, exiting at once with code 1"`} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, log.String())
		}
	}
}

// A drain is a job that ends: when its source cannot be opened for good
// (a missing queue is permanent) it exits 1 at once and says why, in
// words, not Go values.
func TestDrainOfAMissingQueueExitsOneAtOnceWithTheReason(t *testing.T) {
	endpoint := sqstest.Endpoint(t)
	file := filepath.Join(t.TempDir(), "pipe.yaml")
	os.WriteFile(file, []byte(fmt.Sprintf(`
name: orders
source: {type: sqs, queue_name: pipes-no-such-queue, endpoint: %s, region: us-east-1, wait_time: 1s}
target: {type: stdout}
`, endpoint)), 0o644)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDPIPESTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "pipes-test-secret")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	start := time.Now()
	code, stdout, stderr := runCLI(t, "run", "--drain", "--metrics-addr", "", "-f", file)
	took := time.Since(start)
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstderr:\n%s", code, stderr)
	}
	if took > 10*time.Second {
		t.Errorf("took %v to give up on a missing queue, want at once (it is a permanent error)", took)
	}
	for _, want := range []string{"pipe orders: opening the source: " + file + ":3:33: SQS queue pipes-no-such-queue does not exist", "create it with `pipes send --create`, or check `queue_name`"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	for _, dump := range []string{"&{", "{0x", "%!", "<nil>"} {
		if strings.Contains(stderr, dump) {
			t.Errorf("stderr shows a raw Go value (%q):\n%s", dump, stderr)
		}
	}
	if stdout != "" {
		t.Errorf("stdout = %q, want nothing", stdout)
	}
}
