package pipes_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source/memory"
)

func TestTargetRetriesHappenInTheRunnerAndExhaustedItemsAreDeadLettered(t *testing.T) {
	var mu sync.Mutex
	tries := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		body := string(b)
		mu.Lock()
		tries[body]++
		n := tries[body]
		mu.Unlock()
		switch {
		case strings.Contains(body, "flaky") && n < 3:
			http.Error(w, "try again", http.StatusServiceUnavailable)
		case strings.Contains(body, "down"):
			http.Error(w, "still down", http.StatusBadGateway)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}))
	defer srv.Close()
	var dead []*pipe.Event
	reg := pipes.NewRegistry()
	reg.MustRegisterFunc("dlq", pipe.TargetFunc(func(_ context.Context, events []*pipe.Event) (pipe.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		dead = append(dead, events...)
		return pipe.Result{}, nil
	}))
	specs, err := config.Loader{}.Parse("retry.yaml", []byte(fmt.Sprintf(`
name: retrying
source: {type: memory, wait_time: 50ms, visibility_timeout: 30s}
target:
  type: http
  url: %s
  batch: false
  input_template: <$.body>
  retry: {max_attempts: 3, backoff: exponential, min_delay: 10ms, max_delay: 50ms}
dead_letter: {type: func, func: dlq, on_exhausted: dead_letter}
`, srv.URL)))
	if err != nil {
		t.Fatal(err)
	}
	broker := memory.NewBroker()
	built, err := reg.Build(context.Background(), specs, pipes.Env{Broker: broker, Drain: true})
	if err != nil {
		t.Fatal(err)
	}
	q, _ := broker.Lookup("retrying")
	for _, b := range []string{`{"id":"fine"}`, `{"id":"flaky"}`, `{"id":"down"}`} {
		q.Send(context.Background(), memory.SendInput{Body: b})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := pipe.NewRunner(built...).Run(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if tries[`{"id":"flaky"}`] != 3 || tries[`{"id":"down"}`] != 3 || tries[`{"id":"fine"}`] != 1 {
		t.Errorf("tries = %v, want flaky and down 3 times (in the runner), fine once", tries)
	}
	if len(dead) != 1 || dead[0].Message.Body != `{"id":"down"}` {
		t.Fatalf("dead-lettered %d events, want only the one that stayed down", len(dead))
	}
	a := dead[0].Attributes
	if got := *a[pipe.DLQErrorCode].StringValue; got != "RetriesExhausted" && !strings.Contains(got, "502") {
		t.Errorf("ErrorCode = %q", got)
	}
	if got := *a[pipe.DLQAttempts].StringValue; got != "3" {
		t.Errorf("pipes-attempts = %q, want 3", got)
	}
	if st := q.Stats(); st.Received != 3 || st.Deleted != 3 {
		t.Errorf("queue stats %+v: want each message received once and deleted (retries stay in the runner)", st)
	}
}
