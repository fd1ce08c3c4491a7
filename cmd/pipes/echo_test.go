package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/pipesproject/pipes/internal/otlptest"
	"github.com/pipesproject/pipes/internal/sqstest"
)

// encodingsOf are the forms a server may echo secret in, computed here
// (not by the scrubber) so that the test says what "every encoding" is:
// raw, percent-escaped, JSON-escaped, base64 standard and URL-safe, padded
// and raw, and the characters that encode the secret from the first whole
// 3-byte group on when it sits inside a longer base64-encoded text, at
// each of the three offsets it may start at. Its first and last 8 bytes
// stand for a half-redacted secret.
func encodingsOf(secret string) []string {
	quoted, _ := json.Marshal(secret)
	b := []byte(secret)
	out := []string{secret, secret[:8], secret[len(secret)-8:], url.QueryEscape(secret), url.PathEscape(secret), string(quoted[1 : len(quoted)-1])}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		out = append(out, enc.EncodeToString(b))
	}
	for skip := range 3 {
		part := b[skip:]
		part = part[:len(part)/3*3]
		out = append(out, base64.RawStdEncoding.EncodeToString(part), base64.RawURLEncoding.EncodeToString(part))
	}
	return out
}

// deadLettered receives every visible message of the queue with all its
// message attributes, and gives each as text (attributes, then body).
func deadLettered(t *testing.T, c *sqs.Client, queueURL string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []string
	for {
		got, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10,
			MessageAttributeNames: []string{"All"}, VisibilityTimeout: 60})
		if err != nil {
			t.Fatalf("receiving the dead letters: %v", err)
		}
		if len(got.Messages) == 0 {
			return out
		}
		for _, m := range got.Messages {
			var sb strings.Builder
			for name, a := range m.MessageAttributes {
				fmt.Fprintf(&sb, "%s=%s\n", name, aws.ToString(a.StringValue))
			}
			out = append(out, sb.String()+aws.ToString(m.Body))
		}
	}
}

// TestEchoedSecretsAreRedactedInEveryEncodingEverywhere: an http target
// with `Authorization: Bearer ${TOKEN}` and `X-Api-Key: ${APIKEY}` (real
// net/http servers in the test) answers 400 echoing a secret, one
// encoding per row. The pipe reads a memory queue; its dead_letter target
// is an sqs queue of the local SQS-compatible server, so that the
// dead-lettered message's attributes (ErrorMessage) can be read back. No
// encoding of either secret appears in the JSON or text logs,
// the status page (HTML) or /api/pipes/NAME/failures, the dead-lettered
// message (its ErrorMessage attribute, its headers) or the spans (status,
// attributes, events) the in-process OTLP receiver got, while each of
// those shows the 400.
func TestEchoedSecretsAreRedactedInEveryEncodingEverywhere(t *testing.T) {
	const token = "sk-live/0123+4567<abc>&x" // escaped differently by URLs and JSON
	const apiKey = "k3y-9876543210-fedcba"
	b64 := base64.StdEncoding.EncodeToString
	bearer := func(r *http.Request) string { return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") }
	// inside is the token inside a JSON document base64-encoded, starting
	// at offset (len(prefix) % 3) of a group.
	inside := func(prefix string) func(*http.Request) string {
		return func(r *http.Request) string {
			return "session " + b64([]byte(prefix+bearer(r)+`","scope":"write"}`))
		}
	}
	tests := []struct {
		name   string
		answer func(r *http.Request) string
	}{
		{"raw", func(r *http.Request) string { return "invalid token " + bearer(r) }},
		{"Bearer-prefixed", func(r *http.Request) string { return "denied for " + r.Header.Get("Authorization") }},
		{"query-escaped", func(r *http.Request) string { return "bad ?token=" + url.QueryEscape(bearer(r)) }},
		{"path-escaped", func(r *http.Request) string { return "no such /keys/" + url.PathEscape(bearer(r)) }},
		{"JSON-embedded", func(r *http.Request) string {
			b, _ := json.Marshal(map[string]string{"error": "bad token " + bearer(r)})
			return string(b)
		}},
		{"base64 standard, padded", func(r *http.Request) string { return "token b64 " + b64([]byte(bearer(r))) }},
		{"base64 standard, raw", func(r *http.Request) string {
			return "token b64 " + base64.RawStdEncoding.EncodeToString([]byte(bearer(r)))
		}},
		{"base64 URL-safe, padded", func(r *http.Request) string {
			return "token b64 " + base64.URLEncoding.EncodeToString([]byte(bearer(r)))
		}},
		{"base64 URL-safe, raw", func(r *http.Request) string {
			return "token b64 " + base64.RawURLEncoding.EncodeToString([]byte(bearer(r)))
		}},
		{"the whole header value base64-encoded", func(r *http.Request) string { return "got " + b64([]byte(r.Header.Get("Authorization"))) }},
		{"base64 inside a longer text, offset 0", inside(`{"token":`)},
		{"base64 inside a longer text, offset 1", inside(`{"token":"`)},
		{"base64 inside a longer text, offset 2", inside(`{"token": "`)},
		{"the API key base64-encoded", func(r *http.Request) string { return "key b64 " + b64([]byte(r.Header.Get("X-Api-Key"))) }},
	}
	forbidden := append(encodingsOf(token), encodingsOf(apiKey)...)
	forbidden = append(forbidden, encodingsOf("Bearer "+token)...)
	endpoint := sqstest.Endpoint(t)
	client := sqstest.Client(t)
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "AKIDPIPESTEST", "AWS_SECRET_ACCESS_KEY": "pipes-test-secret", "AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"} {
		t.Setenv(k, v) // for the in-process run
	}
	t.Setenv("PIPES_TEST_ECHO_TOKEN", token)
	t.Setenv("PIPES_TEST_ECHO_APIKEY", apiKey)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				http.Error(w, tt.answer(r), http.StatusBadRequest)
			}))
			defer target.Close()
			dlq, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{})
			rcv := otlptest.Start(t)
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte(`{"body": {"n": 1}}`+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(dir, "pipeline.yaml")
			if err := os.WriteFile(file, []byte(fmt.Sprintf(`name: echoed
source: {type: memory, preload: in.jsonl, wait_time: 200ms, visibility_timeout: 30s}
target:
  type: http
  url: %s
  headers: {Authorization: "Bearer ${PIPES_TEST_ECHO_TOKEN}", X-Api-Key: "${PIPES_TEST_ECHO_APIKEY}"}
dead_letter: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1}
logging: {level: trace, include_execution_data: true}
`, target.URL, dlq, endpoint)), 0o600); err != nil {
				t.Fatal(err)
			}
			check := func(what, text string) {
				t.Helper()
				for _, f := range forbidden {
					if strings.Contains(text, f) {
						t.Errorf("%s hold %q, a form of a secret:\n%s", what, f, text)
						return
					}
				}
				if !strings.Contains(text, "400") {
					t.Errorf("%s do not show the 400:\n%s", what, text)
				}
			}

			// JSON logs, the status page, the dead letter and the spans, from
			// one running process.
			p := startRunner(t, file, "--log-format", "json", "--log-level", "debug", "--ui", "127.0.0.1:0", "--otlp-endpoint", rcv.URL)
			m := regexp.MustCompile(`"msg":"serving the status page","addr":"([^"]+)"`).FindStringSubmatch(p.stderr.String())
			if m == nil {
				t.Fatalf("no status page address in the log:\n%s", p.stderr)
			}
			waitUntil(t, 20*time.Second, "the dead letter", func() bool {
				visible, _ := sqstest.Count(t, client, dlq)
				return visible > 0
			})
			base := "http://" + m[1]
			var failures string
			waitUntil(t, 10*time.Second, "the failure on the status page", func() bool {
				_, failures = httpGet(t, base+"/api/pipes/echoed/failures")
				return strings.Contains(failures, "400")
			})
			check("/api/pipes/echoed/failures", failures)
			for _, path := range []string{"/pipes/echoed", "/pipes/echoed/failures/1"} {
				code, page := httpGet(t, base+path)
				if code != http.StatusOK {
					t.Fatalf("GET %s: %d", path, code)
				}
				check(path, page)
			}
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if err := p.wait(); err != nil {
				t.Fatalf("exit: %v\n%s", err, p.stderr)
			}
			check("the JSON logs", p.stderr.String())
			var spans []string
			for _, s := range rcv.Spans() {
				text, err := protojsonText(s)
				if err != nil {
					t.Fatal(err)
				}
				spans = append(spans, text)
			}
			check("the spans", strings.Join(spans, "\n"))

			// Text logs, from a run to the end of the queue.
			code, _, stderr := runCLI(t, "run", "--drain", "--metrics-addr", "", "--log-level", "debug", "-f", file)
			if code != 0 {
				t.Fatalf("pipes run exited %d:\n%s", code, stderr)
			}
			if !strings.Contains(stderr, "level=") {
				t.Fatalf("the logs are not text:\n%s", stderr)
			}
			check("the text logs", stderr)

			dead := deadLettered(t, client, dlq)
			if len(dead) != 2 {
				t.Fatalf("%d dead letters, want one per run (2):\n%s", len(dead), strings.Join(dead, "\n"))
			}
			for _, d := range dead {
				check("the dead-lettered message", d)
				if !regexp.MustCompile(`(?m)^ErrorMessage=.*\[redacted\]`).MatchString(d) {
					t.Errorf("the dead-lettered message has no ErrorMessage showing the redaction:\n%s", d)
				}
			}
		})
	}
}
