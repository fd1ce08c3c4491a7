package redrive

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// MoveAPI is the part of the SQS client the native move tasks call.
// *sqs.Client implements it.
type MoveAPI interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	ListDeadLetterSourceQueues(ctx context.Context, in *sqs.ListDeadLetterSourceQueuesInput, optFns ...func(*sqs.Options)) (*sqs.ListDeadLetterSourceQueuesOutput, error)
	StartMessageMoveTask(ctx context.Context, in *sqs.StartMessageMoveTaskInput, optFns ...func(*sqs.Options)) (*sqs.StartMessageMoveTaskOutput, error)
	ListMessageMoveTasks(ctx context.Context, in *sqs.ListMessageMoveTasksInput, optFns ...func(*sqs.Options)) (*sqs.ListMessageMoveTasksOutput, error)
	CancelMessageMoveTask(ctx context.Context, in *sqs.CancelMessageMoveTaskInput, optFns ...func(*sqs.Options)) (*sqs.CancelMessageMoveTaskOutput, error)
}

var _ MoveAPI = (*sqs.Client)(nil)

// MaxMoveRate is SQS's highest MaxNumberOfMessagesPerSecond.
const MaxMoveRate = 500

// ErrNotADeadLetterQueue is returned by StartMove when no queue names the
// source queue as its dead-letter queue: SQS moves only from those.
var ErrNotADeadLetterQueue = errors.New("no queue names it as its dead-letter queue in a RedrivePolicy, and SQS's move tasks move only from dead-letter queues")

// ErrMoveUnsupported is wrapped by the move task functions when the
// server answered that it has no such operation (an SQS-compatible server
// without move tasks, such as fauxqs).
var ErrMoveUnsupported = errors.New("the SQS endpoint does not support message move tasks")

// Move task statuses, as SQS names them.
const (
	MoveRunning    = "RUNNING"
	MoveCompleted  = "COMPLETED"
	MoveCancelling = "CANCELLING"
	MoveCancelled  = "CANCELLED"
	MoveFailed     = "FAILED"
)

// MoveOptions says what StartMove moves.
type MoveOptions struct {
	// SourceURL is the URL of the dead-letter queue to move from.
	SourceURL string
	// DestinationURL is the URL of the queue to move to; "" lets SQS move
	// each message back to the queue it was dead-lettered from.
	DestinationURL string
	// Rate is MaxNumberOfMessagesPerSecond, 1 to MaxMoveRate; 0 lets SQS
	// pick the rate.
	Rate int
}

// MoveTask is one message move task as ListMessageMoveTasks shows it.
type MoveTask struct {
	// TaskHandle identifies a running task (SQS shows it only while the
	// task runs); CancelMove takes it.
	TaskHandle string `json:"taskHandle,omitempty"`
	// Status is RUNNING, COMPLETED, CANCELLING, CANCELLED or FAILED.
	Status string `json:"status"`
	// SourceARN is the dead-letter queue's ARN.
	SourceARN string `json:"sourceArn"`
	// DestinationARN is the destination's ARN when one was given.
	DestinationARN string `json:"destinationArn,omitempty"`
	// Moved is ApproximateNumberOfMessagesMoved.
	Moved int64 `json:"approximateNumberOfMessagesMoved"`
	// ToMove is ApproximateNumberOfMessagesToMove, when SQS gave it.
	ToMove *int64 `json:"approximateNumberOfMessagesToMove,omitempty"`
	// Rate is MaxNumberOfMessagesPerSecond, when one was given.
	Rate *int32 `json:"maxNumberOfMessagesPerSecond,omitempty"`
	// FailureReason says why a FAILED task failed.
	FailureReason string `json:"failureReason,omitempty"`
	// Started is when the task started.
	Started time.Time `json:"startedTimestamp"`
}

// Done tells whether the task has ended (completed, cancelled or failed).
func (t MoveTask) Done() bool {
	return t.Status == MoveCompleted || t.Status == MoveCancelled || t.Status == MoveFailed
}

// StartedMove is a task StartMove started.
type StartedMove struct {
	// TaskHandle identifies the task.
	TaskHandle string `json:"taskHandle"`
	// SourceARN and DestinationARN are the queues' ARNs (no destination:
	// each message goes back to its own source queue).
	SourceARN      string `json:"sourceArn"`
	DestinationARN string `json:"destinationArn,omitempty"`
}

// StartMove starts an SQS message move task (StartMessageMoveTask) from
// the dead-letter queue opt.SourceURL to opt.DestinationURL. It checks
// first that some queue names the source as its dead-letter queue
// (ListDeadLetterSourceQueues), since SQS moves only from those, and
// reads the queues' ARNs. SQS does the moving: it keeps bodies and
// attributes as they are (no filter, no clean-up of the failure context)
// and runs one task per source queue at a time. It blocks for a few calls.
func StartMove(ctx context.Context, api MoveAPI, opt MoveOptions) (StartedMove, error) {
	if opt.Rate < 0 || opt.Rate > MaxMoveRate {
		return StartedMove{}, fmt.Errorf("starting a message move task: the rate must be 0 (SQS's choice) to %d messages a second, got %d", MaxMoveRate, opt.Rate)
	}
	if opt.SourceURL == "" || opt.SourceURL == opt.DestinationURL {
		return StartedMove{}, fmt.Errorf("starting a message move task: the source %q must be given and differ from the destination", opt.SourceURL)
	}
	var started StartedMove
	var err error
	if started.SourceARN, err = queueARN(ctx, api, opt.SourceURL); err != nil {
		return StartedMove{}, err
	}
	sources, err := api.ListDeadLetterSourceQueues(ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(opt.SourceURL), MaxResults: aws.Int32(1)})
	if err != nil {
		return StartedMove{}, moveErr(fmt.Sprintf("listing the queues that dead-letter to %s", opt.SourceURL), err)
	}
	if len(sources.QueueUrls) == 0 {
		return StartedMove{}, fmt.Errorf("starting a message move task from %s: %w", opt.SourceURL, ErrNotADeadLetterQueue)
	}
	if opt.DestinationURL != "" {
		if started.DestinationARN, err = queueARN(ctx, api, opt.DestinationURL); err != nil {
			return StartedMove{}, err
		}
	}
	in := &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(started.SourceARN)}
	if started.DestinationARN != "" {
		in.DestinationArn = aws.String(started.DestinationARN)
	}
	if opt.Rate > 0 {
		in.MaxNumberOfMessagesPerSecond = aws.Int32(int32(opt.Rate))
	}
	out, err := api.StartMessageMoveTask(ctx, in)
	if err != nil {
		return StartedMove{}, moveErr(fmt.Sprintf("starting a message move task from %s", started.SourceARN), err)
	}
	started.TaskHandle = aws.ToString(out.TaskHandle)
	return started, nil
}

// ListMoves returns the move tasks of the dead-letter queue at sourceURL
// (ListMessageMoveTasks: the running one and the latest ended ones, at most
// ten, newest first) and the queue's ARN. It blocks for two calls.
func ListMoves(ctx context.Context, api MoveAPI, sourceURL string) (sourceARN string, tasks []MoveTask, err error) {
	if sourceARN, err = queueARN(ctx, api, sourceURL); err != nil {
		return "", nil, err
	}
	tasks, err = listMoves(ctx, api, sourceARN)
	return sourceARN, tasks, err
}

func listMoves(ctx context.Context, api MoveAPI, sourceARN string) ([]MoveTask, error) {
	out, err := api.ListMessageMoveTasks(ctx, &sqs.ListMessageMoveTasksInput{SourceArn: aws.String(sourceARN), MaxResults: aws.Int32(10)})
	if err != nil {
		return nil, moveErr(fmt.Sprintf("listing the message move tasks of %s", sourceARN), err)
	}
	tasks := make([]MoveTask, len(out.Results))
	for i, r := range out.Results {
		tasks[i] = MoveTask{
			TaskHandle:     aws.ToString(r.TaskHandle),
			Status:         aws.ToString(r.Status),
			SourceARN:      aws.ToString(r.SourceArn),
			DestinationARN: aws.ToString(r.DestinationArn),
			Moved:          r.ApproximateNumberOfMessagesMoved,
			ToMove:         r.ApproximateNumberOfMessagesToMove,
			Rate:           r.MaxNumberOfMessagesPerSecond,
			FailureReason:  aws.ToString(r.FailureReason),
			Started:        time.UnixMilli(r.StartedTimestamp).UTC(),
		}
	}
	return tasks, nil
}

// CancelMove cancels the running move task with the handle
// (CancelMessageMoveTask) and returns how many messages it had moved. What
// it moved stays moved. It blocks for one call.
func CancelMove(ctx context.Context, api MoveAPI, handle string) (moved int64, err error) {
	if handle == "" {
		return 0, errors.New("cancelling a message move task: no task handle")
	}
	out, err := api.CancelMessageMoveTask(ctx, &sqs.CancelMessageMoveTaskInput{TaskHandle: aws.String(handle)})
	if err != nil {
		return 0, moveErr("cancelling the message move task", err)
	}
	return out.ApproximateNumberOfMessagesMoved, nil
}

// WaitMove polls the move tasks of sourceARN every interval until the
// task started as handle has ended, calling progress (when set) with each
// state seen, and returns its last state. SQS shows a task's handle only
// while it runs: once it is gone, the newest ended task is taken to be
// this one (SQS runs one task per source queue at a time). It returns
// ctx's error when ctx ends first; the task runs on.
func WaitMove(ctx context.Context, api MoveAPI, sourceARN, handle string, interval time.Duration, progress func(MoveTask)) (MoveTask, error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		tasks, err := listMoves(ctx, api, sourceARN)
		if err != nil {
			return MoveTask{}, err
		}
		task, found := findMove(tasks, handle)
		if found {
			if progress != nil {
				progress(task)
			}
			if task.Done() {
				return task, nil
			}
		}
		select {
		case <-ctx.Done():
			return task, fmt.Errorf("waiting for the message move task of %s (it runs on): %w", sourceARN, ctx.Err())
		case <-t.C:
		}
	}
}

// findMove picks the task started as handle out of a ListMessageMoveTasks
// answer (newest first): the one with that handle, or, once the handle is
// gone, the newest task when it has ended.
func findMove(tasks []MoveTask, handle string) (MoveTask, bool) {
	for _, t := range tasks {
		if t.TaskHandle == handle {
			return t, true
		}
	}
	if len(tasks) > 0 && tasks[0].TaskHandle == "" && tasks[0].Status != MoveRunning {
		return tasks[0], true
	}
	return MoveTask{}, false
}

// queueARN reads a queue's ARN.
func queueARN(ctx context.Context, api MoveAPI, queueURL string) (string, error) {
	out, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(queueURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", fmt.Errorf("reading the ARN of %s: %w", queueURL, err)
	}
	arn := out.Attributes[string(types.QueueAttributeNameQueueArn)]
	if arn == "" {
		return "", fmt.Errorf("reading the ARN of %s: the server gave none", queueURL)
	}
	return arn, nil
}

// moveErr wraps a failed move task call, adding ErrMoveUnsupported when
// the server has no such operation: SQS's UnsupportedOperation, or an API
// error coded InvalidAction (AWS's common error for an unknown action,
// which fauxqs gives for the move task calls).
func moveErr(doing string, err error) error {
	var unsupported *types.UnsupportedOperation
	var api smithy.APIError
	if errors.As(err, &unsupported) || (errors.As(err, &api) && api.ErrorCode() == "InvalidAction") {
		return fmt.Errorf("%s: %w: %w", doing, ErrMoveUnsupported, err)
	}
	return fmt.Errorf("%s: %w", doing, err)
}
