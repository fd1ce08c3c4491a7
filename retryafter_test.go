package pipes_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/internal/rabbittest"
	"github.com/pipesproject/pipes/internal/sqstest"
)

// retryAfterServer is an http target (batch: false, one request per
// record) that answers the first request of the record whose body holds
// "wait" with 503 and Retry-After: 2, and takes every other request. It
// notes when each request for that record came.
func retryAfterServer(t *testing.T, read func(map[string]any) (string, int)) (*httptest.Server, func() []time.Time) {
	var mu sync.Mutex
	var calls []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rec map[string]any
		if err := json.NewDecoder(r.Body).Decode(&rec); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if body, _ := read(rec); !strings.Contains(body, "wait") {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, time.Now())
		if len(calls) == 1 {
			w.Header().Set("Retry-After", "2")
			http.Error(w, "busy", http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), calls...)
	}
}

// checkRetriedAfter asserts that the record was tried twice, the second
// time at least the 2 s the target asked for after the first, and sooner
// than the source would have tried it again on its own (within).
func checkRetriedAfter(t *testing.T, calls []time.Time, within time.Duration) {
	t.Helper()
	if len(calls) != 2 {
		t.Fatalf("the record was tried %d times, want 2", len(calls))
	}
	gap := calls[1].Sub(calls[0])
	t.Logf("tried again after %v (Retry-After: 2)", gap.Round(time.Millisecond))
	if gap < 1900*time.Millisecond || gap >= within {
		t.Errorf("tried again after %v, want about the 2 s of Retry-After (at least 1.9 s, less than %v)", gap, within)
	}
}

// A target's ItemFailure.RetryAfter (here the http target's, from a 503's
// Retry-After: 2) holds that one record back for the time asked, on each
// source kind: SQS by ChangeMessageVisibility (fauxqs: receive counts and
// visibility changes as SQS; the queue's visibility timeout is 30 s, so a
// retry in about 2 s is the RetryAfter's), RabbitMQ quorum (x-delivery-limit
// 3) and classic with max_receive_count 3 by the delayed retry (without
// RetryAfter a failed item comes back at once); the other records go
// through and nothing is dead-lettered. On a classic queue with a DLX and
// no retries counted a failure is final, as for any failure: the record is
// dead-lettered after its one try.
func TestRetryAfterHoldsTheItemBackOnEverySource(t *testing.T) {
	t.Parallel()
	bodies := []string{`{"n":1}`, `{"n":2,"wait":true}`, `{"n":3}`}
	t.Run("sqs", func(t *testing.T) {
		t.Parallel()
		fakeAWSEnv(t)
		endpoint := sqstest.EndpointOf(t, sqstest.Fauxqs)
		client := sqstest.ClientOf(t, sqstest.Fauxqs)
		queueURL, dlqURL := sqstest.CreateQueue(t, client, sqstest.QueueOptions{VisibilityTimeout: 30 * time.Second, MaxReceiveCount: 3})
		sqstest.SendBodies(t, client, queueURL, bodies...)
		srv, calls := retryAfterServer(t, sqsRecord)
		built := buildPipe(t, pipes.NewRegistry(), pipes.Env{Drain: true}, fmt.Sprintf(`
name: retry-after
source: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1, wait_time: 1s, batch_size: 10}
target: {type: http, url: %s, batch: false}
`, queueURL, endpoint, srv.URL))
		runUntilDrained(t, time.Minute, built)
		checkRetriedAfter(t, calls(), 20*time.Second)
		if dead := sqstest.DrainBodies(t, client, dlqURL); len(dead) != 0 {
			t.Errorf("dead-lettered %q, want none", dead)
		}
	})
	url := rabbittest.URL(t)
	for _, kind := range []string{"quorum-limit", "max-receive-count", "classic-dlx"} {
		t.Run("rabbitmq-"+kind, func(t *testing.T) {
			t.Parallel()
			dlx, dlq := rabbittest.DeclareDLX(t)
			q := rabbittest.Name(t, "")
			opts := rabbittest.QueueOptions{DeadLetterExchange: dlx}
			extra := ""
			switch kind {
			case "quorum-limit":
				opts.Quorum, opts.DeliveryLimit = true, 3
			case "max-receive-count":
				extra = "max_receive_count: 3"
			}
			rabbittest.DeclareQueue(t, q, opts)
			rabbittest.Publish(t, q, bodies...)
			srv, calls := retryAfterServer(t, rabbitRecord)
			built := buildPipe(t, pipes.NewRegistry(), pipes.Env{Drain: true}, fmt.Sprintf(`
name: retry-after
source: {type: rabbitmq, url: %s, queue: %s, batch_size: 10, %s}
target: {type: http, url: %s, batch: false}
`, url, q, extra, srv.URL))
			runUntilDrained(t, time.Minute, built)
			var dead []string
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) {
				for _, d := range rabbittest.Get(t, dlq) {
					dead = append(dead, string(d.Body))
				}
				if kind != "classic-dlx" || len(dead) > 0 {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if kind == "classic-dlx" {
				// A classic queue with a dead-letter exchange and no
				// retries counted: every failure is final (the queue's
				// rule), RetryAfter or not.
				if got := calls(); len(got) != 1 || len(dead) != 1 || !strings.Contains(dead[0], "wait") {
					t.Errorf("tried %d times, dead-lettered %q; want one try and the record dead-lettered", len(got), dead)
				}
			} else {
				checkRetriedAfter(t, calls(), 20*time.Second)
				if len(dead) != 0 {
					t.Errorf("dead-lettered %q, want none", dead)
				}
			}
			if left := rabbittest.Count(t, q); left != 0 {
				t.Errorf("%d messages left in the queue, want 0", left)
			}
		})
	}
}
