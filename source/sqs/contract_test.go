package sqs_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/pipesproject/pipes/internal/sqstest"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/source/sourcetest"
	"github.com/pipesproject/pipes/source/sqs"
)

// The SQS source passes the same contract suite as every source, on both
// SQS-compatible servers: the suite relies on visibility timeouts, long
// polls, deletes and visibility changes, which both get right. Both may
// hand a message to a long poll whose client has given up, as SQS does.
// The stale-receipt-handle check runs on local-aws-sqs only: fauxqs reports
// a garbage receipt handle as deleted.
func TestSourceContract(t *testing.T) {
	sqstest.Servers(t, func(t *testing.T, server sqstest.Server) {
		endpoint := sqstest.EndpointOf(t, server)
		client := sqstest.ClientOf(t, server)
		cfg := aws.Config{Region: sqstest.Region, Credentials: sqstest.Credentials}
		sourcetest.Run(t, sourcetest.Harness{
			// The servers' minimum visibility is 1 s, and it must be at
			// least the long-poll wait.
			VisibilityTimeout:          2 * time.Second,
			WaitTime:                   time.Second,
			AbandonedPollsTakeMessages: true,
			ForgedHandlesSettle:        server == sqstest.Fauxqs,
			New: func(t *testing.T, opts sourcetest.QueueOptions) (source.Source, func(t *testing.T, bodies ...string)) {
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
	})
}
