package redrive_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/sqstest"
	"github.com/pipesproject/pipes/redrive"
)

// The move task tests run on local-aws-sqs, which has StartMessageMoveTask,
// ListMessageMoveTasks and CancelMessageMoveTask (it moves up to the rate
// each second and shows a task's handle only while it runs, as SQS does);
// fauxqs lacks move tasks (it answers InvalidAction), which
// TestStartMoveSaysWhatIsNotSupported relies on.

func TestStartMoveMovesTheDeadLettersBackAndListsTheTask(t *testing.T) {
	c := sqstest.ClientOf(t, sqstest.LocalAWSSQS)
	queueURL, dlqURL := sqstest.CreateQueue(t, c, sqstest.QueueOptions{MaxReceiveCount: 3})
	var want []string
	for i := range 5 {
		want = append(want, `{"n":`+strconv.Itoa(i)+`}`)
	}
	sqstest.SendBodies(t, c, dlqURL, want...)

	started, err := redrive.StartMove(t.Context(), c, redrive.MoveOptions{SourceURL: dlqURL, DestinationURL: queueURL, Rate: 100})
	if err != nil {
		t.Fatal(err)
	}
	if started.TaskHandle == "" || started.SourceARN == "" || started.DestinationARN == "" {
		t.Fatalf("started %+v, want a handle and both ARNs", started)
	}
	var seen []string
	task, err := redrive.WaitMove(t.Context(), c, started.SourceARN, started.TaskHandle, 100*time.Millisecond, func(m redrive.MoveTask) { seen = append(seen, m.Status) })
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != redrive.MoveCompleted || task.Moved != 5 || task.Rate == nil || *task.Rate != 100 || task.DestinationARN != started.DestinationARN {
		t.Errorf("the task ended as %+v (statuses seen %v), want COMPLETED with 5 moved at rate 100", task, seen)
	}
	got := sqstest.DrainBodies(t, c, queueURL)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("the source queue holds %v, want %v", got, want)
	}
	if visible, inflight := sqstest.Count(t, c, dlqURL); visible+inflight != 0 {
		t.Errorf("the dead-letter queue still holds %d messages", visible+inflight)
	}

	arn, tasks, err := redrive.ListMoves(t.Context(), c, dlqURL)
	if err != nil {
		t.Fatal(err)
	}
	if arn != started.SourceARN || len(tasks) != 1 || tasks[0].Status != redrive.MoveCompleted || tasks[0].TaskHandle != "" || tasks[0].Started.IsZero() {
		t.Errorf("ListMoves gave %s %+v, want the one completed task, without its handle", arn, tasks)
	}
}

func TestCancelMoveStopsARunningTask(t *testing.T) {
	c := sqstest.ClientOf(t, sqstest.LocalAWSSQS)
	queueURL, dlqURL := sqstest.CreateQueue(t, c, sqstest.QueueOptions{MaxReceiveCount: 3})
	bodies := make([]string, 20)
	for i := range bodies {
		bodies[i] = strconv.Itoa(i)
	}
	sqstest.SendBodies(t, c, dlqURL, bodies...)
	// One message a second: 20 s to move them all, so the task is running
	// when it is cancelled.
	started, err := redrive.StartMove(t.Context(), c, redrive.MoveOptions{SourceURL: dlqURL, DestinationURL: queueURL, Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := redrive.StartMove(t.Context(), c, redrive.MoveOptions{SourceURL: dlqURL, DestinationURL: queueURL}); err == nil {
		t.Error("a second task on the same source started; SQS runs one at a time")
	}
	_, tasks, err := redrive.ListMoves(t.Context(), c, dlqURL)
	if err != nil || len(tasks) != 1 || tasks[0].TaskHandle != started.TaskHandle || tasks[0].Status != redrive.MoveRunning {
		t.Fatalf("ListMoves gave %+v, %v; want the running task with its handle", tasks, err)
	}
	moved, err := redrive.CancelMove(t.Context(), c, started.TaskHandle)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	task, err := redrive.WaitMove(ctx, c, started.SourceARN, started.TaskHandle, 100*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != redrive.MoveCancelled || task.Moved < moved {
		t.Errorf("the task ended as %+v, want CANCELLED with at least the %d moved when cancelled", task, moved)
	}
	inSource := len(sqstest.DrainBodies(t, c, queueURL))
	left := len(sqstest.DrainBodies(t, c, dlqURL))
	if int64(inSource) != task.Moved || inSource+left != len(bodies) {
		t.Errorf("%d moved and %d left, the task says %d moved; want all %d in one queue or the other", inSource, left, task.Moved, len(bodies))
	}
	if _, err := redrive.CancelMove(t.Context(), c, started.TaskHandle); err == nil {
		t.Error("cancelling an ended task succeeded")
	}
}

func TestStartMoveSaysWhatIsNotSupported(t *testing.T) {
	local := sqstest.ClientOf(t, sqstest.LocalAWSSQS)
	queueURL, dlqURL := sqstest.CreateQueue(t, local, sqstest.QueueOptions{MaxReceiveCount: 3})
	faux := sqstest.ClientOf(t, sqstest.Fauxqs)
	_, fauxDLQ := sqstest.CreateQueue(t, faux, sqstest.QueueOptions{MaxReceiveCount: 3})
	tests := []struct {
		name string
		api  redrive.MoveAPI
		opt  redrive.MoveOptions
		is   error
	}{
		{"a queue that is no queue's dead-letter queue (local-aws-sqs)", local, redrive.MoveOptions{SourceURL: queueURL}, redrive.ErrNotADeadLetterQueue},
		{"a server without move tasks (fauxqs answers InvalidAction)", faux, redrive.MoveOptions{SourceURL: fauxDLQ}, redrive.ErrMoveUnsupported},
		{"a rate above SQS's 500", local, redrive.MoveOptions{SourceURL: dlqURL, Rate: 501}, nil},
		{"a negative rate", local, redrive.MoveOptions{SourceURL: dlqURL, Rate: -1}, nil},
		{"the source as its own destination", local, redrive.MoveOptions{SourceURL: dlqURL, DestinationURL: dlqURL}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := redrive.StartMove(t.Context(), tt.api, tt.opt)
			if err == nil || (tt.is != nil && !errors.Is(err, tt.is)) {
				t.Fatalf("StartMove(%+v) = %v, want an error wrapping %v", tt.opt, err, tt.is)
			}
		})
	}
	if _, _, err := redrive.ListMoves(t.Context(), faux, fauxDLQ); !errors.Is(err, redrive.ErrMoveUnsupported) {
		t.Errorf("ListMoves on fauxqs = %v, want ErrMoveUnsupported", err)
	}
	if _, err := redrive.CancelMove(t.Context(), faux, "aGFuZGxl"); !errors.Is(err, redrive.ErrMoveUnsupported) {
		t.Errorf("CancelMove on fauxqs = %v, want ErrMoveUnsupported", err)
	}
}
