package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/spf13/cobra"

	"github.com/pipesproject/pipes/redrive"
)

// moveWaitInterval is how often a native redrive looks at its task.
const moveWaitInterval = time.Second

// nativeFlagErrs are the flags --native cannot go with.
func nativeFlagErrs(f redriveFlags) []error {
	if !f.native {
		if f.noWait {
			return []error{errors.New("--no-wait is for --native redrives")}
		}
		return nil
	}
	var errs []error
	for _, c := range []struct {
		set  bool
		flag string
	}{{f.filter != "", "--filter"}, {f.max > 0, "--max"}, {f.dryRun, "--dry-run"}} {
		if c.set {
			errs = append(errs, fmt.Errorf("%s cannot go with --native: SQS's move task moves every message of the dead-letter queue as it is", c.flag))
		}
	}
	if f.rate != math.Trunc(f.rate) || f.rate > redrive.MaxMoveRate {
		errs = append(errs, fmt.Errorf("--rate with --native is SQS's MaxNumberOfMessagesPerSecond, a whole number from 1 to %d (0: SQS's choice), got %v", redrive.MaxMoveRate, f.rate))
	}
	return errs
}

// moveErr gives a failed move task call its exit code and a hint.
func moveErr(err error) error {
	switch {
	case errors.Is(err, redrive.ErrNotADeadLetterQueue):
		return usageErr(fmt.Errorf("%w; pipes dlq redrive without --native moves from any queue", err))
	case errors.Is(err, redrive.ErrMoveUnsupported):
		return runtimeErr(fmt.Errorf("%w; pipes dlq redrive without --native works against any SQS-compatible endpoint", err))
	}
	return runtimeErr(err)
}

// nativeRedrive starts a move task from dlq to to and, unless --no-wait,
// follows it to its end.
func nativeRedrive(ctx context.Context, api redrive.MoveAPI, dlq, to string, f redriveFlags, stdout, stderr io.Writer) error {
	started, err := redrive.StartMove(ctx, api, redrive.MoveOptions{SourceURL: dlq, DestinationURL: to, Rate: int(f.rate)})
	if err != nil {
		return moveErr(err)
	}
	out := json.NewEncoder(stdout)
	if err := out.Encode(started); err != nil {
		return runtimeErr(fmt.Errorf("writing the task: %w", err))
	}
	rate := "at SQS's rate"
	if f.rate > 0 {
		rate = fmt.Sprintf("at most %d/s", int(f.rate))
	}
	fmt.Fprintf(stderr, "started a message move task from %s to %s, %s\n", started.SourceARN, started.DestinationARN, rate)
	if f.noWait {
		fmt.Fprintf(stderr, "not waiting: follow it with pipes dlq tasks, cancel it with pipes dlq tasks --cancel %s\n", started.TaskHandle)
		return nil
	}
	bar := newDLQProgress(stderr)
	task, err := redrive.WaitMove(ctx, api, started.SourceARN, started.TaskHandle, moveWaitInterval, func(t redrive.MoveTask) {
		bar.show(int(t.Moved), toMove(t), t.Status, t.Done())
	})
	bar.clear()
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "stopped waiting; the task runs on: see pipes dlq tasks, cancel it with pipes dlq tasks --cancel %s\n", started.TaskHandle)
		}
		return runtimeErr(err)
	}
	if err := out.Encode(task); err != nil {
		return runtimeErr(fmt.Errorf("writing the task: %w", err))
	}
	fmt.Fprintf(stderr, "message move task %s: %d of %d moved from %s\n", task.Status, task.Moved, toMove(task), task.SourceARN)
	if task.Status != redrive.MoveCompleted {
		why := ""
		if task.FailureReason != "" {
			why = ": " + task.FailureReason
		}
		return runtimeErr(fmt.Errorf("the message move task ended %s%s; what it did not move is still in %s", task.Status, why, dlq))
	}
	return nil
}

// toMove is a task's ApproximateNumberOfMessagesToMove, 0 when unknown.
func toMove(t redrive.MoveTask) int {
	if t.ToMove == nil {
		return 0
	}
	return int(*t.ToMove)
}

func newDLQTasksCmd(stdout, stderr io.Writer) *cobra.Command {
	var f dlqFlags
	var cancel string
	cmd := &cobra.Command{
		Use:   "tasks -f FILE [--pipe NAME] [--cancel HANDLE] [--queue-url URL] [--region R] [--profile P] [--endpoint URL]",
		Short: "List the SQS message move tasks of a pipe's dead-letter queue, or cancel one",
		Long: `For an sqs source it lists the message move tasks of the pipe's dead-letter
queue (ListMessageMoveTasks: the running one and the latest ended ones, at
most ten, newest first), one JSON line per task on standard output
({"taskHandle":...,"status":"RUNNING|COMPLETED|CANCELLING|CANCELLED|FAILED",
"approximateNumberOfMessagesMoved":N,...}; SQS shows the handle of a running
task only), and a count on standard error. --cancel HANDLE cancels a running
task (CancelMessageMoveTask): what it moved stays moved. RabbitMQ has no move
tasks.

` + dlqFinding,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return dlqTasks(cmd.Context(), f, cancel, stdout, stderr)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&cancel, "cancel", "", "cancel the running move task with this handle (as pipes dlq tasks or redrive --native print it)")
	return cmd
}

func dlqTasks(ctx context.Context, f dlqFlags, cancel string, stdout, stderr io.Writer) error {
	spec, err := loadDLQPipe(f)
	if err != nil {
		return err
	}
	if spec.Source.Type == "rabbitmq" {
		return usageErr(fmt.Errorf("pipe %s has a rabbitmq source: move tasks are SQS's, RabbitMQ has none (pipes dlq redrive moves RabbitMQ messages itself)", spec.Name))
	}
	out := json.NewEncoder(stdout)
	if cancel != "" {
		client, err := sqsClient(ctx, spec, f)
		if err != nil {
			return err
		}
		moved, err := redrive.CancelMove(ctx, client, cancel)
		if err != nil {
			return moveErr(err)
		}
		if err := out.Encode(redrive.MoveTask{TaskHandle: cancel, Status: redrive.MoveCancelling, Moved: moved}); err != nil {
			return runtimeErr(fmt.Errorf("writing the task: %w", err))
		}
		fmt.Fprintf(stderr, "cancelling the message move task: %d message(s) moved so far stay moved\n", moved)
		return nil
	}
	q, err := openDLQ(ctx, spec, f, false)
	if err != nil {
		return err
	}
	arn, tasks, err := redrive.ListMoves(ctx, q.move, q.dlq)
	if err != nil {
		return moveErr(err)
	}
	for _, t := range tasks {
		if err := out.Encode(t); err != nil {
			return runtimeErr(fmt.Errorf("writing the tasks: %w", err))
		}
	}
	running := 0
	for _, t := range tasks {
		if !t.Done() {
			running++
		}
	}
	fmt.Fprintf(stderr, "dead-letter queue %s: %d message move task(s), %d running\n", arn, len(tasks), running)
	return nil
}
