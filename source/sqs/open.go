package sqs

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/pipesproject/pipes/internal/sqsname"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

// sqsAPI is the part of the SQS client the source calls.
type sqsAPI interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// Open resolves the queue's URL (GetQueueUrl for a name or an ARN) and
// reads its attributes: ARN, visibility timeout, redrive policy, FIFO. It
// blocks for those calls. Access denied and a missing queue are
// pipe.Permanent errors. Those and an endpoint that cannot be reached are
// said in one line, beginning with where the file names the queue or the
// endpoint (Config.QueueAt, EndpointAt), and saying what to check; the
// SDK's text is logged at debug level. Open may be called again; the last
// call wins.
func (s *Source) Open(ctx context.Context) (source.Info, error) {
	url, err := s.resolveURL(ctx)
	if err != nil {
		return source.Info{}, err
	}
	out, err := s.api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll},
	})
	if err != nil {
		return source.Info{}, s.explain("GetQueueAttributes", "reading the attributes of SQS queue "+s.name, err)
	}
	q, err := s.queueFrom(url, out.Attributes)
	if err != nil {
		return source.Info{}, fmt.Errorf("reading the attributes of SQS queue %s: %w", s.name, err)
	}
	s.queue.Store(q)
	return q.info, nil
}

// resolveURL returns the queue URL, asking SQS for it unless configured.
func (s *Source) resolveURL(ctx context.Context) (string, error) {
	if s.cfg.QueueURL != "" {
		return s.cfg.QueueURL, nil
	}
	in := &sqs.GetQueueUrlInput{QueueName: aws.String(s.cfg.QueueName)}
	if s.cfg.QueueARN != "" {
		a, err := sqsname.ParseQueueARN(s.cfg.QueueARN)
		if err != nil {
			return "", pipe.Permanent(err)
		}
		in.QueueName = aws.String(a.Name)
		in.QueueOwnerAWSAccountId = aws.String(a.Account)
	}
	out, err := s.api.GetQueueUrl(ctx, in)
	if err != nil {
		return "", s.explain("GetQueueUrl", "resolving the URL of SQS queue "+s.name, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// queueFrom builds what Open resolved from the queue's attributes.
func (s *Source) queueFrom(url string, attrs map[string]string) (*queue, error) {
	q := &queue{url: url, arn: attrs[string(types.QueueAttributeNameQueueArn)], region: s.region}
	if q.arn == "" {
		q.arn = s.cfg.QueueARN
	}
	if a, err := sqsname.ParseQueueARN(q.arn); err == nil {
		q.region = a.Region
	}
	q.info = source.Info{
		ARN:               q.arn,
		FIFO:              attrs[string(types.QueueAttributeNameFifoQueue)] == "true",
		VisibilityTimeout: time.Duration(ceilSeconds(s.cfg.VisibilityTimeout)) * time.Second,
	}
	if q.info.VisibilityTimeout == 0 {
		v := attrs[string(types.QueueAttributeNameVisibilityTimeout)]
		secs, err := strconv.Atoi(v)
		if err != nil || secs < 0 {
			return nil, fmt.Errorf("visibility timeout %q is not a number of seconds", v)
		}
		q.info.VisibilityTimeout = time.Duration(secs) * time.Second
	}
	if q.info.VisibilityTimeout == 0 {
		// A queue whose own visibility timeout is 0 would hand a message
		// out again while it is being worked on: receives ask for the
		// SQS default instead, and the heartbeat extends that.
		q.info.VisibilityTimeout = DefaultVisibilityTimeout
	}
	q.receiveVisibility = q.info.VisibilityTimeout
	if rp := attrs[string(types.QueueAttributeNameRedrivePolicy)]; rp != "" {
		p, err := sqsname.ParseRedrivePolicy(rp)
		if err != nil {
			return nil, err
		}
		q.info.MaxReceiveCount, q.info.DeadLetterARN = p.MaxReceiveCount, p.DeadLetterTargetARN
	}
	return q, nil
}
