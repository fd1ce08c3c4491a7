package sqstarget_test

// These tests run against the local SQS-compatible server of
// internal/sqstest (they fail under CI=true when it cannot be started).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
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
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/target/sqstarget"
)

// calls counts OnCall reports by operation.
type calls struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *calls) onCall(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[op]++
}

func (c *calls) get(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[op]
}

func testAWSConfig() *aws.Config {
	return &aws.Config{
		Region:      sqstest.Region,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDPIPESTEST", "pipes-test-secret", ""),
	}
}

// newTarget makes a target for the queue on the test server.
func newTarget(t *testing.T, cfg sqstarget.Config) *sqstarget.Target {
	t.Helper()
	cfg.Endpoint = sqstest.Endpoint(t)
	cfg.AWSConfig = testAWSConfig()
	tg, err := sqstarget.New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = tg.Close(context.Background()) })
	return tg
}

// event makes an event of a message with a JSON body; its payload is the
// record, as without an input template.
func event(t testing.TB, id, body string) *pipe.Event {
	t.Helper()
	ev, err := pipe.NewEvent(&source.Message{MessageID: id, Body: body, EventSource: "aws:sqs"})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// payloadEvent makes an event whose payload is p.
func payloadEvent(id, p string) *pipe.Event {
	return &pipe.Event{Message: &source.Message{MessageID: id, Body: p}, RecordJSON: []byte(p)}
}

func str(s string) *string { return &s }

// received is a message read back from a queue.
type received struct {
	body  string
	attrs map[string]string // system attributes
	mattr map[string]types.MessageAttributeValue
}

// receiveAll reads and deletes every visible message of the queue.
func receiveAll(t *testing.T, c *sqs.Client, url string) []received {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var out []received
	for {
		res, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:              aws.String(url),
			MaxNumberOfMessages:   10,
			MessageAttributeNames: []string{"All"},
			// The server reads the older AttributeNames, not MessageSystemAttributeNames.
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}, //nolint:staticcheck

		})
		if err != nil {
			t.Fatalf("receiving from %s: %v", url, err)
		}
		if len(res.Messages) == 0 {
			return out
		}
		for _, m := range res.Messages {
			out = append(out, received{body: aws.ToString(m.Body), attrs: m.Attributes, mattr: m.MessageAttributes})
			if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatalf("deleting from %s: %v", url, err)
			}
		}
	}
}

func bodies(rs []received) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.body
	}
	sort.Strings(out)
	return out
}

func failedIDs(r pipe.Result) []string {
	ids := make([]string, 0, len(r.Failures))
	for _, f := range r.Failures {
		ids = append(ids, f.ID)
	}
	sort.Strings(ids)
	return ids
}

func TestDeliverSendsEachPayloadAsAMessageBodyWithTheEventsAttributes(t *testing.T) {
	t.Parallel()
	c := sqstest.Client(t)
	url, _ := sqstest.CreateQueue(t, c, sqstest.QueueOptions{})
	tg := newTarget(t, sqstarget.Config{QueueURL: url})

	withAttrs := payloadEvent("m2", `{"n":2}`)
	withAttrs.Attributes = map[string]source.MessageAttribute{
		"ErrorCode":      {DataType: "String", StringValue: str("Boom")},
		"pipes-attempts": {DataType: "Number", StringValue: str("3")},
		"raw":            {DataType: "Binary", BinaryValue: []byte{0, 1, 2}},
	}
	events := []*pipe.Event{payloadEvent("m1", `{"n":1}`), withAttrs, payloadEvent("m3", "plain text")}
	res, err := tg.Deliver(t.Context(), events)
	if err != nil || len(res.Failures) > 0 {
		t.Fatalf("Deliver = %+v, %v; want success", res, err)
	}
	got := receiveAll(t, c, url)
	if want := []string{"plain text", `{"n":1}`, `{"n":2}`}; !slices.Equal(bodies(got), want) {
		t.Fatalf("bodies = %q, want %q", bodies(got), want)
	}
	for _, r := range got {
		if r.body != `{"n":2}` {
			if len(r.mattr) != 0 {
				t.Errorf("message %s has attributes %v, want none", r.body, r.mattr)
			}
			continue
		}
		if v := aws.ToString(r.mattr["ErrorCode"].StringValue); v != "Boom" {
			t.Errorf("ErrorCode = %q, want Boom", v)
		}
		if a := r.mattr["pipes-attempts"]; aws.ToString(a.DataType) != "Number" || aws.ToString(a.StringValue) != "3" {
			t.Errorf("pipes-attempts = %s %q, want Number 3", aws.ToString(a.DataType), aws.ToString(a.StringValue))
		}
		if b := r.mattr["raw"].BinaryValue; string(b) != "\x00\x01\x02" {
			t.Errorf("raw = %v, want [0 1 2]", b)
		}
	}
}

func TestMoreThanTenEventsAreSplitIntoCallsOfTen(t *testing.T) {
	t.Parallel()
	c := sqstest.Client(t)
	url, _ := sqstest.CreateQueue(t, c, sqstest.QueueOptions{})
	var n calls
	tg := newTarget(t, sqstarget.Config{QueueURL: url, OnCall: n.onCall})
	var events []*pipe.Event
	var want []string
	for i := range 25 {
		p := fmt.Sprintf(`{"i":%02d}`, i)
		events = append(events, payloadEvent(fmt.Sprintf("m%02d", i), p))
		want = append(want, p)
	}
	res, err := tg.Deliver(t.Context(), events)
	if err != nil || len(res.Failures) > 0 {
		t.Fatalf("Deliver = %+v, %v; want success", res, err)
	}
	if got := n.get("SendMessageBatch"); got != 3 {
		t.Errorf("SendMessageBatch calls = %d, want 3", got)
	}
	if got := bodies(receiveAll(t, c, url)); !slices.Equal(got, want) {
		t.Errorf("bodies = %q, want %q", got, want)
	}
}

func TestAFIFOQueueGetsTheGroupAndDeduplicationIDsRenderedPerEvent(t *testing.T) {
	t.Parallel()
	c := sqstest.Client(t)
	url, _ := sqstest.CreateQueue(t, c, sqstest.QueueOptions{FIFO: true})
	tests := []struct {
		name         string
		group, dedup string
		fromRecord   bool
	}{
		{"placeholders in templates", "cust-<$.body.customer>", "<$.body.order>-<$.messageId>", false},
		{"Pipes dynamic paths", "$.body.customer", "$.body.order", false},
		{"paths on the record after an input template", "$.body.customer", "$.body.order", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg := newTarget(t, sqstarget.Config{QueueURL: url, MessageGroupID: tt.group, MessageDeduplicationID: tt.dedup, ParamsFromRecord: tt.fromRecord})
			events := []*pipe.Event{
				event(t, "m1", `{"customer":"ada","order":"o1"}`),
				event(t, "m2", `{"customer":"bob","order":"o2"}`),
			}
			if tt.fromRecord { // an input template replaced the payload
				for _, ev := range events {
					ev.RecordJSON = []byte(`{"templated":true}`)
				}
			}
			res, err := tg.Deliver(t.Context(), events)
			if err != nil || len(res.Failures) > 0 {
				t.Fatalf("Deliver = %+v, %v; want success", res, err)
			}
			got := receiveAll(t, c, url)
			if len(got) != 2 {
				t.Fatalf("received %d messages, want 2", len(got))
			}
			groups := map[string]string{}
			for _, r := range got {
				groups[r.attrs["MessageGroupId"]] = r.attrs["MessageDeduplicationId"]
			}
			want := map[string]string{"ada": "o1", "bob": "o2"}
			if tt.group != "$.body.customer" {
				want = map[string]string{"cust-ada": "o1-m1", "cust-bob": "o2-m2"}
			}
			if fmt.Sprint(groups) != fmt.Sprint(want) {
				t.Errorf("group → dedup ids = %v, want %v", groups, want)
			}
		})
	}
}

func TestAnEmptyGroupIDOnAFIFOQueueIsAPermanentFailureOfThatMessageOnly(t *testing.T) {
	t.Parallel()
	c := sqstest.Client(t)
	url, _ := sqstest.CreateQueue(t, c, sqstest.QueueOptions{FIFO: true})
	tg := newTarget(t, sqstarget.Config{QueueURL: url, MessageGroupID: "$.body.customer", MessageDeduplicationID: "$.messageId"})
	res, err := tg.Deliver(t.Context(), []*pipe.Event{event(t, "m1", `{"customer":"ada"}`), event(t, "m2", `{"other":1}`)})
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if got := failedIDs(res); !slices.Equal(got, []string{"m2"}) {
		t.Fatalf("failed = %v, want [m2]", got)
	}
	if !core.IsPermanent(res.Failures[0].Err) || !strings.Contains(res.Failures[0].Err.Error(), "rendered empty") {
		t.Errorf("failure = %v, want a permanent 'rendered empty' error", res.Failures[0].Err)
	}
	if got := receiveAll(t, c, url); len(got) != 1 {
		t.Errorf("received %d messages, want 1", len(got))
	}
}

func TestAnEntrySQSRefusesFailsOnlyItsMessageWhileTheOthersAreSent(t *testing.T) {
	t.Parallel()
	c := sqstest.Client(t)
	url, _ := sqstest.CreateQueue(t, c, sqstest.QueueOptions{})
	tg := newTarget(t, sqstarget.Config{QueueURL: url})

	bad := payloadEvent("m2", `{"n":2}`)
	bad.Attributes = map[string]source.MessageAttribute{"x": {DataType: "Nonsense", StringValue: str("v")}}
	// m4's enrichment fanned it out into two events; one of them is bad.
	fanGood := payloadEvent("m4", `{"n":4}`)
	fanBad := &pipe.Event{Message: fanGood.Message, RecordJSON: []byte(`{"n":5}`),
		Attributes: map[string]source.MessageAttribute{"y": {DataType: "Number", StringValue: str("not a number")}}}
	events := []*pipe.Event{payloadEvent("m1", `{"n":1}`), bad, payloadEvent("m3", `{"n":3}`), fanGood, fanBad}
	res, err := tg.Deliver(t.Context(), events)
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if got := failedIDs(res); !slices.Equal(got, []string{"m2", "m4"}) {
		t.Fatalf("failed = %v, want [m2 m4]", got)
	}
	for _, f := range res.Failures {
		var ee *sqstarget.EntryError
		if !core.IsPermanent(f.Err) || !errors.As(f.Err, &ee) || ee.Code == "" {
			t.Errorf("failure of %s = %v, want a permanent *EntryError with a code", f.ID, f.Err)
		}
	}
	if got, want := bodies(receiveAll(t, c, url)), []string{`{"n":1}`, `{"n":3}`, `{"n":4}`}; !slices.Equal(got, want) {
		t.Errorf("bodies = %q, want %q", got, want)
	}
}

func TestOnlyTheFirstTenAttributesByNameAreSent(t *testing.T) {
	t.Parallel()
	c := sqstest.Client(t)
	url, _ := sqstest.CreateQueue(t, c, sqstest.QueueOptions{})
	tg := newTarget(t, sqstarget.Config{QueueURL: url})
	ev := payloadEvent("m1", "x")
	ev.Attributes = map[string]source.MessageAttribute{}
	for i := range 12 {
		ev.Attributes[fmt.Sprintf("a%02d", i)] = source.MessageAttribute{DataType: "String", StringValue: str("v")}
	}
	if res, err := tg.Deliver(t.Context(), []*pipe.Event{ev}); err != nil || len(res.Failures) > 0 {
		t.Fatalf("Deliver = %+v, %v; want success", res, err)
	}
	got := receiveAll(t, c, url)
	if len(got) != 1 {
		t.Fatalf("received %d messages, want 1", len(got))
	}
	var names []string
	for n := range got[0].mattr {
		names = append(names, n)
	}
	sort.Strings(names)
	if want := []string{"a00", "a01", "a02", "a03", "a04", "a05", "a06", "a07", "a08", "a09"}; !slices.Equal(names, want) {
		t.Errorf("attributes = %v, want %v", names, want)
	}
}

func TestAMissingQueueFailsTheWholeBatchPermanently(t *testing.T) {
	t.Parallel()
	ep := sqstest.Endpoint(t)
	tg := newTarget(t, sqstarget.Config{QueueURL: ep + "/123456789012/" + sqstest.QueueName("missing", "")})
	res, err := tg.Deliver(t.Context(), []*pipe.Event{payloadEvent("m1", "x"), payloadEvent("m2", "y")})
	if err == nil || !core.IsPermanent(err) {
		t.Fatalf("Deliver = %+v, %v; want a permanent error", res, err)
	}
}

func TestAPayloadTooLargeForSQSFailsOnlyItsMessage(t *testing.T) {
	t.Parallel()
	c := sqstest.Client(t)
	url, _ := sqstest.CreateQueue(t, c, sqstest.QueueOptions{})
	tg := newTarget(t, sqstarget.Config{QueueURL: url})
	huge := strings.Repeat("x", 1<<20+1) // over SQS's 1 MiB limit
	res, err := tg.Deliver(t.Context(), []*pipe.Event{payloadEvent("m1", "small"), payloadEvent("m2", huge), payloadEvent("m3", "small too")})
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if got := failedIDs(res); !slices.Equal(got, []string{"m2"}) {
		t.Fatalf("failed = %v, want [m2]", got)
	}
	if !core.IsPermanent(res.Failures[0].Err) {
		t.Errorf("failure = %v, want permanent", res.Failures[0].Err)
	}
	if got := bodies(receiveAll(t, c, url)); !slices.Equal(got, []string{"small", "small too"}) {
		t.Errorf("bodies = %q", got)
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  sqstarget.Config
		want string
	}{
		{"a missing queue url is rejected", sqstarget.Config{}, "queue url is required"},
		{"a queue url that is not http is rejected", sqstarget.Config{QueueURL: "sqs://q"}, "is not an http(s) URL"},
		{"a FIFO queue without a group id is rejected", sqstarget.Config{QueueURL: "http://h/1/q.fifo"}, "message group id is required for a FIFO queue"},
		{"a deduplication id on a standard queue is rejected", sqstarget.Config{QueueURL: "http://h/1/q", MessageDeduplicationID: "x"}, "only for FIFO queues"},
		{"a template that does not parse is rejected", sqstarget.Config{QueueURL: "http://h/1/q", MessageGroupID: "<$.body"}, `message group id "<$.body"`},
		{"a dynamic path that does not parse is rejected", sqstarget.Config{QueueURL: "http://h/1/q", MessageGroupID: "$.a b"}, `message group id "$.a b"`},
		{"a negative timeout is rejected", sqstarget.Config{QueueURL: "http://h/1/q", Timeout: -time.Second}, "timeout -1s is negative"},
		{"a queue without a region is rejected", sqstarget.Config{QueueURL: "http://h/1/q", AWSConfig: &aws.Config{}}, "no AWS region"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.cfg.AWSConfig == nil {
				tt.cfg.AWSConfig = testAWSConfig()
			}
			_, err := sqstarget.New(t.Context(), tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestARegionIsTakenFromAnAmazonQueueURL(t *testing.T) {
	_, err := sqstarget.New(t.Context(), sqstarget.Config{QueueURL: "https://sqs.eu-west-1.amazonaws.com/123456789012/q", AWSConfig: &aws.Config{}})
	if err != nil {
		t.Errorf("New: %v", err)
	}
}

// ensure the JSON of a record is what a body holds when no template ran.
func TestWithoutATemplateTheBodyIsTheRecordJSON(t *testing.T) {
	t.Parallel()
	c := sqstest.Client(t)
	url, _ := sqstest.CreateQueue(t, c, sqstest.QueueOptions{})
	tg := newTarget(t, sqstarget.Config{QueueURL: url})
	ev := event(t, "m1", `{"a":1}`)
	if res, err := tg.Deliver(t.Context(), []*pipe.Event{ev}); err != nil || len(res.Failures) > 0 {
		t.Fatalf("Deliver = %+v, %v", res, err)
	}
	got := receiveAll(t, c, url)
	if len(got) != 1 {
		t.Fatalf("received %d messages, want 1", len(got))
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(got[0].body), &rec); err != nil || rec["messageId"] != "m1" || rec["body"] != `{"a":1}` {
		t.Errorf("body = %s, want the record of m1", got[0].body)
	}
}
