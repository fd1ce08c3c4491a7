package pipes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/internal/sqstest"
	"github.com/pipesproject/pipes/pipe"
)

// fakeAWSEnv checks that the AWS config chain has the static test
// credentials, as a user of an SQS-compatible server would (TestMain sets
// them for the whole binary: a parallel test cannot call t.Setenv).
func fakeAWSEnv(t *testing.T) {
	t.Helper()
	for _, kv := range fakeAWS {
		if os.Getenv(kv[0]) != kv[1] {
			t.Fatalf("%s is not the fake AWS environment TestMain sets", kv[0])
		}
	}
}

// record is the part of a Pipes SQS record the tests read.
type record struct {
	MessageID  string            `json:"messageId"`
	Body       string            `json:"body"`
	Attributes map[string]string `json:"attributes"`
}

// batchServer is a real HTTP target: it takes batches of records and
// answers batchItemFailures for the records whose body says "fail".
type batchServer struct {
	*httptest.Server
	mu        sync.Mutex
	delivered map[string]int // body → times delivered
	ok        map[string]int // body → times accepted
	delay     time.Duration
}

func newBatchServer(t *testing.T) *batchServer {
	s := &batchServer{delivered: map[string]int{}, ok: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var batch []record
		if err := json.NewDecoder(r.Body).Decode(&batch); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if s.delay > 0 {
			time.Sleep(s.delay)
		}
		var failures []map[string]string
		s.mu.Lock()
		for _, rec := range batch {
			s.delivered[rec.Body]++
			if strings.Contains(rec.Body, "fail") {
				failures = append(failures, map[string]string{"itemIdentifier": rec.MessageID})
				continue
			}
			s.ok[rec.Body]++
		}
		s.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"batchItemFailures": failures})
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *batchServer) counts() (delivered, ok map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delivered, ok = map[string]int{}, map[string]int{}
	for k, v := range s.delivered {
		delivered[k] = v
	}
	for k, v := range s.ok {
		ok[k] = v
	}
	return delivered, ok
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Both servers: a failed item comes back after its visibility timeout and
// the redrive policy moves it once it was received maxReceiveCount times;
// nothing in this pipe changes a message's visibility, so local-aws-sqs's
// counting of visibility changes as receives does not show.
func TestSQSPipeDeletesSuccessesOnceAndDeadLettersFailuresAfterMaxReceiveCount(t *testing.T) {
	t.Parallel()
	sqstest.Servers(t, func(t *testing.T, s sqstest.Server) {
		testSQSPipeDeletesSuccessesOnceAndDeadLettersFailuresAfterMaxReceiveCount(t, s)
	})
}

func testSQSPipeDeletesSuccessesOnceAndDeadLettersFailuresAfterMaxReceiveCount(t *testing.T, s sqstest.Server) {
	fakeAWSEnv(t)
	endpoint := sqstest.EndpointOf(t, s)
	client := sqstest.ClientOf(t, s)
	queueURL, dlqURL := sqstest.CreateQueue(t, client, sqstest.QueueOptions{VisibilityTimeout: 2 * time.Second, MaxReceiveCount: 3})
	var bodies []string
	for i := range 120 {
		switch {
		case i%20 == 7:
			bodies = append(bodies, fmt.Sprintf(`{"n":%d,"action":"fail"}`, i))
		case i%12 == 5:
			bodies = append(bodies, fmt.Sprintf(`{"n":%d,"skip":true}`, i))
		case i == 3:
			bodies = append(bodies, "plain text, not JSON")
		default:
			bodies = append(bodies, fmt.Sprintf(`{"n":%d}`, i))
		}
	}
	sqstest.SendBodies(t, client, queueURL, bodies...)
	target := newBatchServer(t)

	file := writeFile(t, "pipe.yaml", fmt.Sprintf(`
name: orders
source:
  type: sqs
  queue_url: %s
  endpoint: %s
  region: us-east-1
  wait_time: 1s
filter:
  patterns:
    - {"body": {"skip": [{"exists": false}]}}
    - {"body": ["plain text, not JSON"]}
target:
  type: http
  url: %s
  timeout: 5s
`, queueURL, endpoint, target.URL))
	specs, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	metrics := pipe.NewMetrics(nil)
	built, err := pipes.NewRegistry().Build(context.Background(), specs, pipes.Env{Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pipe.NewRunner(built...).Run(ctx) }()

	var dead []string
	waitFor(t, 60*time.Second, "6 messages in the dead-letter queue and the source queue empty", func() bool {
		dead = append(dead, sqstest.DrainBodies(t, client, dlqURL)...)
		visible, inflight := sqstest.Count(t, client, queueURL)
		return len(dead) >= 6 && visible+inflight == 0
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	delivered, ok := target.counts()
	skipped := 0
	for _, b := range bodies {
		failing := strings.Contains(b, "fail")
		switch {
		case strings.Contains(b, "skip"):
			skipped++
			if delivered[b] != 0 {
				t.Errorf("%s was filtered out but delivered %d times", b, delivered[b])
			}
		case failing && delivered[b] != 3:
			t.Errorf("%s delivered %d times, want 3 (maxReceiveCount) before the dead-letter queue", b, delivered[b])
		case !failing && ok[b] != 1:
			t.Errorf("%s accepted %d times, want exactly once", b, ok[b])
		}
	}
	if len(dead) != 6 {
		t.Errorf("dead-letter queue got %d messages (%v), want the 6 failing ones", len(dead), dead)
	}
	for _, b := range dead {
		if !strings.Contains(b, "fail") {
			t.Errorf("%s was dead-lettered but never failed", b)
		}
	}
	if n := testutil.ToFloat64(metrics.Filtered.WithLabelValues("orders")); int(n) != skipped {
		t.Errorf("filtered counter = %v, want %d (deleted, never delivered)", n, skipped)
	}
	if n := testutil.ToFloat64(metrics.APICalls.WithLabelValues("orders", "DeleteMessageBatch")); n == 0 || n > 40 {
		t.Errorf("DeleteMessageBatch calls = %v for 114 deletes, want batched calls", n)
	}
}

// Both servers: drain mode reads visible and in-flight counts (local-aws-sqs
// counts in-flight messages in both, which only delays the stop).
func TestSQSPipeInDrainModeStopsOnceTheQueueIsEmpty(t *testing.T) {
	t.Parallel()
	sqstest.Servers(t, func(t *testing.T, s sqstest.Server) {
		testSQSPipeInDrainModeStopsOnceTheQueueIsEmpty(t, s)
	})
}

func testSQSPipeInDrainModeStopsOnceTheQueueIsEmpty(t *testing.T, s sqstest.Server) {
	fakeAWSEnv(t)
	endpoint := sqstest.EndpointOf(t, s)
	client := sqstest.ClientOf(t, s)
	queueURL, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{VisibilityTimeout: 2 * time.Second, MaxReceiveCount: 5})
	var bodies []string
	for i := range 60 {
		bodies = append(bodies, fmt.Sprintf(`{"n":%d}`, i))
	}
	bodies = append(bodies, `{"n":"once","action":"fail"}`)
	sqstest.SendBodies(t, client, queueURL, bodies...)
	target := newBatchServer(t)
	file := writeFile(t, "pipe.yaml", fmt.Sprintf(`
name: drain
source: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1, wait_time: 1s}
target: {type: http, url: %s}
`, queueURL, endpoint, target.URL))
	specs, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	built, err := pipes.NewRegistry().Build(context.Background(), specs, pipes.Env{Drain: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := pipe.NewRunner(built...).Run(ctx); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatal("the pipe did not stop by itself once the queue was empty")
	}
	// The failing message keeps coming back until the redrive policy moves
	// it: drain waits for that, since it counts messages in flight too.
	delivered, ok := target.counts()
	if len(ok) != 60 || delivered[`{"n":"once","action":"fail"}`] != 5 {
		t.Fatalf("accepted %d of 60, failing one delivered %d times (want 5)", len(ok), delivered[`{"n":"once","action":"fail"}`])
	}
}
