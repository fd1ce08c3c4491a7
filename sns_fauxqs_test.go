package pipes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/internal/sqstest"
	"github.com/pipesproject/pipes/pipe"
)

// The tests of this file run on fauxqs only: local-aws-sqs has no SNS. A
// topic is subscribed to an SQS queue; one pipe publishes to the topic
// with the sns target and another reads the queue with `unwrap: sns`.

// snsRecord is the part of a record the SNS tests read.
type snsRecord struct {
	Body              string            `json:"body"`
	Attributes        map[string]string `json:"attributes"`
	MessageAttributes map[string]struct {
		StringValue string `json:"stringValue"`
		DataType    string `json:"dataType"`
	} `json:"messageAttributes"`
	Envelope *struct {
		TopicArn string `json:"TopicArn"`
	} `json:"envelope"`
}

// collector is a func target that keeps the records it gets.
type collector struct {
	mu   sync.Mutex
	recs []snsRecord
}

func (c *collector) target(t *testing.T) pipe.Target {
	return pipe.TargetFunc(func(_ context.Context, events []*pipe.Event) (pipe.Result, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, ev := range events {
			var rec snsRecord
			if err := json.Unmarshal(ev.RecordJSON, &rec); err != nil {
				t.Errorf("decoding the record %s: %v", ev.RecordJSON, err)
			}
			c.recs = append(c.recs, rec)
		}
		return pipe.Result{}, nil
	})
}

func (c *collector) records() []snsRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.recs)
}

// subscribedTopic makes a topic (FIFO when fifo) subscribed to a fresh
// queue of the same kind, with raw message delivery as given, and returns
// the topic's ARN and the queue's URL. Both go when the test ends.
func subscribedTopic(t *testing.T, snsc *sns.Client, sqsc *sqs.Client, fifo, raw bool) (topicARN, queueURL string) {
	t.Helper()
	name, attrs := sqstest.QueueName(t.Name(), ""), map[string]string{}
	if fifo {
		name, attrs = sqstest.QueueName(t.Name(), ".fifo"), map[string]string{"FifoTopic": "true"}
	}
	topic, err := snsc.CreateTopic(t.Context(), &sns.CreateTopicInput{Name: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatalf("creating topic %s: %v", name, err)
	}
	topicARN = aws.ToString(topic.TopicArn)
	t.Cleanup(func() {
		_, _ = snsc.DeleteTopic(context.Background(), &sns.DeleteTopicInput{TopicArn: aws.String(topicARN)})
	})
	queueURL, _ = sqstest.CreateQueue(t, sqsc, sqstest.QueueOptions{FIFO: fifo, VisibilityTimeout: 10 * time.Second})
	q, err := sqsc.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(queueURL), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snsc.Subscribe(t.Context(), &sns.SubscribeInput{
		TopicArn: aws.String(topicARN), Protocol: aws.String("sqs"),
		Endpoint:   aws.String(q.Attributes[string(types.QueueAttributeNameQueueArn)]),
		Attributes: map[string]string{"RawMessageDelivery": fmt.Sprint(raw)},
	}); err != nil {
		t.Fatalf("subscribing %s to %s: %v", queueURL, topicARN, err)
	}
	return topicARN, queueURL
}

// A PublishBatch with message attributes, and the sns target of a pipe,
// reach the subscribed queue; a pipe reading it with `unwrap: sns` sees the
// published message as the body and its attributes as message attributes,
// whether the subscription delivers the SNS envelope (raw off: the
// attributes are lifted out of it, the envelope is kept) or the raw
// message (raw on: SNS made the attributes SQS message attributes, and
// unwrap leaves a body that is no envelope alone).
func TestSNSTopicToQueueOnFauxqsIsReadBackWithUnwrap(t *testing.T) {
	t.Parallel()
	for _, raw := range []bool{false, true} {
		t.Run(fmt.Sprintf("raw delivery %v", raw), func(t *testing.T) {
			t.Parallel()
			fakeAWSEnv(t)
			endpoint := sqstest.EndpointOf(t, sqstest.Fauxqs)
			sqsc := sqstest.ClientOf(t, sqstest.Fauxqs)
			snsc := sqstest.SNSClient(t)
			topicARN, subscribed := subscribedTopic(t, snsc, sqsc, false, raw)
			sourceURL, _ := sqstest.CreateQueue(t, sqsc, sqstest.QueueOptions{VisibilityTimeout: 10 * time.Second})

			out, err := snsc.PublishBatch(t.Context(), &sns.PublishBatchInput{
				TopicArn: aws.String(topicARN),
				PublishBatchRequestEntries: []snstypes.PublishBatchRequestEntry{
					{Id: aws.String("1"), Message: aws.String(`{"id":1}`), MessageAttributes: map[string]snstypes.MessageAttributeValue{
						"tenant": {DataType: aws.String("String"), StringValue: aws.String("acme")},
						"weight": {DataType: aws.String("Number"), StringValue: aws.String("7")},
					}},
					{Id: aws.String("2"), Message: aws.String(`{"id":2}`), MessageAttributes: map[string]snstypes.MessageAttributeValue{
						"tenant": {DataType: aws.String("String"), StringValue: aws.String("other")},
					}},
				},
			})
			if err != nil || len(out.Failed) > 0 {
				t.Fatalf("PublishBatch = %+v, %v", out, err)
			}
			sqstest.SendBodies(t, sqsc, sourceURL, `{"id":3}`, `{"id":4}`)

			var got collector
			reg := pipes.NewRegistry()
			reg.MustRegisterFunc("collect", got.target(t))
			built := buildPipe(t, reg, pipes.Env{}, fmt.Sprintf(`
name: publish
source: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1, wait_time: 1s}
target:
  type: sns
  topic_arn: %s
  endpoint: %s
  input_template: '{"id": <$.body.id>, "via": "pipe"}'
`, sourceURL, endpoint, topicARN, endpoint))
			built = append(built, buildPipe(t, reg, pipes.Env{}, fmt.Sprintf(`
name: read
source: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1, wait_time: 1s, unwrap: sns}
filter:
  patterns:
    - {"messageAttributes": {"tenant": {"stringValue": ["acme"]}}}
    - {"body": {"via": ["pipe"]}}
target: {type: func, func: collect}
`, subscribed, endpoint))...)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- pipe.NewRunner(built...).Run(ctx) }()
			waitFor(t, 30*time.Second, "three records through the topic", func() bool { return len(got.records()) >= 3 })
			time.Sleep(time.Second) // the filtered one must not come late
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}

			recs := got.records()
			var bodies []string
			for _, r := range recs {
				bodies = append(bodies, r.Body)
				if (r.Envelope != nil) == raw || (!raw && r.Envelope.TopicArn != topicARN) {
					t.Errorf("record %s has envelope %+v, want one from %s only without raw delivery", r.Body, r.Envelope, topicARN)
				}
				if r.Body == `{"id":1}` {
					if a := r.MessageAttributes["tenant"]; a.StringValue != "acme" || a.DataType != "String" {
						t.Errorf("tenant attribute %+v, want the String acme", a)
					}
					if a := r.MessageAttributes["weight"]; a.StringValue != "7" || a.DataType != "Number" {
						t.Errorf("weight attribute %+v, want the Number 7", a)
					}
				}
			}
			slices.Sort(bodies)
			want := []string{`{"id":1}`, `{"id": 3, "via": "pipe"}`, `{"id": 4, "via": "pipe"}`}
			slices.Sort(want)
			if !slices.Equal(bodies, want) {
				t.Errorf("the reading pipe got %q, want %q (the other tenant filtered out)", bodies, want)
			}
		})
	}
}

// The sns target publishes to a FIFO topic with a group id and a
// deduplication id rendered per event; the FIFO queue subscribed to it
// gets each message once, in its group, in order, and a message published
// again with the same deduplication id is dropped by the topic.
func TestSNSFIFOTopicOnFauxqsGetsGroupAndDeduplicationIDs(t *testing.T) {
	t.Parallel()
	fakeAWSEnv(t)
	endpoint := sqstest.EndpointOf(t, sqstest.Fauxqs)
	sqsc := sqstest.ClientOf(t, sqstest.Fauxqs)
	snsc := sqstest.SNSClient(t)
	topicARN, subscribed := subscribedTopic(t, snsc, sqsc, true, false)
	sourceURL, _ := sqstest.CreateQueue(t, sqsc, sqstest.QueueOptions{FIFO: true, VisibilityTimeout: 10 * time.Second})
	send := func(bodies ...string) {
		t.Helper()
		for _, b := range bodies {
			var m struct{ Customer string }
			_ = json.Unmarshal([]byte(b), &m)
			if _, err := sqsc.SendMessage(t.Context(), &sqs.SendMessageInput{
				QueueUrl: aws.String(sourceURL), MessageBody: aws.String(b),
				MessageGroupId: aws.String(m.Customer), MessageDeduplicationId: aws.String(sqstest.QueueName("d", "")),
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(`{"customer":"c1","id":"o1"}`, `{"customer":"c2","id":"o2"}`, `{"customer":"c1","id":"o3"}`)

	var got collector
	reg := pipes.NewRegistry()
	reg.MustRegisterFunc("collect", got.target(t))
	built := buildPipe(t, reg, pipes.Env{}, fmt.Sprintf(`
name: publish
source: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1, wait_time: 1s}
target:
  type: sns
  topic_arn: %s
  endpoint: %s
  message_group_id: '<$.body.customer>'
  message_deduplication_id: '<$.body.id>'
  input_template: '<$.body>'
`, sourceURL, endpoint, topicARN, endpoint))
	built = append(built, buildPipe(t, reg, pipes.Env{}, fmt.Sprintf(`
name: read
source: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1, wait_time: 1s, unwrap: sns}
target: {type: func, func: collect}
`, subscribed, endpoint))...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pipe.NewRunner(built...).Run(ctx) }()
	waitFor(t, 30*time.Second, "three records through the FIFO topic", func() bool { return len(got.records()) >= 3 })
	send(`{"customer":"c1","id":"o1"}`) // the same deduplication id again
	time.Sleep(3 * time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	if visible, inflight := sqstest.Count(t, sqsc, sourceURL); visible+inflight != 0 {
		t.Fatalf("the publishing pipe left %d visible and %d in-flight messages: the duplicate was not published", visible, inflight)
	}
	byGroup := map[string][]string{}
	for _, r := range got.records() {
		var m struct{ Customer, ID string }
		if err := json.Unmarshal([]byte(r.Body), &m); err != nil {
			t.Fatalf("body %q: %v", r.Body, err)
		}
		if g := r.Attributes["MessageGroupId"]; g != m.Customer {
			t.Errorf("%s arrived in group %q, want %q", r.Body, g, m.Customer)
		}
		if d := r.Attributes["MessageDeduplicationId"]; d != m.ID {
			t.Errorf("%s arrived with deduplication id %q, want %q", r.Body, d, m.ID)
		}
		byGroup[m.Customer] = append(byGroup[m.Customer], m.ID)
	}
	if got, want := fmt.Sprint(byGroup), fmt.Sprint(map[string][]string{"c1": {"o1", "o3"}, "c2": {"o2"}}); got != want {
		t.Errorf("the subscribed queue got %s, want %s: each once (the duplicate dropped), in order", got, want)
	}
}
