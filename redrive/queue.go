// Package redrive inspects and redrives SQS dead-letter queues: it finds a
// pipe's dead-letter queue from its source queue's RedrivePolicy, reads
// messages from it without consuming them, and moves them back to the
// source queue (or another one) with a rate cap, an event-pattern filter
// and a dry run, deleting from the dead-letter queue only what was sent.
//
// It is the logic of `pipes dlq inspect` and `pipes dlq redrive`; the CLI
// only parses flags and prints.
package redrive

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/pipesproject/pipes/internal/kit/awsclient"
	"github.com/pipesproject/pipes/internal/sqsname"
)

// API is the part of the SQS client this package calls. *sqs.Client
// implements it.
type API interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

var _ API = (*sqs.Client)(nil)

// ClientConfig says how NewClient builds the SQS client, as a pipe's sqs
// source does.
type ClientConfig struct {
	// Region overrides the AWS config chain's region.
	Region string
	// Endpoint overrides the SQS endpoint (an SQS-compatible server);
	// AWS_ENDPOINT_URL_SQS works too, through the SDK.
	Endpoint string
	// Profile, when set, is the AWS shared config profile to load (as
	// AWS_PROFILE would name it); it must exist in the shared config or
	// credentials file.
	Profile string
	// RegionGuess is used when neither Region nor the config chain gives a
	// region (the region of a queue ARN or URL).
	RegionGuess string
	// AWSConfig, when set, is used instead of config.LoadDefaultConfig.
	AWSConfig *aws.Config
	// Logger, when set, receives the SDK's own log lines.
	Logger *slog.Logger
}

// NewClient builds an SQS client from the AWS config chain (env, profile,
// IMDS, IRSA) with cfg's profile, region and endpoint on top. It does no
// network I/O.
func NewClient(ctx context.Context, cfg ClientConfig) (*sqs.Client, error) {
	base := cfg.AWSConfig
	if cfg.Profile != "" && base == nil {
		c, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithSharedConfigProfile(cfg.Profile))
		if err != nil {
			return nil, fmt.Errorf("loading the AWS configuration of profile %q: %w", cfg.Profile, err)
		}
		base = &c
	}
	awsCfg, err := awsclient.Load(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	region, ok := awsclient.Region(awsCfg, cfg.Region, cfg.RegionGuess)
	if !ok {
		return nil, errors.New("no AWS region: set the source's region, --region, AWS_REGION or a profile's region")
	}
	ov := awsclient.Overrides{Region: region, Endpoint: cfg.Endpoint, Logger: cfg.Logger}
	return sqs.NewFromConfig(awsCfg, func(o *sqs.Options) { ov.Apply(&o.Region, &o.BaseEndpoint, &o.APIOptions) }), nil
}

// QueueARN is a parsed arn:<partition>:sqs:<region>:<account>:<name>.
type QueueARN = sqsname.QueueARN

// ParseQueueARN parses an SQS queue ARN.
func ParseQueueARN(s string) (QueueARN, error) { return sqsname.ParseQueueARN(s) }

// RegionOfURL guesses the region of an AWS queue URL; "" when it is not one.
func RegionOfURL(s string) string { return sqsname.RegionOfURL(s) }

// ResolveURL returns the URL of the queue named by exactly one of queueURL,
// queueARN and queueName, asking SQS (GetQueueUrl) unless the URL is
// given. It blocks for that call.
func ResolveURL(ctx context.Context, api API, queueURL, queueARN, queueName string) (string, error) {
	if queueURL != "" {
		return queueURL, nil
	}
	in := &sqs.GetQueueUrlInput{QueueName: aws.String(queueName)}
	what := queueName
	if queueARN != "" {
		a, err := ParseQueueARN(queueARN)
		if err != nil {
			return "", err
		}
		in.QueueName, in.QueueOwnerAWSAccountId, what = aws.String(a.Name), aws.String(a.Account), queueARN
	}
	if aws.ToString(in.QueueName) == "" {
		return "", errors.New("no queue: give a queue URL, ARN or name")
	}
	out, err := api.GetQueueUrl(ctx, in)
	if err != nil {
		return "", fmt.Errorf("resolving the URL of SQS queue %s: %w", what, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// ErrNoRedrivePolicy is returned by DeadLetterURL for a queue without a
// RedrivePolicy.
var ErrNoRedrivePolicy = errors.New("the queue has no RedrivePolicy (no dead-letter queue)")

// DeadLetterURL reads the RedrivePolicy of the queue at sourceURL and
// returns the URL of its dead-letter queue. It blocks for two calls; a
// queue without a policy gives an error wrapping ErrNoRedrivePolicy.
func DeadLetterURL(ctx context.Context, api API, sourceURL string) (string, error) {
	out, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(sourceURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameRedrivePolicy},
	})
	if err != nil {
		return "", fmt.Errorf("reading the redrive policy of %s: %w", sourceURL, err)
	}
	policy := out.Attributes[string(types.QueueAttributeNameRedrivePolicy)]
	if policy == "" {
		return "", fmt.Errorf("finding the dead-letter queue of %s: %w", sourceURL, ErrNoRedrivePolicy)
	}
	arn, err := ParseRedrivePolicy(policy)
	if err != nil {
		return "", fmt.Errorf("finding the dead-letter queue of %s: %w", sourceURL, err)
	}
	return ResolveURL(ctx, api, "", arn, "")
}

// ParseRedrivePolicy returns the deadLetterTargetArn of a RedrivePolicy
// attribute (a JSON object), checked to be a queue ARN.
func ParseRedrivePolicy(s string) (deadLetterARN string, err error) {
	arn, err := sqsname.DeadLetterARN(s)
	if err != nil {
		return "", err
	}
	if _, err := ParseQueueARN(arn); err != nil {
		return "", fmt.Errorf("parsing redrive policy %q: %w", s, err)
	}
	return arn, nil
}

// Counts are a queue's approximate message counts and identity.
type Counts struct {
	// ARN is the queue's ARN.
	ARN string `json:"arn"`
	// Visible is ApproximateNumberOfMessages.
	Visible int `json:"visible"`
	// InFlight is ApproximateNumberOfMessagesNotVisible.
	InFlight int `json:"inFlight"`
	// Delayed is ApproximateNumberOfMessagesDelayed.
	Delayed int `json:"delayed"`
}

// QueueCounts reads the queue's ARN and approximate counts. It blocks for
// one call.
func QueueCounts(ctx context.Context, api API, queueURL string) (Counts, error) {
	out, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(queueURL),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameQueueArn,
			types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		return Counts{}, fmt.Errorf("reading the attributes of %s: %w", queueURL, err)
	}
	num := func(n types.QueueAttributeName) int {
		v, _ := strconv.Atoi(out.Attributes[string(n)]) // absent counts are 0
		return v
	}
	return Counts{
		ARN:      out.Attributes[string(types.QueueAttributeNameQueueArn)],
		Visible:  num(types.QueueAttributeNameApproximateNumberOfMessages),
		InFlight: num(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible),
		Delayed:  num(types.QueueAttributeNameApproximateNumberOfMessagesDelayed),
	}, nil
}

// isFIFO tells a FIFO queue by its URL: FIFO queue names end in ".fifo".
func isFIFO(queueURL string) bool { return strings.HasSuffix(queueURL, ".fifo") }
