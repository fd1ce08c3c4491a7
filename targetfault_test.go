package pipes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/internal/sqstest"
	"github.com/pipesproject/pipes/pipe"
)

// faultyTarget fails the first delivery of each message the way its body
// says, then accepts it. It also checks that a message is never delivered
// twice at the same time (the heartbeat must keep a slow one invisible).
type faultyTarget struct {
	*httptest.Server
	mu       sync.Mutex
	attempts map[string]int // message id → deliveries
	accepted map[string]int // fault kind → acceptances
	inFlight map[string]bool
	overlaps int
}

func newFaultyTarget(t *testing.T) *faultyTarget {
	f := &faultyTarget{attempts: map[string]int{}, accepted: map[string]int{}, inFlight: map[string]bool{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *faultyTarget) serve(w http.ResponseWriter, r *http.Request) {
	var batch []record
	if err := json.NewDecoder(r.Body).Decode(&batch); err != nil || len(batch) != 1 {
		http.Error(w, "want one record", http.StatusBadRequest)
		return
	}
	rec := batch[0]
	var body struct{ Fault string }
	json.Unmarshal([]byte(rec.Body), &body)
	f.mu.Lock()
	if f.inFlight[rec.MessageID] {
		f.overlaps++
	}
	f.inFlight[rec.MessageID] = true
	f.attempts[rec.MessageID]++
	first := f.attempts[rec.MessageID] == 1
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight[rec.MessageID] = false
		f.mu.Unlock()
	}()
	fault := body.Fault
	if !first {
		fault = ""
	}
	switch fault {
	case "timeout":
		select {
		case <-time.After(10 * time.Second):
		case <-r.Context().Done():
		}
		return
	case "reset":
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	case "500":
		http.Error(w, "boom", http.StatusInternalServerError)
		return
	case "429":
		http.Error(w, "slow down", http.StatusTooManyRequests)
		return
	case "malformed":
		fmt.Fprint(w, `{"batchItemFailures": [`)
		return
	case "unknown-id":
		fmt.Fprint(w, `{"batchItemFailures": [{"itemIdentifier": "not-in-this-batch"}]}`)
		return
	case "slow":
		// Longer than the 2 s visibility timeout, within the 8 s target
		// timeout: the heartbeat must keep the message invisible, and it
		// succeeds at the first delivery.
		time.Sleep(5 * time.Second)
	}
	f.mu.Lock()
	f.accepted[body.Fault]++
	f.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// Both servers: failed items come back after their visibility timeout
// with a maxReceiveCount far above what the faults need.
func TestTargetFaultsAreRetriedThroughTheQueueAndNothingIsLostOrDuplicated(t *testing.T) {
	t.Parallel()
	sqstest.Servers(t, func(t *testing.T, s sqstest.Server) {
		testTargetFaultsAreRetriedThroughTheQueueAndNothingIsLostOrDuplicated(t, s)
	})
}

func testTargetFaultsAreRetriedThroughTheQueueAndNothingIsLostOrDuplicated(t *testing.T, s sqstest.Server) {
	fakeAWSEnv(t)
	endpoint := sqstest.EndpointOf(t, s)
	client := sqstest.ClientOf(t, s)
	// maxReceiveCount is high because the local server (unlike SQS) counts
	// every heartbeat's ChangeMessageVisibility as a receive.
	queueURL, dlqURL := sqstest.CreateQueue(t, client, sqstest.QueueOptions{VisibilityTimeout: 2 * time.Second, MaxReceiveCount: 50})
	faults := []string{"timeout", "reset", "500", "429", "malformed", "unknown-id", "slow", "none"}
	var bodies []string
	for _, f := range faults {
		bodies = append(bodies, fmt.Sprintf(`{"fault":%q}`, f))
	}
	sqstest.SendBodies(t, client, queueURL, bodies...)
	target := newFaultyTarget(t)
	file := writeFile(t, "pipe.yaml", fmt.Sprintf(`
name: faults
source: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1, wait_time: 1s, batch_size: 1}
target: {type: http, url: %s, timeout: 8s}
`, queueURL, endpoint, target.URL))
	specs, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	built, err := pipes.NewRegistry().Build(context.Background(), specs, pipes.Env{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pipe.NewRunner(built...).Run(ctx) }()
	waitFor(t, 60*time.Second, "every message accepted once and the queue empty", func() bool {
		target.mu.Lock()
		n := len(target.accepted)
		target.mu.Unlock()
		if n < len(faults) {
			return false
		}
		visible, inflight := sqstest.Count(t, client, queueURL)
		return visible+inflight == 0
	})
	cancel()
	<-done
	target.mu.Lock()
	defer target.mu.Unlock()
	for _, f := range faults {
		if target.accepted[f] != 1 {
			t.Errorf("message with fault %s accepted %d times, want once", f, target.accepted[f])
		}
	}
	if target.overlaps != 0 {
		t.Errorf("%d deliveries of a message while another of it was in flight", target.overlaps)
	}
	for id, n := range target.attempts {
		if n > 2 {
			t.Errorf("message %s delivered %d times, want at most 2 (one fault, one success)", id, n)
		}
	}
	if dead := sqstest.DrainBodies(t, client, dlqURL); len(dead) > 0 {
		t.Errorf("dead-lettered %v, want nothing", dead)
	}
}
