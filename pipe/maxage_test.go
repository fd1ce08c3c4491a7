package pipe_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/retry"
	"github.com/pipesproject/pipes/source/memory"
)

// max_event_age holds through an outage (Lambda's
// MaximumRecordAgeInSeconds): an event held because its batch failed
// whole is, when it is next tried and fails again, too old to be retried,
// and that is a verdict: with on_exhausted: dead_letter it goes to the
// dead_letter target, rather than being held for as long as the target is
// down. Before, its exhausted failure still carried the whole-call mark
// and it was held again and again: the drain never ended.
func TestMaxEventAgeHoldsThroughAnOutage(t *testing.T) {
	b := memory.NewBroker()
	q := newQueue(t, b, "orders", memory.Options{VisibilityTimeout: 300 * time.Millisecond})
	send(t, q, bodies(20, `{"n":%d}`)...)
	down := pipe.TargetFunc(func(context.Context, []*pipe.Event) (pipe.Result, error) {
		return pipe.Result{}, errors.New("HTTP 503 Service Unavailable")
	})
	target := retry.Wrap(down, retry.Policy{MaxAttempts: 2, MinDelay: 10 * time.Millisecond, MaxDelay: 10 * time.Millisecond, MaxEventAge: 400 * time.Millisecond}, retry.Options{})
	var mu sync.Mutex
	var dead []*pipe.Event
	dlq := pipe.TargetFunc(func(_ context.Context, events []*pipe.Event) (pipe.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		dead = append(dead, events...)
		return pipe.Result{}, nil
	})
	metrics := pipe.NewMetrics(nil)
	start := time.Now()
	runDrain(t, pipe.Options{Name: "orders", Source: drainable{q}, Target: target, DeadLetter: dlq, DeadLetterOnExhausted: true,
		Metrics: metrics, BatchSize: 10, InitialConcurrency: 5, MaxConcurrency: 5})
	t.Logf("all dead-lettered %v after the send", time.Since(start).Round(time.Millisecond))
	mu.Lock()
	defer mu.Unlock()
	if len(dead) != 20 {
		t.Fatalf("%d messages dead-lettered, want all 20", len(dead))
	}
	for _, ev := range dead {
		reason := ""
		if v := ev.Attributes[pipe.DLQErrorMessage].StringValue; v != nil {
			reason = *v
		}
		if !strings.Contains(reason, "max_event_age") {
			t.Errorf("dead-lettered with %q, want the max_event_age reason", reason)
			break
		}
	}
	if got := testutil.ToFloat64(metrics.DeadLettered.WithLabelValues("orders")); got != 20 {
		t.Errorf("messages_dead_lettered_total = %v, want 20", got)
	}
}
