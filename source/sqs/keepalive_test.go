package sqs_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/pipesproject/pipes/internal/sqstest"
	"github.com/pipesproject/pipes/source/sqs"
)

// TestReceivesAfterTheServerClosedIdleConnections: local-aws-sqs runs on
// Node's http server, which closes a keep-alive connection idle for 5 s
// (with internal/h1's check turned off, this test sees a sixth attempt for
// five calls there); fauxqs keeps them, and the test holds there too. The
// source's transport must find the closed ones before it writes to them:
// after a 6 s pause every call goes through at its first attempt (the SDK
// would retry, and count another attempt, on a connection that failed
// under it).
func TestReceivesAfterTheServerClosedIdleConnections(t *testing.T) {
	sqstest.Servers(t, func(t *testing.T, server sqstest.Server) {
		t.Parallel()
		endpoint := sqstest.EndpointOf(t, server)
		client := sqstest.ClientOf(t, server)
		cfg := aws.Config{Region: sqstest.Region, Credentials: sqstest.Credentials}
		url, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{VisibilityTimeout: 30 * time.Second})
		var attempts atomic.Int64
		ctx := context.Background()
		src, err := sqs.New(ctx, sqs.Config{
			QueueURL: url, Endpoint: endpoint, WaitTime: time.Second, AWSConfig: &cfg,
			OnCall: func(string) { attempts.Add(1) },
		})
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close(ctx)
		if _, err := src.Open(ctx); err != nil {
			t.Fatal(err)
		}
		calls := attempts.Load()
		for round := range 2 {
			sqstest.SendBodies(t, client, url, "a", "b", "c")
			got := 0
			for got < 3 {
				msgs, err := src.Receive(ctx, 10)
				if err != nil {
					t.Fatalf("round %d: receive: %v", round, err)
				}
				if err := src.Ack(ctx, msgs); err != nil && len(msgs) > 0 {
					t.Fatalf("round %d: ack: %v", round, err)
				}
				got += len(msgs)
				calls++ // the receive
				if len(msgs) > 0 {
					calls++ // the delete
				}
			}
			if n := attempts.Load(); n != calls {
				t.Fatalf("round %d: %d attempts for %d calls: a call was sent on a connection the server had closed", round, n, calls)
			}
			if round == 0 {
				time.Sleep(6 * time.Second) // past Node's 5 s keep-alive timeout
			}
		}
	})
}
