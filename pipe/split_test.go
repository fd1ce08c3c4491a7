package pipe_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/source/memory"
)

// unwrappingSource stands for a source that unwraps bodies itself, as the
// SQS source does with S3 payloads: "split:a,b,c" becomes a message of
// three records, "test-event" one of none, "broken" one it could not
// unwrap. It remembers what the settler told it was deleted
// (pipe.AckObserver).
type unwrappingSource struct {
	drainable
	mu    sync.Mutex
	acked []string // bodies
}

func (s *unwrappingSource) Receive(ctx context.Context, max int) ([]*source.Message, error) {
	msgs, err := s.drainable.Receive(ctx, max)
	for _, m := range msgs {
		switch {
		case strings.HasPrefix(m.Body, "split:"):
			m.Split = []*source.Message{}
			for _, part := range strings.Split(strings.TrimPrefix(m.Body, "split:"), ",") {
				m.Split = append(m.Split, &source.Message{MessageID: m.MessageID, ReceiptHandle: m.ReceiptHandle, Body: part, Attributes: m.Attributes})
			}
		case m.Body == "test-event":
			m.Split = []*source.Message{}
		case m.Body == "broken":
			m.UnwrapErr = pipe.Permanent(errors.New("the payload is gone"))
		}
	}
	return msgs, err
}

func (s *unwrappingSource) Acked(_ context.Context, msgs []*source.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		s.acked = append(s.acked, m.Body)
	}
}

func (s *unwrappingSource) ackedBodies() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.acked)
	slices.Sort(out)
	return out
}

// A message of several records succeeds only when all do: one failing
// brings the message back whole; one of none is deleted unseen; a message
// the source could not unwrap fails alone at stage "unwrap" (here
// dead-lettered: its error is permanent). The source hears of the deletes
// of delivered, filtered and empty messages, never of the dead-lettered
// one, though the settler deletes it too.
func TestSplitMessagesSucceedWholeAndTheSourceHearsOnlyOfRealDeletes(t *testing.T) {
	b := memory.NewBroker()
	q := newQueue(t, b, "s3", memory.Options{VisibilityTimeout: 200 * time.Millisecond})
	send(t, q, "split:a,b,c", "split:d", "test-event", "broken", "plain", "split:skip,skip2")
	src := &unwrappingSource{drainable: drainable{q}}
	var failedB bool
	rec := &recorder{fail: func(ev *pipe.Event) bool {
		if ev.Message.Body == "b" && !failedB {
			failedB = true
			return true
		}
		return false
	}}
	dead := &recorder{}
	var mu sync.Mutex
	var deadStages []string
	deadTarget := pipe.TargetFunc(func(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
		mu.Lock()
		for _, ev := range events {
			deadStages = append(deadStages, *ev.Attributes[pipe.DLQStage].StringValue+":"+string(ev.RecordJSON))
		}
		mu.Unlock()
		return dead.Deliver(ctx, events)
	})
	filter := pipe.FilterFunc(func(_ context.Context, ev *pipe.Event) (bool, error) {
		return !strings.HasPrefix(ev.Message.Body, "skip"), nil
	})
	runDrain(t, pipe.Options{Source: src, Target: rec, Filter: filter, DeadLetter: deadTarget})

	rec.mu.Lock()
	got := map[string]int{}
	for _, body := range rec.bodies {
		got[body]++
	}
	rec.mu.Unlock()
	want := map[string]int{"a": 2, "b": 1, "c": 2, "d": 1, "plain": 1}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("record %s accepted %d times, want %d", k, got[k], n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("records accepted %v, want %v", got, want)
	}
	if !slices.Equal(deadStages, []string{"unwrap:broken"}) {
		t.Errorf("dead-lettered %v, want the broken message, at stage unwrap", deadStages)
	}
	if acked, want := src.ackedBodies(), []string{"plain", "split:a,b,c", "split:d", "split:skip,skip2", "test-event"}; !slices.Equal(acked, want) {
		t.Errorf("the source heard of the deletes of %v, want %v", acked, want)
	}
	if st := q.Stats(); st.Visible+st.InFlight != 0 || st.Deleted != 6 {
		t.Errorf("queue stats %+v, want all 6 deleted", st)
	}
}
