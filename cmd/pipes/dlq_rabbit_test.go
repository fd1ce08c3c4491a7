package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/internal/rabbittest"
)

// rabbitDeadLetters makes a source queue whose dead-letter exchange feeds
// a dead-letter queue and dead-letters the bodies through it (basic.nack
// requeue=false), so that they carry the broker's x-death.
func rabbitDeadLetters(t *testing.T, bodies ...string) (source, dlx, dlq string) {
	t.Helper()
	dlx, dlq = rabbittest.DeclareDLX(t)
	source = rabbittest.Name(t, "-src")
	rabbittest.DeclareQueue(t, source, rabbittest.QueueOptions{DeadLetterExchange: dlx})
	ch := rabbittest.Channel(t)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for i, b := range bodies {
		dc, err := ch.PublishWithDeferredConfirmWithContext(t.Context(), "", source, true, false, amqp.Publishing{
			MessageId: fmt.Sprintf("m-%d", i), ContentType: "application/json",
			Headers: amqp.Table{"ErrorCode": "ClientError", "pipes-pipe": "orders", "x-pipes-attempts": int64(3)},
			Body:    []byte(b),
		})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := dc.WaitContext(t.Context()); !ok || err != nil {
			t.Fatalf("publishing: not confirmed (%v)", err)
		}
	}
	for range bodies {
		d, ok, err := ch.Get(source, false)
		if err != nil || !ok {
			t.Fatalf("getting from %s: %v %v", source, ok, err)
		}
		if err := d.Nack(false, false); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 5e9, "the dead letters", func() bool { return rabbittest.Count(t, dlq) == len(bodies) })
	return source, dlx, dlq
}

func dlqRabbitPipeFile(t *testing.T, amqpURL, queue, managementURL string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "pipe.yaml")
	content := fmt.Sprintf("name: orders\nsource:\n  type: rabbitmq\n  url: %q\n  queue: %s\n  management_url: %q\ntarget:\n  type: stdout\n", amqpURL, queue, managementURL)
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

func bodiesOf(ds []amqp.Delivery) string {
	var out []string
	for _, d := range ds {
		out = append(out, string(d.Body))
	}
	return strings.Join(out, " ")
}

func TestDLQInspectThenRedriveOnARabbitMQPipe(t *testing.T) {
	all := []string{`{"kind":"order","n":0}`, `{"kind":"refund","n":1}`, `{"kind":"order","n":2}`, `{"kind":"refund","n":3}`}
	source, _, dlq := rabbitDeadLetters(t, all...)
	file := dlqRabbitPipeFile(t, rabbittest.URL(t), source, rabbittest.ManagementURL(t))

	code, stdout, stderr := runCLI(t, "dlq", "inspect", "-f", file, "--max", "3", "--format", "json")
	if code != 0 || !strings.Contains(stderr, "dead-letter queue "+dlq) || !strings.Contains(stderr, "4 ready") {
		t.Fatalf("inspect: exit %d, stderr:\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("inspect printed %d records, want 3 (--max):\n%s", len(lines), stdout)
	}
	for i, l := range lines {
		var rec struct {
			MessageID       string `json:"messageId"`
			EventSource     string `json:"eventSource"`
			BasicProperties struct {
				Headers map[string]json.RawMessage `json:"headers"`
			} `json:"basicProperties"`
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec.MessageID != fmt.Sprintf("m-%d", i) || rec.EventSource != "aws:rmq" || rec.BasicProperties.Headers["x-death"] == nil {
			t.Errorf("inspect printed %s, want the Pipes RabbitMQ record of m-%d with its x-death", l, i)
		}
	}
	if n := rabbittest.Count(t, dlq); n != 4 {
		t.Fatalf("after inspect the dead-letter queue has %d messages, want 4", n)
	}

	code, stdout, stderr = runCLI(t, "dlq", "redrive", "-f", file, "--dry-run")
	if code != 0 || !strings.Contains(stderr, "4 would move") || strings.Count(stdout, `"would_move"`) != 4 || strings.Contains(stdout, "x-death") || !strings.Contains(stdout, "pipes-redriven-at") {
		t.Fatalf("dry run: exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if n := rabbittest.Count(t, source); n != 0 {
		t.Fatalf("a dry run moved %d messages", n)
	}

	code, stdout, stderr = runCLI(t, "dlq", "redrive", "-f", file, "--rate", "100", "--filter", `{"data":{"kind":["order"]}}`)
	if code != 0 || !strings.Contains(stderr, "2 moved, 2 skipped by filter, 0 failed") || strings.Count(stdout, `"outcome":"moved"`) != 2 {
		t.Fatalf("redrive: exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	moved := rabbittest.Get(t, source)
	if bodiesOf(moved) != all[0]+" "+all[2] {
		t.Errorf("moved %s, want the orders", bodiesOf(moved))
	}
	for _, d := range moved {
		_, death := d.Headers["x-death"]
		_, attempts := d.Headers["x-pipes-attempts"]
		_, ctxHdr := d.Headers["ErrorCode"]
		if death || attempts || ctxHdr || d.Headers["pipes-redriven-at"] == nil {
			t.Errorf("moved message %s has headers %v, want the death, attempts and context gone and pipes-redriven-at added", d.MessageId, d.Headers)
		}
	}
	if left := bodiesOf(rabbittest.Get(t, dlq)); left != all[1]+" "+all[3] {
		t.Errorf("left %s, want the refunds, in order", left)
	}
}

// TestDLQInspectShowsRabbitMQDeadLettersAsText: by default `pipes dlq
// inspect` prints, per message, its id, its body as quoted text (escaped,
// cut), or binary in hex, each x-death entry, x-pipes-attempts and the
// failure context headers; --format json the records as before.
func TestDLQInspectShowsRabbitMQDeadLettersAsText(t *testing.T) {
	long := strings.Repeat("é", 150) // 300 bytes: cut at 200
	bodies := []string{`{"kind":"order"}`, "line one\nline\ttwo\x00\u200b", long, "\xff\xfebin"}
	source, _, dlq := rabbitDeadLetters(t, bodies...)
	file := dlqRabbitPipeFile(t, rabbittest.URL(t), source, rabbittest.ManagementURL(t))

	code, stdout, stderr := runCLI(t, "dlq", "inspect", "-f", file)
	if code != 0 || !strings.Contains(stderr, "dead-letter queue "+dlq) {
		t.Fatalf("inspect: exit %d, stderr:\n%s", code, stderr)
	}
	time := `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`
	rest := `  x-death: queue ` + regexp.QuoteMeta(source) + `, reason rejected, count 1, first ` + time + `, last not recorded, from exchange \(default\) with routing keys ` + regexp.QuoteMeta(source) + `\n` +
		`  x-pipes-attempts: 3\n` +
		`  ErrorCode: "ClientError"\n` +
		`  pipes-pipe: "orders"\n\n`
	want := []string{
		`message m-0\n  body \(16 bytes\): "\{\\"kind\\":\\"order\\"\}"\n` + rest,
		`message m-1\n  body \(21 bytes\): "line one\\nline\\ttwo\\x00\\u200b"\n` + rest,
		`message m-2\n  body \(300 bytes\): "` + strings.Repeat("é", 100) + `" … 100 more bytes\n` + rest,
		`message m-3\n  body \(5 bytes\): \(binary\) fffe62696e\n` + rest,
	}
	for i, w := range want {
		if !regexp.MustCompile(`(?m)^` + w).MatchString(stdout) {
			t.Errorf("message m-%d is not shown as expected; want /%s/ in:\n%s", i, w, stdout)
		}
	}
	if strings.Contains(stdout, "x-first-death") || strings.Contains(stdout, `"data"`) {
		t.Errorf("the text view repeats the x-first-death headers or shows a record:\n%s", stdout)
	}

	code, stdout, _ = runCLI(t, "dlq", "inspect", "-f", file, "--format", "json", "--max", "1")
	if code != 0 || !strings.HasPrefix(stdout, `{"messageId":"m-0","eventSource":"aws:rmq"`) || strings.Count(stdout, "\n") != 1 {
		t.Errorf("--format json: exit %d, stdout:\n%s", code, stdout)
	}
	code, _, stderr = runCLI(t, "dlq", "inspect", "-f", file, "--format", "yaml")
	if code != 2 || !strings.Contains(stderr, "--format") {
		t.Errorf("--format yaml: exit %d, stderr:\n%s", code, stderr)
	}
	if n := rabbittest.Count(t, dlq); n != len(bodies) {
		t.Errorf("after inspect the dead-letter queue has %d messages, want %d", n, len(bodies))
	}

	// dlq redrive --dry-run gives each body as the records do (data, in
	// base64), and body only when it is text.
	code, stdout, stderr = runCLI(t, "dlq", "redrive", "-f", file, "--dry-run")
	if code != 0 {
		t.Fatalf("dry run: exit %d, stderr:\n%s", code, stderr)
	}
	bin := base64Of("\xff\xfebin")
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var e struct {
			MessageID string  `json:"messageId"`
			Body      *string `json:"body"`
			Data      string  `json:"data"`
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("dry run line %s: %v", l, err)
		}
		i := int(e.MessageID[len(e.MessageID)-1] - '0')
		if e.Data != base64Of(bodies[i]) || (e.Body == nil) != (i == 3) || (e.Body != nil && *e.Body != bodies[i]) {
			t.Errorf("dry run entry %s: want data %s and the body only when it is text", l, base64Of(bodies[i]))
		}
	}
	_, stdout, _ = runCLI(t, "dlq", "inspect", "-f", file, "--format", "json")
	if !strings.Contains(stdout, `"data":"`+bin+`"`) {
		t.Errorf("inspect --format json lacks data %s:\n%s", bin, stdout)
	}
}

func TestDLQRedriveOfRabbitMQKeepsWhatWasNotConfirmed(t *testing.T) {
	source, _, dlq := rabbitDeadLetters(t, `{"n":0}`, `{"n":1}`, `{"n":2}`)
	file := dlqRabbitPipeFile(t, rabbittest.URL(t), source, rabbittest.ManagementURL(t))
	missing := rabbittest.Name(t, "-missing")

	code, stdout, stderr := runCLI(t, "dlq", "redrive", "-f", file, "--to", missing)
	if code != 1 || strings.Count(stdout, `"outcome":"failed"`) != 3 || !strings.Contains(stdout, "unroutable") || !strings.Contains(stderr, "0 moved, 0 skipped by filter, 3 failed") {
		t.Fatalf("redrive to a missing queue: exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if n := rabbittest.Count(t, dlq); n != 3 {
		t.Fatalf("after failed publishes the dead-letter queue has %d messages, want 3", n)
	}

	code, stdout, stderr = runCLI(t, "dlq", "redrive", "-f", file, "--max", "2", "--rate", "0")
	if code != 0 || !strings.Contains(stderr, "2 moved") || strings.Count(stdout, "\n") != 2 {
		t.Fatalf("redrive --max 2: exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if got, left := bodiesOf(rabbittest.Get(t, source)), bodiesOf(rabbittest.Get(t, dlq)); got != `{"n":0} {"n":1}` || left != `{"n":2}` {
		t.Errorf("moved %s and left %s, want the first two moved", got, left)
	}
}

func TestDLQOfRabbitMQAsksForTheQueueWhenItCannotTell(t *testing.T) {
	mgmt := rabbittest.ManagementURL(t)
	source, dlx, dlq := rabbitDeadLetters(t)
	other := rabbittest.Name(t, "-other")
	rabbittest.DeclareQueue(t, other, rabbittest.QueueOptions{})
	if err := rabbittest.Channel(t).QueueBind(other, "", dlx, false, nil); err != nil {
		t.Fatal(err)
	}
	file := dlqRabbitPipeFile(t, rabbittest.URL(t), source, mgmt)
	off := dlqRabbitPipeFile(t, rabbittest.URL(t), source, "off")
	sqsFile := filepath.Join(t.TempDir(), "sqs.yaml")
	os.WriteFile(sqsFile, []byte("name: q\nsource: {type: sqs, queue_url: 'http://127.0.0.1:1/000000000000/q', region: us-east-1}\ntarget: {type: stdout}\n"), 0o644)
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"two queues bound to the dead-letter exchange are named", []string{"dlq", "inspect", "-f", file}, []string{"2 queues are bound", dlq, other, "--queue"}},
		{"redrive asks the same", []string{"dlq", "redrive", "-f", file, "--dry-run"}, []string{"2 queues are bound", "--queue"}},
		{"the management API off asks for the queue", []string{"dlq", "inspect", "-f", off}, []string{"management API is off", "--queue"}},
		{"--queue-url is for sqs", []string{"dlq", "inspect", "-f", file, "--queue-url", "http://x/q"}, []string{"--queue-url is for sqs"}},
		{"--queue is for rabbitmq", []string{"dlq", "inspect", "-f", sqsFile, "--queue", "q"}, []string{"--queue is for rabbitmq"}},
		{"the dead-letter queue itself as destination is refused", []string{"dlq", "redrive", "-f", file, "--queue", dlq, "--to", dlq}, []string{"dead-letter queue itself"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tt.args...)
			if code != 2 {
				t.Fatalf("exit %d, stderr %q; want exit 2", code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
		})
	}

	// --queue picks one of them.
	rabbittest.Publish(t, other, `{"n":9}`)
	code, stdout, stderr := runCLI(t, "dlq", "inspect", "-f", file, "--queue", other, "--format", "json")
	if code != 0 || !strings.Contains(stdout, base64Of(`{"n":9}`)) {
		t.Fatalf("inspect --queue: exit %d, stdout %s, stderr %s", code, stdout, stderr)
	}
}

// Relies on: the management API creating a user with a password and
// permissions on the default vhost (PUT /api/users, /api/permissions).
func TestDLQOfRabbitMQNeverPrintsThePassword(t *testing.T) {
	mgmt := rabbittest.ManagementURL(t)
	user, pw := "pipes-dlq-"+rand.Text()[:8], "pw-"+rand.Text()
	if code := managementCall(t, mgmt, http.MethodPut, "/api/users/"+user, map[string]string{"password": pw, "tags": "management"}); code >= 300 {
		t.Fatalf("creating user %s: HTTP %d", user, code)
	}
	t.Cleanup(func() { managementCall(t, mgmt, http.MethodDelete, "/api/users/"+user, nil) })
	if code := managementCall(t, mgmt, http.MethodPut, "/api/permissions/%2F/"+user, map[string]string{"configure": ".*", "write": ".*", "read": ".*"}); code >= 300 {
		t.Fatalf("granting %s: HTTP %d", user, code)
	}
	source, _, _ := rabbitDeadLetters(t, `{"n":0}`)
	host := strings.TrimPrefix(strings.TrimSuffix(rabbittest.URL(t), "/"), "amqp://guest:guest@")
	good := "amqp://" + user + ":" + url.QueryEscape(pw) + "@" + host + "/"
	bad := "amqp://" + user + ":" + url.QueryEscape(pw) + "x@" + host + "/"
	var seen []string
	for _, c := range []struct {
		file string
		args []string
	}{
		{dlqRabbitPipeFile(t, good, source, ""), []string{"dlq", "inspect"}},
		{dlqRabbitPipeFile(t, good, source, ""), []string{"dlq", "redrive", "--to", rabbittest.Name(t, "-missing")}},
		{dlqRabbitPipeFile(t, good, source, ""), []string{"dlq", "inspect", "--queue", rabbittest.Name(t, "-none")}},
		{dlqRabbitPipeFile(t, good, source, "http://127.0.0.1:1"), []string{"dlq", "inspect"}},
		{dlqRabbitPipeFile(t, bad, source, ""), []string{"dlq", "redrive"}},
	} {
		code, stdout, stderr := runCLI(t, append(c.args, "-f", c.file)...)
		seen = append(seen, fmt.Sprintf("%v: exit %d\n%s%s", c.args, code, stdout, stderr))
	}
	all := strings.Join(seen, "\n")
	if strings.Contains(all, pw) || strings.Contains(all, url.QueryEscape(pw)) {
		t.Fatalf("the password appears in the output:\n%s", all)
	}
	for _, want := range []string{`"outcome":"failed"`, "does not exist", "management API at http://127.0.0.1:1", "connecting to RabbitMQ"} {
		if !strings.Contains(all, want) {
			t.Errorf("the outputs lack %q:\n%s", want, all)
		}
	}
}

func managementCall(t *testing.T, base, method, path string, body any) int {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, base+path, rd) // also from a cleanup, after t.Context ends
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("guest", "guest")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("management API %s %s: %v", method, path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func base64Of(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
