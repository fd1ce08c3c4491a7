package redrive

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

// emptyWait is the long-poll wait of each receive: one empty receive that
// waited this long ends a run.
const emptyWait = time.Second

// releaseTimeout bounds the final release, which runs even after ctx is
// cancelled.
const releaseTimeout = 15 * time.Second

// releaseCtx is the context of a final release: it outlives ctx by up to
// releaseTimeout.
func releaseCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
}

// leases is the dead-letter queue as a source.Source for a pipe.Keeper: the
// keeper's settler extends and releases the messages a run holds with
// ChangeMessageVisibilityBatch, the same code as a pipe's heartbeat.
// Receive and Ack are not used by a keeper.
type leases struct {
	api API
	url string
}

var (
	_ source.Source   = leases{}
	_ source.Extender = leases{}
)

func (l leases) Receive(context.Context, int) ([]*source.Message, error) {
	return nil, errors.New("redrive: a keeper does not receive")
}

func (l leases) Ack(context.Context, []*source.Message) error {
	return errors.New("redrive: a keeper does not delete")
}

func (l leases) Nak(ctx context.Context, msgs []*source.Message, d time.Duration) error {
	return l.change(ctx, msgs, d)
}

func (l leases) Extend(ctx context.Context, msgs []*source.Message, d time.Duration) error {
	return l.change(ctx, msgs, d)
}

// change sets the visibility of msgs, ten per call; entries SQS refuses
// are reported by a *pipe.SettleError keyed by receipt handle.
func (l leases) change(ctx context.Context, msgs []*source.Message, vis time.Duration) error {
	var serr *core.SettleError
	var errs []error
	for start := 0; start < len(msgs); start += 10 {
		chunk := msgs[start:min(start+10, len(msgs))]
		entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(chunk))
		for i, m := range chunk {
			entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{
				Id:                aws.String(strconv.Itoa(i)),
				ReceiptHandle:     aws.String(m.ReceiptHandle),
				VisibilityTimeout: int32((vis + time.Second - 1) / time.Second),
			}
		}
		out, err := l.api.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(l.url), Entries: entries})
		if err != nil {
			errs = append(errs, fmt.Errorf("setting the visibility of %d messages of %s to %v: %w", len(chunk), l.url, vis, err))
			continue
		}
		for _, f := range out.Failed {
			i, err := strconv.Atoi(aws.ToString(f.Id))
			if err != nil || i < 0 || i >= len(chunk) {
				errs = append(errs, fmt.Errorf("setting visibility on %s: unknown entry id %q in the answer", l.url, aws.ToString(f.Id)))
				continue
			}
			if serr == nil {
				serr = &core.SettleError{Op: "change visibility", Failed: map[string]error{}}
			}
			serr.Failed[chunk[i].ReceiptHandle] = fmt.Errorf("setting the visibility of message %s of %s to %v: %s: %s",
				chunk[i].MessageID, l.url, vis, aws.ToString(f.Code), aws.ToString(f.Message))
			serr.SenderFault = serr.SenderFault || f.SenderFault
		}
	}
	if len(errs) > 0 {
		if serr != nil {
			errs = append(errs, serr)
		}
		return errors.Join(errs...)
	}
	if serr != nil {
		return serr
	}
	return nil
}

// newKeeper holds a run's messages of queueURL for vis.
func newKeeper(api API, queueURL string, vis time.Duration, log *slog.Logger) *pipe.Keeper {
	return pipe.NewKeeper(leases{api: api, url: queueURL}, vis, log)
}

// hold keeps a received message invisible until the keeper is closed.
func hold(k *pipe.Keeper, id, handle string, receivedAt time.Time) {
	k.Hold(&source.Message{MessageID: id, ReceiptHandle: handle}, receivedAt)
}

// receive makes one ReceiveMessage call for up to n messages (1..10),
// waiting emptyWait, hiding what it gets for vis.
func receive(ctx context.Context, api API, queueURL string, n int, vis time.Duration) ([]types.Message, error) {
	out, err := api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:            aws.String(queueURL),
		MaxNumberOfMessages: int32(min(max(n, 1), 10)),
		WaitTimeSeconds:     int32(emptyWait / time.Second),
		VisibilityTimeout:   int32((vis + time.Second - 1) / time.Second),
		// Both names: some SQS-compatible servers know only the older one.
		AttributeNames:              []types.QueueAttributeName{types.QueueAttributeNameAll},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		return nil, fmt.Errorf("receiving from %s: %w", queueURL, err)
	}
	return out.Messages, nil
}

// Record maps an SQS message to the Pipes SQS record shape, with the
// queue's ARN and region.
func Record(m types.Message, arn, region string) *source.Message {
	rec := &source.Message{
		MessageID:              aws.ToString(m.MessageId),
		ReceiptHandle:          aws.ToString(m.ReceiptHandle),
		Body:                   aws.ToString(m.Body),
		Attributes:             m.Attributes,
		MD5OfBody:              aws.ToString(m.MD5OfBody),
		MD5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
		EventSource:            "aws:sqs",
		EventSourceARN:         arn,
		AWSRegion:              region,
	}
	if rec.Attributes == nil {
		rec.Attributes = map[string]string{}
	}
	rec.MessageAttributes = make(map[string]source.MessageAttribute, len(m.MessageAttributes))
	for k, v := range m.MessageAttributes {
		rec.MessageAttributes[k] = source.MessageAttribute{
			StringValue:      v.StringValue,
			BinaryValue:      v.BinaryValue,
			StringListValues: v.StringListValues,
			BinaryListValues: v.BinaryListValues,
			DataType:         aws.ToString(v.DataType),
		}
	}
	return rec
}
