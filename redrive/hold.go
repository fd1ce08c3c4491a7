package redrive

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/pipesproject/pipes/pipe"
)

// emptyWait is the long-poll wait of each receive: one empty receive that
// waited this long ends a run.
const emptyWait = time.Second

// releaseTimeout bounds the final release, which runs even after ctx is
// cancelled.
const releaseTimeout = 15 * time.Second

// held is a message kept invisible until the end of a run.
type held struct {
	handle string
	until  time.Time
}

// holder keeps the messages a run has seen but must leave in the queue
// invisible until the run ends, so that the next receive returns new
// messages, and then makes them visible again in one go. It extends their
// visibility while the run lasts. It is used by one goroutine.
type holder struct {
	api   API
	url   string
	vis   time.Duration
	now   func() time.Time
	items map[string]held // by message id
}

func newHolder(api API, queueURL string, vis time.Duration, now func() time.Time) *holder {
	return &holder{api: api, url: queueURL, vis: vis, now: now, items: map[string]held{}}
}

// hold keeps a message received at receivedAt (the latest receipt handle
// wins).
func (h *holder) hold(id, handle string, receivedAt time.Time) {
	h.items[id] = held{handle: handle, until: receivedAt.Add(h.vis)}
}

// extend gives another visibility timeout to the held messages that have
// less than half of one left. A message whose extension fails is dropped
// from the hold (it reappears in the queue; it was never deleted).
func (h *holder) extend(ctx context.Context) error {
	now := h.now()
	var ids []string
	for id, it := range h.items {
		if it.until.Sub(now) < h.vis/2 {
			ids = append(ids, id)
		}
	}
	failed, err := h.change(ctx, ids, h.vis)
	for _, id := range ids {
		if _, bad := failed[id]; bad {
			delete(h.items, id)
			continue
		}
		it := h.items[id]
		it.until = now.Add(h.vis)
		h.items[id] = it
	}
	return err
}

// release makes every held message visible again (visibility 0). It uses
// a context of its own so that it runs after ctx is cancelled too.
func (h *holder) release(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	ids := make([]string, 0, len(h.items))
	for id := range h.items {
		ids = append(ids, id)
	}
	_, err := h.change(ctx, ids, 0)
	clear(h.items)
	return err
}

// change sets the visibility of the named held messages, ten per call, and
// returns those SQS refused with the reason.
func (h *holder) change(ctx context.Context, ids []string, vis time.Duration) (map[string]error, error) {
	failed := map[string]error{}
	var errs []error
	for start := 0; start < len(ids); start += 10 {
		chunk := ids[start:min(start+10, len(ids))]
		entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(chunk))
		for i, id := range chunk {
			entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{
				Id:                aws.String(strconv.Itoa(i)),
				ReceiptHandle:     aws.String(h.items[id].handle),
				VisibilityTimeout: int32(vis / time.Second),
			}
		}
		out, err := h.api.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(h.url), Entries: entries})
		if err != nil {
			for _, id := range chunk {
				failed[id] = err
			}
			errs = append(errs, fmt.Errorf("setting the visibility of %d messages of %s to %v: %w", len(chunk), h.url, vis, err))
			continue
		}
		for _, f := range out.Failed {
			i, err := strconv.Atoi(aws.ToString(f.Id))
			if err != nil || i < 0 || i >= len(chunk) {
				errs = append(errs, fmt.Errorf("setting visibility on %s: unknown entry id %q in the answer", h.url, aws.ToString(f.Id)))
				continue
			}
			e := fmt.Errorf("setting the visibility of message %s of %s to %v: %s: %s", chunk[i], h.url, vis, aws.ToString(f.Code), aws.ToString(f.Message))
			failed[chunk[i]] = e
			errs = append(errs, e)
		}
	}
	return failed, errors.Join(errs...)
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
func Record(m types.Message, arn, region string) *pipe.Message {
	rec := &pipe.Message{
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
	rec.MessageAttributes = make(map[string]pipe.MessageAttribute, len(m.MessageAttributes))
	for k, v := range m.MessageAttributes {
		rec.MessageAttributes[k] = pipe.MessageAttribute{
			StringValue:      v.StringValue,
			BinaryValue:      v.BinaryValue,
			StringListValues: v.StringListValues,
			BinaryListValues: v.BinaryListValues,
			DataType:         aws.ToString(v.DataType),
		}
	}
	return rec
}
