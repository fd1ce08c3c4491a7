package sqs

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/pipesproject/pipes/source"
)

// Receive makes one ReceiveMessage call for up to limit messages (clamped to
// 1..10) and returns them as Pipes records. It blocks up to the configured
// wait time; an empty result with a nil error means none came. When ctx is
// done before SQS answers it returns ctx.Err() and no messages; messages
// SQS did hand over are always returned, with a nil error, so the caller
// settles them. Throttling errors are wrapped with pipe.Throttled, access
// and missing-queue errors with pipe.Permanent. With Config.Payloads, S3
// pointers are fetched and S3 event notifications split before it returns
// (see Payloads). It is safe for concurrent use.
func (s *Source) Receive(ctx context.Context, limit int) ([]*source.Message, error) {
	q, err := s.opened()
	if err != nil {
		return nil, err
	}
	in := &sqs.ReceiveMessageInput{
		QueueUrl:            aws.String(q.url),
		MaxNumberOfMessages: int32(min(max(limit, 1), MaxBatch)),
		WaitTimeSeconds:     int32(ceilSeconds(s.cfg.WaitTime)),
		VisibilityTimeout:   int32(ceilSeconds(q.receiveVisibility)),
		// Both names: some SQS-compatible servers know only the older one.
		AttributeNames:              []types.QueueAttributeName{types.QueueAttributeNameAll},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	}
	s.polls.begin(time.Now())
	out, err := s.api.ReceiveMessage(ctx, in)
	s.polls.end()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("receiving from SQS queue %s: %w", s.name, classify(err))
	}
	msgs := toMessages(out.Messages, q.arn, q.region)
	if s.payloads != nil {
		s.payloads.unwrap(ctx, msgs, q.receiveVisibility/2)
	}
	return msgs, nil
}

// toMessages maps SQS messages to Pipes records. It allocates the records
// in one block; the system attribute maps of the SDK are used as they are.
func toMessages(in []types.Message, arn, region string) []*source.Message {
	if len(in) == 0 {
		return nil
	}
	block := make([]source.Message, len(in))
	out := make([]*source.Message, len(in))
	for i := range in {
		m := &in[i]
		rec := &block[i]
		rec.MessageID = aws.ToString(m.MessageId)
		rec.ReceiptHandle = aws.ToString(m.ReceiptHandle)
		rec.Body = aws.ToString(m.Body)
		rec.Attributes = m.Attributes
		rec.MessageAttributes = toAttributes(m.MessageAttributes)
		rec.MD5OfBody = aws.ToString(m.MD5OfBody)
		rec.MD5OfMessageAttributes = aws.ToString(m.MD5OfMessageAttributes)
		rec.EventSource = "aws:sqs"
		rec.EventSourceARN = arn
		rec.AWSRegion = region
		out[i] = rec
	}
	return out
}

// toAttributes maps message attributes to the Lambda/Pipes shape, where
// the list values are always arrays (never null).
func toAttributes(in map[string]types.MessageAttributeValue) map[string]source.MessageAttribute {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]source.MessageAttribute, len(in))
	for k, v := range in {
		a := source.MessageAttribute{
			StringValue:      v.StringValue,
			BinaryValue:      v.BinaryValue,
			StringListValues: v.StringListValues,
			BinaryListValues: v.BinaryListValues,
			DataType:         aws.ToString(v.DataType),
		}
		if a.StringListValues == nil {
			a.StringListValues = []string{} // zero-size: no allocation
		}
		if a.BinaryListValues == nil {
			a.BinaryListValues = [][]byte{}
		}
		out[k] = a
	}
	return out
}
