package sqs

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Pending counts the messages left in the queue: visible, in flight and
// delayed (SQS's approximate counts, one GetQueueAttributes call). The
// runtime asks it in drain mode, once a receive has come back empty, to tell
// an empty queue from one whose messages wait out a visibility timeout.
func (s *Source) Pending(ctx context.Context) (int, error) {
	q, err := s.opened()
	if err != nil {
		return 0, err
	}
	out, err := s.api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(q.url),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		return 0, fmt.Errorf("counting the messages of SQS queue %s: %w", s.name, classify(err))
	}
	total := 0
	for _, name := range []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages,
		types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
	} {
		n, _ := strconv.Atoi(out.Attributes[string(name)])
		total += n
	}
	return total, nil
}
