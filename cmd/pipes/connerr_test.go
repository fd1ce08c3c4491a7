package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/sqstest"
)

// sqsPipeline writes a pipeline file of one sqs pipe reading queueURL at
// endpoint; queue_url is on line 5 and endpoint on line 6, column 13.
func sqsPipeline(t *testing.T, queueURL, endpoint string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "pipeline.yaml")
	text := fmt.Sprintf(`name: conn
source:
  type: sqs
  region: us-east-1
  queue_url: %s
  endpoint: %s
  wait_time: 1s
target:
  type: stdout
`, queueURL, endpoint)
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

func fakeAWSCredentials(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDPIPESTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "pipes-test-secret")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_ENDPOINT_URL_SQS", "")
}

// freeAddr is a local address where nothing listens.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// A problem opening an SQS source is one line: where the file names the
// endpoint or the queue, what failed and what to check; the SDK's text
// ("operation error SQS: ...") only at debug level. An unreachable
// endpoint is retried; a missing queue and access denied stop a --drain
// at once (exit 1).
func TestSQSConnectionProblemsAreOneLocatedLine(t *testing.T) {
	fakeAWSCredentials(t)
	t.Run("unreachable endpoint", func(t *testing.T) {
		endpoint := "http://" + freeAddr(t)
		file := sqsPipeline(t, endpoint+"/123456789012/orders", endpoint)
		for _, level := range []string{"info", "debug"} {
			ctx, cancel := context.WithCancel(context.Background())
			var stderr syncBuffer
			done := make(chan int, 1)
			go func() {
				done <- run(ctx, []string{"run", "-f", file, "--metrics-addr", "", "--log-level", level}, nil, &bytes.Buffer{}, &stderr)
			}()
			want := file + ":6:13: cannot reach the SQS endpoint " + endpoint + " (connection refused): check that the server is running there and the source's `endpoint` (or AWS_ENDPOINT_URL_SQS)"
			waitUntil(t, 60*time.Second, "the connection error logged", func() bool { return strings.Contains(stderr.String(), "opening the source failed") })
			cancel()
			<-done
			out := stderr.String()
			if !strings.Contains(out, want) {
				t.Errorf("--log-level %s: stderr lacks %q:\n%s", level, want, out)
			}
			if sdk := strings.Contains(out, "operation error SQS"); sdk != (level == "debug") {
				t.Errorf("--log-level %s: the SDK's text shown: %v, want it only at debug:\n%s", level, sdk, out)
			}
		}
	})
	t.Run("missing queue", func(t *testing.T) {
		endpoint := sqstest.Endpoint(t)
		file := sqsPipeline(t, endpoint+"/123456789012/pipes-no-such-queue", endpoint)
		var stderr bytes.Buffer
		start := time.Now()
		code := run(context.Background(), []string{"run", "-f", file, "--metrics-addr", "", "--drain"}, nil, &bytes.Buffer{}, &stderr)
		want := file + ":5:14: SQS queue " + endpoint + "/123456789012/pipes-no-such-queue does not exist at " + endpoint + ": create it with `pipes send --create`, or check `queue_url`"
		if code != 1 || !strings.Contains(stderr.String(), want) || strings.Contains(stderr.String(), "operation error") {
			t.Errorf("exit %d, stderr:\n%s\nwant 1 and %q, without the SDK's text", code, stderr.String(), want)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("a --drain took %s to give up on a missing queue, want at once", d)
		}
	})
	t.Run("access denied", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.Header().Set("x-amzn-query-error", "AccessDenied;Sender")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"__type":"com.amazonaws.sqs#AccessDenied","message":"User: arn:aws:iam::123456789012:user/ci is not authorized to perform: sqs:getqueueattributes"}`)
		}))
		defer srv.Close()
		file := sqsPipeline(t, srv.URL+"/123456789012/orders", srv.URL)
		var stderr bytes.Buffer
		code := run(context.Background(), []string{"run", "-f", file, "--metrics-addr", "", "--drain"}, nil, &bytes.Buffer{}, &stderr)
		want := file + ":5:14: access to SQS queue " + srv.URL + "/123456789012/orders is denied: check that the credentials' role or user may call"
		if code != 1 || !strings.Contains(stderr.String(), want) || strings.Contains(stderr.String(), "operation error") {
			t.Errorf("exit %d, stderr:\n%s\nwant 1 and %q, without the SDK's text", code, stderr.String(), want)
		}
	})
}

// Without --drain a missing queue is retried with a growing wait (5 s,
// then 10 s, ... up to a minute), said as an ERROR once and as a WARN
// when the same error comes again.
func TestAMissingQueueIsRetriedWithBackoffAndOneError(t *testing.T) {
	fakeAWSCredentials(t)
	endpoint := sqstest.Endpoint(t)
	file := sqsPipeline(t, endpoint+"/123456789012/pipes-no-such-queue", endpoint)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"run", "-f", file, "--metrics-addr", ""}, nil, &bytes.Buffer{}, &stderr)
	}()
	waitUntil(t, 60*time.Second, "a second try", func() bool { return strings.Contains(stderr.String(), "opening the source still fails") })
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("exit %d", code)
	}
	out := stderr.String()
	if n := strings.Count(out, "level=ERROR"); n != 1 || !strings.Contains(out, "retry_in=5s") || !strings.Contains(out, "level=WARN msg=\"opening the source still fails, retrying\"") || !strings.Contains(out, "retry_in=10s") {
		t.Errorf("want one ERROR (retry_in=5s), then a WARN (retry_in=10s); got %d ERRORs:\n%s", n, out)
	}
}

// A RabbitMQ source whose broker cannot be reached says so in one line,
// at the file's line of url, without the password.
func TestRabbitMQUnreachableBrokerIsOneLocatedLine(t *testing.T) {
	addr := freeAddr(t)
	file := filepath.Join(t.TempDir(), "pipeline.yaml")
	text := "name: rconn\nsource:\n  type: rabbitmq\n  url: amqp://guest:pipes-s3cret@" + addr + "/\n  queue: orders\n  management_url: \"off\"\ntarget:\n  type: stdout\n"
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"run", "-f", file, "--metrics-addr", "", "--log-level", "debug"}, nil, &bytes.Buffer{}, &stderr)
	}()
	waitUntil(t, 60*time.Second, "the connection error logged", func() bool { return strings.Contains(stderr.String(), "opening the source failed") })
	cancel()
	<-done
	out := stderr.String()
	want := file + ":4:8: cannot reach the RabbitMQ broker at " + addr + " (connection refused): check that it is running there and the host and port in the source's `url`"
	if !strings.Contains(out, want) {
		t.Errorf("stderr lacks %q:\n%s", want, out)
	}
	if strings.Contains(out, "pipes-s3cret") {
		t.Errorf("the password is in the output:\n%s", out)
	}
}
