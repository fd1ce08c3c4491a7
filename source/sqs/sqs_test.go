package sqs

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/internal/sqstest"
	"github.com/pipesproject/pipes/source"
)

// Integration tests: they run against the SQS-compatible servers of
// internal/sqstest and check the results by reading the queues. A test
// run through sqstest.Servers relies only on what both servers get right;
// one that needs what only one server gets right runs on that one and
// says why.

// callCounter counts OnCall calls by operation.
type callCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *callCounter) onCall(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[op]++
}

func (c *callCounter) get(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[op]
}

// testAWSConfig is an AWS config for the test server with fake credentials.
func testAWSConfig() *aws.Config {
	return &aws.Config{
		Region:      sqstest.Region,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDPIPESTEST", "pipes-test-secret", ""),
	}
}

// openSource makes and opens a source for local-aws-sqs.
func openSource(t *testing.T, cfg Config) (*Source, source.Info) {
	t.Helper()
	return openSourceOn(t, sqstest.LocalAWSSQS, cfg)
}

// openSourceOn makes and opens a source for the test server s.
func openSourceOn(t *testing.T, s sqstest.Server, cfg Config) (*Source, source.Info) {
	t.Helper()
	cfg.Endpoint = sqstest.EndpointOf(t, s)
	if cfg.AWSConfig == nil {
		cfg.AWSConfig = testAWSConfig()
	}
	src, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	info, err := src.Open(t.Context())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = src.Close(context.Background()) })
	return src, info
}

// receiveN receives until n messages have come.
func receiveN(t *testing.T, src *Source, n int) []*source.Message {
	t.Helper()
	var got []*source.Message
	for len(got) < n {
		msgs, err := src.Receive(t.Context(), min(10, n-len(got)))
		if err != nil {
			t.Fatalf("Receive: %v", err)
		}
		if len(msgs) == 0 {
			t.Fatalf("Receive came back empty after %d of %d messages", len(got), n)
		}
		got = append(got, msgs...)
	}
	return got
}

// Both servers: a received message carries every record field.
func TestReceiveMapsEveryRecordFieldToThePipesShape(t *testing.T) {
	t.Parallel()
	sqstest.Servers(t, func(t *testing.T, s sqstest.Server) {
		t.Parallel()
		testReceiveMapsEveryRecordFieldToThePipesShape(t, s)
	})
}

func testReceiveMapsEveryRecordFieldToThePipesShape(t *testing.T, s sqstest.Server) {
	c := sqstest.ClientOf(t, s)
	url, _ := sqstest.CreateQueue(t, c, sqstest.QueueOptions{VisibilityTimeout: 30 * time.Second})
	src, info := openSourceOn(t, s, Config{QueueURL: url, WaitTime: 2 * time.Second})

	body := `{"order":42}`
	sent, err := c.SendMessage(t.Context(), &sqs.SendMessageInput{
		QueueUrl:    aws.String(url),
		MessageBody: aws.String(body),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"kind":  {DataType: aws.String("String"), StringValue: aws.String("order")},
			"count": {DataType: aws.String("Number"), StringValue: aws.String("3")},
			"blob":  {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 2, 255}},
		},
	})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	msgs := receiveN(t, src, 1)
	raw, err := msgs[0].JSON()
	if err != nil {
		t.Fatalf("JSON: %v", err)
	}
	var rec map[string]any
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatalf("decoding the record %s: %v", raw, err)
	}

	wantKeys := []string{"attributes", "awsRegion", "body", "eventSource", "eventSourceARN", "md5OfBody", "md5OfMessageAttributes", "messageAttributes", "messageId", "receiptHandle"}
	if keys := slices.Sorted(maps.Keys(rec)); !slices.Equal(keys, wantKeys) {
		t.Errorf("record keys = %v, want %v", keys, wantKeys)
	}
	sum := md5.Sum([]byte(body))
	for _, c := range []struct{ field, want string }{
		{"messageId", aws.ToString(sent.MessageId)},
		{"body", body},
		{"md5OfBody", hex.EncodeToString(sum[:])},
		{"md5OfMessageAttributes", aws.ToString(sent.MD5OfMessageAttributes)},
		{"eventSource", "aws:sqs"},
		{"eventSourceARN", info.ARN},
		{"awsRegion", "us-east-1"},
	} {
		if got := rec[c.field]; got != c.want {
			t.Errorf("%s = %v, want %q", c.field, got, c.want)
		}
	}
	if rh, _ := rec["receiptHandle"].(string); rh == "" {
		t.Errorf("receiptHandle is empty")
	}

	attrs, _ := rec["attributes"].(map[string]any)
	for _, name := range []string{"ApproximateReceiveCount", "SentTimestamp", "SenderId", "ApproximateFirstReceiveTimestamp"} {
		if v, ok := attrs[name].(string); !ok || v == "" {
			t.Errorf("attributes.%s = %#v, want a non-empty string", name, attrs[name])
		}
	}
	if attrs["ApproximateReceiveCount"] != "1" {
		t.Errorf("ApproximateReceiveCount = %v, want \"1\"", attrs["ApproximateReceiveCount"])
	}

	mattrs, _ := rec["messageAttributes"].(map[string]any)
	want := map[string]map[string]any{
		"kind":  {"stringValue": "order", "stringListValues": []any{}, "binaryListValues": []any{}, "dataType": "String"},
		"count": {"stringValue": "3", "stringListValues": []any{}, "binaryListValues": []any{}, "dataType": "Number"},
		"blob":  {"binaryValue": base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 255}), "stringListValues": []any{}, "binaryListValues": []any{}, "dataType": "Binary"},
	}
	if len(mattrs) != len(want) {
		t.Errorf("messageAttributes = %v, want %d attributes", mattrs, len(want))
	}
	for name, w := range want {
		got, _ := mattrs[name].(map[string]any)
		gotJSON, _ := json.Marshal(got)
		wantJSON, _ := json.Marshal(w)
		if string(gotJSON) != string(wantJSON) {
			t.Errorf("messageAttributes.%s = %s, want %s", name, gotJSON, wantJSON)
		}
	}
}

// Both servers end a long poll on an empty queue empty after its wait.
func TestReceiveReturnsNothingWhenTheWaitTimePassesOnAnEmptyQueue(t *testing.T) {
	t.Parallel()
	sqstest.Servers(t, func(t *testing.T, s sqstest.Server) {
		t.Parallel()
		testReceiveReturnsNothingWhenTheWaitTimePassesOnAnEmptyQueue(t, s)
	})
}

func testReceiveReturnsNothingWhenTheWaitTimePassesOnAnEmptyQueue(t *testing.T, s sqstest.Server) {
	c := sqstest.ClientOf(t, s)
	url, _ := sqstest.CreateQueue(t, c, sqstest.QueueOptions{VisibilityTimeout: 30 * time.Second})
	src, _ := openSourceOn(t, s, Config{QueueURL: url, WaitTime: time.Second})
	msgs, err := src.Receive(t.Context(), 10)
	if err != nil || len(msgs) != 0 {
		t.Fatalf("Receive = %d messages, %v; want none and no error", len(msgs), err)
	}
}

// Both servers: a cancelled long poll returns the context error.
func TestReceiveReturnsTheContextErrorWhenCancelledDuringALongPoll(t *testing.T) {
	t.Parallel()
	sqstest.Servers(t, func(t *testing.T, s sqstest.Server) {
		t.Parallel()
		testReceiveReturnsTheContextErrorWhenCancelledDuringALongPoll(t, s)
	})
}

func testReceiveReturnsTheContextErrorWhenCancelledDuringALongPoll(t *testing.T, s sqstest.Server) {
	c := sqstest.ClientOf(t, s)
	url, _ := sqstest.CreateQueue(t, c, sqstest.QueueOptions{VisibilityTimeout: 30 * time.Second})
	src, _ := openSourceOn(t, s, Config{QueueURL: url, WaitTime: 20 * time.Second})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		time.Sleep(200 * time.Millisecond) // let the long poll start
		cancel()
	}()
	// Without cancellation the poll would end empty with a nil error.
	msgs, err := src.Receive(ctx, 10)
	if !errors.Is(err, context.Canceled) || msgs != nil {
		t.Fatalf("Receive = %v, %v; want no messages and context.Canceled", msgs, err)
	}
}

// Both servers delete in batches of ten and count an emptied queue as
// empty.
func TestDeletingTwentyFiveMessagesEmptiesTheQueueInThreeCalls(t *testing.T) {
	t.Parallel()
	sqstest.Servers(t, func(t *testing.T, s sqstest.Server) {
		t.Parallel()
		testDeletingTwentyFiveMessagesEmptiesTheQueueInThreeCalls(t, s)
	})
}

func testDeletingTwentyFiveMessagesEmptiesTheQueueInThreeCalls(t *testing.T, s sqstest.Server) {
	c := sqstest.ClientOf(t, s)
	url, _ := sqstest.CreateQueue(t, c, sqstest.QueueOptions{VisibilityTimeout: 30 * time.Second})
	var calls callCounter
	src, _ := openSourceOn(t, s, Config{QueueURL: url, WaitTime: time.Second, OnCall: calls.onCall})
	bodies := make([]string, 25)
	for i := range bodies {
		bodies[i] = "m" + string(rune('a'+i))
	}
	sqstest.SendBodies(t, c, url, bodies...)
	msgs := receiveN(t, src, 25)
	if err := src.Delete(t.Context(), msgs); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if visible, inflight := sqstest.Count(t, c, url); visible != 0 || inflight != 0 {
		t.Errorf("after Delete the queue has %d visible and %d in-flight messages, want none", visible, inflight)
	}
	if n := calls.get("DeleteMessageBatch"); n != 3 {
		t.Errorf("DeleteMessageBatch calls = %d, want 3", n)
	}
	if n := calls.get("GetQueueAttributes"); n != 1 {
		t.Errorf("GetQueueAttributes calls = %d, want 1 (Open)", n)
	}
	if n := calls.get("ReceiveMessage"); n < 3 {
		t.Errorf("ReceiveMessage calls = %d, want at least 3", n)
	}
}

// Both servers make a released message visible at once; fauxqs counts
// only receives (receive count exactly 2), local-aws-sqs counts the
// visibility change as a receive too.
func TestChangingVisibilityToZeroMakesAMessageVisibleAgainAtOnce(t *testing.T) {
	t.Parallel()
	sqstest.Servers(t, func(t *testing.T, s sqstest.Server) {
		t.Parallel()
		testChangingVisibilityToZeroMakesAMessageVisibleAgainAtOnce(t, s)
	})
}

func testChangingVisibilityToZeroMakesAMessageVisibleAgainAtOnce(t *testing.T, s sqstest.Server) {
	c := sqstest.ClientOf(t, s)
	url, _ := sqstest.CreateQueue(t, c, sqstest.QueueOptions{VisibilityTimeout: 60 * time.Second})
	src, _ := openSourceOn(t, s, Config{QueueURL: url, WaitTime: 2 * time.Second})
	ids := sqstest.SendBodies(t, c, url, "again")
	first := receiveN(t, src, 1)
	if err := src.ChangeVisibility(t.Context(), first, 0); err != nil {
		t.Fatalf("ChangeVisibility: %v", err)
	}
	// The queue hides a receive for 60 s, so only the release brings it back.
	again := receiveN(t, src, 1)
	// (local-aws-sqs also counts the visibility change as a receive.)
	if again[0].MessageID != ids[0] || again[0].ReceiveCount() < 2 {
		t.Fatalf("received %s (receive count %d) again, want %s received again", again[0].MessageID, again[0].ReceiveCount(), ids[0])
	}
	if s == sqstest.Fauxqs && again[0].ReceiveCount() != 2 {
		t.Errorf("receive count %d on fauxqs, want 2: a visibility change is no receive", again[0].ReceiveCount())
	}
}

// local-aws-sqs only: it answers a garbage receipt handle with
// ReceiptHandleIsInvalid, where fauxqs reports it as deleted.
func TestAnInvalidReceiptHandleIsASenderFaultNamingTheMessageWhileTheOthersAreDeleted(t *testing.T) {
	t.Parallel()
	c := sqstest.Client(t)
	url, _ := sqstest.CreateQueue(t, c, sqstest.QueueOptions{VisibilityTimeout: 60 * time.Second})
	src, _ := openSource(t, Config{QueueURL: url, WaitTime: time.Second})
	sqstest.SendBodies(t, c, url, "a", "b", "c")
	msgs := receiveN(t, src, 3)
	bad := &source.Message{MessageID: msgs[1].MessageID, ReceiptHandle: "not-a-receipt-handle"}
	for _, op := range []struct {
		name   string
		settle func([]*source.Message) error
	}{
		{"change visibility", func(m []*source.Message) error { return src.ChangeVisibility(t.Context(), m, time.Minute) }},
		{"delete", func(m []*source.Message) error { return src.Delete(t.Context(), m) }},
	} {
		err := op.settle([]*source.Message{msgs[0], bad, msgs[2]})
		var serr *core.SettleError
		if !errors.As(err, &serr) {
			t.Fatalf("%s: error = %v, want a *pipe.SettleError", op.name, err)
		}
		var entry *EntryError
		if serr.Op != op.name || !serr.SenderFault || len(serr.Failed) != 1 || !errors.As(serr.Failed[bad.ReceiptHandle], &entry) || entry.Code != "ReceiptHandleIsInvalid" {
			t.Fatalf("%s: SettleError = %+v, want a sender fault ReceiptHandleIsInvalid for %s only", op.name, serr, bad.MessageID)
		}
	}
	if visible, inflight := sqstest.Count(t, c, url); visible != 1 || inflight != 1 {
		t.Errorf("queue has %d visible and %d in-flight messages, want only the undeleted one in flight", visible, inflight)
	}
}

// Both servers keep a queue's visibility timeout, redrive policy and
// FIFO attribute; their account ids differ.
func TestOpenReadsTheQueueByURLNameOrARN(t *testing.T) {
	t.Parallel()
	sqstest.Servers(t, func(t *testing.T, s sqstest.Server) {
		t.Parallel()
		testOpenReadsTheQueueByURLNameOrARN(t, s)
	})
}

func testOpenReadsTheQueueByURLNameOrARN(t *testing.T, s sqstest.Server) {
	c := sqstest.ClientOf(t, s)
	url, dlq := sqstest.CreateQueue(t, c, sqstest.QueueOptions{VisibilityTimeout: 45 * time.Second, MaxReceiveCount: 3})
	fifoURL, _ := sqstest.CreateQueue(t, c, sqstest.QueueOptions{FIFO: true, VisibilityTimeout: 30 * time.Second})
	name := url[strings.LastIndex(url, "/")+1:]
	// The URL's path is /account/name.
	prefix := "arn:aws:sqs:us-east-1:" + strings.Split(url, "/")[3] + ":"
	arn := prefix + name
	dlqARN := prefix + dlq[strings.LastIndex(dlq, "/")+1:]
	redriven := source.Info{ARN: arn, VisibilityTimeout: 45 * time.Second, MaxReceiveCount: 3, DeadLetterARN: dlqARN}
	tests := []struct {
		name string
		cfg  Config
		want source.Info
	}{
		{"a URL reads the redrive policy", Config{QueueURL: url}, redriven},
		{"a name is resolved with GetQueueUrl", Config{QueueName: name}, redriven},
		{"an ARN is resolved with its name and account", Config{QueueARN: arn}, redriven},
		{"a visibility override replaces the queue's", Config{QueueURL: url, VisibilityTimeout: 90 * time.Second},
			source.Info{ARN: arn, VisibilityTimeout: 90 * time.Second, MaxReceiveCount: 3, DeadLetterARN: dlqARN}},
		{"a FIFO queue says so", Config{QueueURL: fifoURL},
			source.Info{ARN: prefix + fifoURL[strings.LastIndex(fifoURL, "/")+1:], FIFO: true, VisibilityTimeout: 30 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, info := openSourceOn(t, s, tt.cfg)
			if info != tt.want {
				t.Errorf("Open = %+v, want %+v", info, tt.want)
			}
		})
	}
}

// Both servers answer a missing queue with a typed QueueDoesNotExist
// (their error-code strings are not AWS's: classification uses errors.As).
func TestOpenOfAMissingQueueIsAPermanentError(t *testing.T) {
	t.Parallel()
	sqstest.Servers(t, func(t *testing.T, s sqstest.Server) {
		t.Parallel()
		testOpenOfAMissingQueueIsAPermanentError(t, s)
	})
}

func testOpenOfAMissingQueueIsAPermanentError(t *testing.T, s sqstest.Server) {
	src, err := New(t.Context(), Config{QueueName: "pipes-no-such-queue", Endpoint: sqstest.EndpointOf(t, s), AWSConfig: testAWSConfig()})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_, err = src.Open(t.Context())
	if !core.IsPermanent(err) || !strings.Contains(err.Error(), "pipes-no-such-queue") {
		t.Fatalf("Open = %v, want a permanent error naming the queue", err)
	}
}

// Both servers: the endpoint comes from AWS_ENDPOINT_URL_SQS.
func TestOpenUsesTheDefaultAWSConfigChainAndItsSQSEndpoint(t *testing.T) {
	sqstest.Servers(t, func(t *testing.T, s sqstest.Server) {
		testOpenUsesTheDefaultAWSConfigChainAndItsSQSEndpoint(t, s)
	})
}

func testOpenUsesTheDefaultAWSConfigChainAndItsSQSEndpoint(t *testing.T, s sqstest.Server) {
	c := sqstest.ClientOf(t, s)
	url, _ := sqstest.CreateQueue(t, c, sqstest.QueueOptions{})
	t.Setenv("AWS_ENDPOINT_URL_SQS", sqstest.EndpointOf(t, s))
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDPIPESTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "pipes-test-secret")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	src, err := New(t.Context(), Config{QueueName: url[strings.LastIndex(url, "/")+1:]})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := src.Open(t.Context()); err != nil {
		t.Fatalf("Open: %v", err)
	}
}

func TestUsingTheSourceBeforeOpenIsAnError(t *testing.T) {
	t.Parallel()
	src, err := New(t.Context(), Config{QueueURL: "http://127.0.0.1:1/123456789012/q", AWSConfig: testAWSConfig()})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := src.Receive(t.Context(), 10); err == nil {
		t.Errorf("Receive before Open succeeded")
	}
	if err := src.Delete(t.Context(), []*source.Message{{MessageID: "1"}}); err == nil {
		t.Errorf("Delete before Open succeeded")
	}
}

func TestNewRejectsBadConfigs(t *testing.T) {
	t.Parallel()
	if _, err := New(t.Context(), Config{QueueName: "q", AWSConfig: &aws.Config{}}); err == nil || !strings.Contains(err.Error(), "no AWS region") {
		t.Errorf("New without a region = %v, want an error saying so", err)
	}
	tests := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"no queue at all", Config{}, []string{"give exactly one of"}},
		{"a URL and a name", Config{QueueURL: "http://x/1/q", QueueName: "q"}, []string{"give exactly one of"}},
		{"an ARN of another service", Config{QueueARN: "arn:aws:sns:us-east-1:1:t"}, []string{"not of the form"}},
		{"every problem at once", Config{QueueName: "q", WaitTime: 21 * time.Second, VisibilityTimeout: 13 * time.Hour},
			[]string{"wait time 21s is outside 0..20s", "visibility timeout 13h0m0s is outside 0..12h0m0s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.cfg.AWSConfig = testAWSConfig()
			_, err := New(t.Context(), tt.cfg)
			if err == nil {
				t.Fatalf("New succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// A queue whose own visibility timeout is 0 hands a message out again at
// once; the source receives with SQS's default (30 s) instead, and says so,
// so the heartbeat extends what it asked for (defect 7). Relies on the
// server applying a receive's VisibilityTimeout (both servers do).
func TestAQueueWithVisibilityZeroIsReceivedWithThirtySeconds(t *testing.T) {
	t.Parallel()
	sqstest.Servers(t, func(t *testing.T, s sqstest.Server) {
		t.Parallel()
		testAQueueWithVisibilityZeroIsReceivedWithThirtySeconds(t, s)
	})
}

func testAQueueWithVisibilityZeroIsReceivedWithThirtySeconds(t *testing.T, s sqstest.Server) {
	c := sqstest.ClientOf(t, s)
	url, _ := sqstest.CreateQueue(t, c, sqstest.QueueOptions{})
	if _, err := c.SetQueueAttributes(t.Context(), &sqs.SetQueueAttributesInput{
		QueueUrl:   aws.String(url),
		Attributes: map[string]string{string(types.QueueAttributeNameVisibilityTimeout): "0"},
	}); err != nil {
		t.Fatal(err)
	}
	src, info := openSourceOn(t, s, Config{QueueURL: url, WaitTime: time.Second})
	if info.VisibilityTimeout != DefaultVisibilityTimeout {
		t.Fatalf("visibility timeout %v, want %v for a queue whose own is 0", info.VisibilityTimeout, DefaultVisibilityTimeout)
	}
	sqstest.SendBodies(t, c, url, "one")
	got := receiveN(t, src, 1)
	again, err := src.Receive(t.Context(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 0 {
		t.Fatalf("the message was handed out again while in flight: %v", again[0].Body)
	}
	if err := src.Ack(t.Context(), got); err != nil {
		t.Fatal(err)
	}
}
