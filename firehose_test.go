package pipes_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/internal/sqstest"
	"github.com/pipesproject/pipes/pipe"
)

// SQS to Firehose end to end: a pipe reads a queue of local-aws-sqs and
// puts each message, through an input template, on a delivery stream of
// sqstest.FirehoseServer (an in-process server that decodes the SDK's
// awsJson1_1 requests and checks PutRecordBatch's limits: npm has no
// Firehose emulator). Every message ends on the stream once, the queue
// empties, and the PutRecordBatch calls are counted in the metrics.
func TestSQSToFirehosePutsEveryMessageOnTheDeliveryStream(t *testing.T) {
	t.Parallel()
	fakeAWSEnv(t)
	sqsEndpoint := sqstest.Endpoint(t)
	sqsc := sqstest.Client(t)
	queueURL, _ := sqstest.CreateQueue(t, sqsc, sqstest.QueueOptions{VisibilityTimeout: 2 * time.Second})
	fh := sqstest.StartFirehose(t, "orders-archive")
	const n = 15
	var bodies []string
	for i := range n {
		bodies = append(bodies, fmt.Sprintf(`{"id":%d}`, i))
	}
	sqstest.SendBodies(t, sqsc, queueURL, bodies...)

	metrics := pipe.NewMetrics(prometheus.NewRegistry())
	built := buildPipe(t, pipes.NewRegistry(), pipes.Env{Metrics: metrics}, fmt.Sprintf(`
name: to-archive
source: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1, wait_time: 1s, batch_size: 10}
target:
  type: firehose
  delivery_stream: arn:aws:firehose:us-east-1:123456789012:deliverystream/orders-archive
  endpoint: %s
  input_template: '{"order": <$.body.id>}'
`, queueURL, sqsEndpoint, fh.URL))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pipe.NewRunner(built...).Run(ctx) }()
	waitFor(t, 60*time.Second, fmt.Sprintf("%d records on the delivery stream", n), func() bool { return len(fh.Records()) >= n })
	waitFor(t, 30*time.Second, "the queue to be empty", func() bool {
		visible, inflight := sqstest.Count(t, sqsc, queueURL)
		return visible+inflight == 0
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := fh.Records()
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf(`{"order": %d}`, i))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("records on the stream:\n%q\nwant:\n%q", got, want)
	}
	if calls := testutil.ToFloat64(metrics.APICalls.WithLabelValues("to-archive", "PutRecordBatch")); calls < 2 {
		t.Errorf("PutRecordBatch calls counted = %v, want one per batch (at least 2 for %d messages in batches of 10)", calls, n)
	}
}
