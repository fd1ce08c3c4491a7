package pipes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/internal/sqstest"
	"github.com/pipesproject/pipes/pipe"
)

// SQS to Kinesis end to end: a pipe reads a queue of local-aws-sqs and puts
// each message, through an input template, on a stream of kinesalite with
// the partition key rendered from the body; every message is deleted once
// its record is on the stream, and the PutRecords calls are counted in the
// metrics by operation.
func TestSQSToKinesisOnKinesalitePutsEveryMessageWithItsPartitionKey(t *testing.T) {
	t.Parallel()
	fakeAWSEnv(t)
	sqsEndpoint := sqstest.Endpoint(t)
	kinesisEndpoint := sqstest.EndpointOf(t, sqstest.Kinesalite)
	sqsc := sqstest.Client(t)
	queueURL, _ := sqstest.CreateQueue(t, sqsc, sqstest.QueueOptions{VisibilityTimeout: 10 * time.Second})
	stream := sqstest.CreateStream(t, "pipes-e2e", 2)
	const n = 25
	var bodies []string
	for i := range n {
		bodies = append(bodies, fmt.Sprintf(`{"id":%d,"customer":"c%d"}`, i, i%3))
	}
	sqstest.SendBodies(t, sqsc, queueURL, bodies...)

	metrics := pipe.NewMetrics(prometheus.NewRegistry())
	built := buildPipe(t, pipes.NewRegistry(), pipes.Env{Metrics: metrics}, fmt.Sprintf(`
name: to-stream
source: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1, wait_time: 1s, batch_size: 10}
target:
  type: kinesis
  stream: %s
  partition_key: $.body.customer
  endpoint: %s
  input_template: '{"order": <$.body.id>}'
`, queueURL, sqsEndpoint, stream, kinesisEndpoint))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pipe.NewRunner(built...).Run(ctx) }()
	var recs []string
	waitFor(t, 60*time.Second, fmt.Sprintf("%d records on the stream", n), func() bool {
		got := sqstest.StreamRecords(t, stream, 0, 0)
		recs = recs[:0]
		for _, r := range got {
			recs = append(recs, aws.ToString(r.PartitionKey)+" "+string(r.Data))
		}
		return len(recs) >= n
	})
	waitFor(t, 30*time.Second, "the queue to be empty", func() bool {
		visible, inflight := sqstest.Count(t, sqsc, queueURL)
		return visible+inflight == 0
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf(`c%d {"order": %d}`, i%3, i))
	}
	slices.Sort(recs)
	slices.Sort(want)
	if !slices.Equal(recs, want) {
		t.Errorf("records on the stream:\n%q\nwant:\n%q", recs, want)
	}
	for _, r := range recs {
		var v map[string]any
		if _, data, _ := strings.Cut(r, " "); json.Unmarshal([]byte(data), &v) != nil {
			t.Errorf("record %q is not the template's JSON", r)
		}
	}
	if calls := testutil.ToFloat64(metrics.APICalls.WithLabelValues("to-stream", "PutRecords")); calls < 3 {
		t.Errorf("PutRecords calls counted = %v, want one per batch (at least 3 for %d messages in batches of 10)", calls, n)
	}
}
