package sqs_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/pipesproject/pipes/internal/sqstest"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source/sourcetest"
	"github.com/pipesproject/pipes/source/sqs"
)

// The SQS source passes the same contract suite as every source, against
// the real SQS-compatible server.
func TestSourceContract(t *testing.T) {
	endpoint := sqstest.Endpoint(t)
	client := sqstest.Client(t)
	cfg := aws.Config{Region: sqstest.Region, Credentials: credentials.NewStaticCredentialsProvider("AKIDPIPESTEST", "pipes-test-secret", "")}
	sourcetest.Run(t, sourcetest.Harness{
		// The server's minimum visibility is 1 s, and it must be at least
		// the long-poll wait.
		VisibilityTimeout:          2 * time.Second,
		WaitTime:                   time.Second,
		AbandonedPollsTakeMessages: true,
		New: func(t *testing.T, opts sourcetest.QueueOptions) (pipe.Source, func(t *testing.T, bodies ...string)) {
			url, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{VisibilityTimeout: max(opts.VisibilityTimeout, opts.WaitTime)})
			src, err := sqs.New(context.Background(), sqs.Config{
				QueueURL: url, Endpoint: endpoint, WaitTime: opts.WaitTime,
				VisibilityTimeout: opts.VisibilityTimeout, AWSConfig: &cfg,
			})
			if err != nil {
				t.Fatal(err)
			}
			return src, func(t *testing.T, bodies ...string) { sqstest.SendBodies(t, client, url, bodies...) }
		},
	})
}
