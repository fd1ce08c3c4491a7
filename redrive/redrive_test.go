package redrive_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/pipesproject/pipes/filter"
	"github.com/pipesproject/pipes/internal/sqstest"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/redrive"
)

// dlqMessage is a message the tests put straight into a dead-letter queue.
type dlqMessage struct {
	body  string
	group string
	attrs map[string]string
}

// contextAttrs are what pipes' dead-letter stage adds to a message.
func contextAttrs(extra map[string]string) map[string]string {
	a := map[string]string{
		"ErrorCode":                 "ClientError",
		"ErrorMessage":              "HTTP 400 from the target",
		"pipes-stage":               "target",
		"pipes-pipe":                "orders",
		"pipes-attempts":            "3",
		"pipes-original-message-id": "m-orig",
	}
	for k, v := range extra {
		a[k] = v
	}
	return a
}

// putDLQ sends messages straight to the queue, ten at a time, in order.
func putDLQ(t *testing.T, c *sqs.Client, url string, msgs ...dlqMessage) {
	t.Helper()
	ctx := context.Background()
	for start := 0; start < len(msgs); start += 10 {
		chunk := msgs[start:min(start+10, len(msgs))]
		entries := make([]types.SendMessageBatchRequestEntry, len(chunk))
		for i, m := range chunk {
			attrs := map[string]types.MessageAttributeValue{}
			for k, v := range m.attrs {
				dt := "String"
				if k == "pipes-attempts" {
					dt = "Number"
				}
				attrs[k] = types.MessageAttributeValue{DataType: aws.String(dt), StringValue: aws.String(v)}
			}
			entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(m.body), MessageAttributes: attrs}
			if m.group != "" {
				entries[i].MessageGroupId = aws.String(m.group)
				entries[i].MessageDeduplicationId = aws.String(sqstest.QueueName("d", ""))
			}
		}
		out, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil {
			t.Fatalf("putting %d messages in %s: %v", len(entries), url, err)
		}
		if len(out.Failed) > 0 {
			t.Fatalf("putting messages in %s: %s %s", url, aws.ToString(out.Failed[0].Code), aws.ToString(out.Failed[0].Message))
		}
	}
}

// drain receives and deletes every visible message of the queue, in the
// order received.
func drain(t *testing.T, c *sqs.Client, url string) []types.Message {
	t.Helper()
	ctx := context.Background()
	var all []types.Message
	for {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, VisibilityTimeout: 30,
			AttributeNames:              []types.QueueAttributeName{types.QueueAttributeNameAll},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			t.Fatalf("draining %s: %v", url, err)
		}
		if len(out.Messages) == 0 {
			return all
		}
		for _, m := range out.Messages {
			all = append(all, m)
			if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatalf("deleting a drained message of %s: %v", url, err)
			}
		}
	}
}

func bodies(msgs []types.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = aws.ToString(m.Body)
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func numbered(n int, body func(i int) string, attrs func(i int) map[string]string) []dlqMessage {
	out := make([]dlqMessage, n)
	for i := range out {
		out[i] = dlqMessage{body: body(i)}
		if attrs != nil {
			out[i].attrs = attrs(i)
		}
	}
	return out
}

func TestRedrive(t *testing.T) {
	c := sqstest.Client(t)
	t.Run("every message is moved once, keeping its attributes and losing the failure context", func(t *testing.T) {
		t.Parallel()
		src, dlq := sqstest.CreateQueue(t, c, sqstest.QueueOptions{MaxReceiveCount: 3})
		msgs := numbered(23, func(i int) string { return fmt.Sprintf(`{"n":%d}`, i) },
			func(i int) map[string]string { return contextAttrs(map[string]string{"tenant": "t" + strconv.Itoa(i)}) })
		putDLQ(t, c, dlq, msgs...)
		var entries []redrive.Entry
		sum, err := redrive.Run(context.Background(), c, redrive.Options{From: dlq, To: src, Report: func(e redrive.Entry) { entries = append(entries, e) }})
		if err != nil {
			t.Fatal(err)
		}
		if sum != (redrive.Summary{Moved: 23}) || len(entries) != 23 {
			t.Fatalf("summary %+v with %d entries, want 23 moved", sum, len(entries))
		}
		got := drain(t, c, src)
		want := make([]string, len(msgs))
		for i, m := range msgs {
			want[i] = m.body
		}
		if !slices.Equal(sorted(bodies(got)), sorted(want)) {
			t.Fatalf("source holds %v, want each of %v once", sorted(bodies(got)), sorted(want))
		}
		for _, m := range got {
			var n int
			fmt.Sscanf(aws.ToString(m.Body), `{"n":%d}`, &n)
			if v := aws.ToString(m.MessageAttributes["tenant"].StringValue); v != "t"+strconv.Itoa(n) {
				t.Errorf("message %s has tenant %q, want t%d", aws.ToString(m.Body), v, n)
			}
			at, err := time.Parse(time.RFC3339Nano, aws.ToString(m.MessageAttributes[redrive.AttrRedrivenAt].StringValue))
			if err != nil || time.Since(at) < 0 {
				t.Errorf("message %s has %s %v (%v)", aws.ToString(m.Body), redrive.AttrRedrivenAt, at, err)
			}
			for _, gone := range []string{"ErrorCode", "ErrorMessage", "pipes-stage", "pipes-pipe", "pipes-attempts", "pipes-original-message-id"} {
				if _, ok := m.MessageAttributes[gone]; ok {
					t.Errorf("message %s still has %s", aws.ToString(m.Body), gone)
				}
			}
		}
		if v, f := sqstest.Count(t, c, dlq); v != 0 || f != 0 {
			t.Errorf("the dead-letter queue still has %d visible and %d in flight", v, f)
		}
	})

	t.Run("a filter moves the matching messages and leaves the others visible in the dead-letter queue", func(t *testing.T) {
		t.Parallel()
		src, dlq := sqstest.CreateQueue(t, c, sqstest.QueueOptions{MaxReceiveCount: 3})
		putDLQ(t, c, dlq, numbered(12, func(i int) string { return fmt.Sprintf(`{"kind":"%c","n":%d}`, "ab"[i%2], i) }, nil)...)
		pat, err := filter.CompilePattern(`{"body":{"kind":["a"]}}`)
		if err != nil {
			t.Fatal(err)
		}
		sum, err := redrive.Run(context.Background(), c, redrive.Options{From: dlq, To: src, Filter: pat})
		if err != nil {
			t.Fatal(err)
		}
		if sum != (redrive.Summary{Moved: 6, Skipped: 6}) {
			t.Fatalf("summary %+v, want 6 moved and 6 skipped", sum)
		}
		for _, b := range bodies(drain(t, c, src)) {
			if !strings.Contains(b, `"kind":"a"`) {
				t.Errorf("moved %s, which the filter does not match", b)
			}
		}
		left := bodies(drain(t, c, dlq)) // visible at once: released at the end
		if len(left) != 6 {
			t.Fatalf("the dead-letter queue shows %d messages after the run, want the 6 skipped", len(left))
		}
		for _, b := range left {
			if !strings.Contains(b, `"kind":"b"`) {
				t.Errorf("left %s in the dead-letter queue, which the filter matches", b)
			}
		}
	})

	t.Run("a dry run moves nothing and reports the cleaned attributes it would send", func(t *testing.T) {
		t.Parallel()
		src, dlq := sqstest.CreateQueue(t, c, sqstest.QueueOptions{MaxReceiveCount: 3})
		putDLQ(t, c, dlq, numbered(14, func(i int) string { return "plain " + strconv.Itoa(i) },
			func(int) map[string]string { return contextAttrs(map[string]string{"tenant": "x"}) })...)
		var entries []redrive.Entry
		sum, err := redrive.Run(context.Background(), c, redrive.Options{From: dlq, To: src, DryRun: true, Report: func(e redrive.Entry) { entries = append(entries, e) }})
		if err != nil {
			t.Fatal(err)
		}
		if sum != (redrive.Summary{WouldMove: 14}) {
			t.Fatalf("summary %+v, want 14 that would move", sum)
		}
		for _, e := range entries {
			if _, ok := e.MessageAttributes["tenant"]; !ok || len(e.MessageAttributes) != 2 || e.Body == "" {
				t.Errorf("dry-run entry %+v: want the body and exactly tenant and %s", e, redrive.AttrRedrivenAt)
			}
		}
		if got := drain(t, c, src); len(got) != 0 {
			t.Errorf("a dry run sent %d messages", len(got))
		}
		if got := drain(t, c, dlq); len(got) != 14 {
			t.Errorf("the dead-letter queue shows %d messages after a dry run, want 14", len(got))
		}
	})

	t.Run("max stops the run after that many messages", func(t *testing.T) {
		t.Parallel()
		src, dlq := sqstest.CreateQueue(t, c, sqstest.QueueOptions{MaxReceiveCount: 3})
		putDLQ(t, c, dlq, numbered(15, func(i int) string { return "m" + strconv.Itoa(i) }, nil)...)
		sum, err := redrive.Run(context.Background(), c, redrive.Options{From: dlq, To: src, Max: 4})
		if err != nil {
			t.Fatal(err)
		}
		if sum != (redrive.Summary{Moved: 4}) {
			t.Fatalf("summary %+v, want 4 moved", sum)
		}
		if got, left := len(drain(t, c, src)), len(drain(t, c, dlq)); got != 4 || left != 11 {
			t.Errorf("%d moved and %d left, want 4 and 11", got, left)
		}
	})

	t.Run("a FIFO redrive keeps each message's group and the order within it", func(t *testing.T) {
		t.Parallel()
		src, dlq := sqstest.CreateQueue(t, c, sqstest.QueueOptions{FIFO: true, MaxReceiveCount: 3})
		var msgs []dlqMessage
		for i := range 12 {
			msgs = append(msgs, dlqMessage{body: fmt.Sprintf("g%d-%02d", i%3, i), group: fmt.Sprintf("g%d", i%3)})
		}
		putDLQ(t, c, dlq, msgs...)
		var entries []redrive.Entry
		sum, err := redrive.Run(context.Background(), c, redrive.Options{From: dlq, To: src, Rate: 500, Report: func(e redrive.Entry) { entries = append(entries, e) }})
		if err != nil {
			t.Fatal(err)
		}
		if sum != (redrive.Summary{Moved: 12}) {
			t.Fatalf("summary %+v (entries %+v), want 12 moved", sum, entries)
		}
		byGroup := map[string][]string{}
		for _, m := range drain(t, c, src) {
			g := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]
			byGroup[g] = append(byGroup[g], aws.ToString(m.Body))
		}
		for g, got := range byGroup {
			if len(got) != 4 || !slices.IsSorted(got) || !strings.HasPrefix(got[0], g+"-") {
				t.Errorf("group %q holds %v, want its 4 messages in order", g, got)
			}
		}
		if len(byGroup) != 3 {
			t.Errorf("the source holds groups %v, want g0, g1, g2", byGroup)
		}
	})

	t.Run("a refused entry is left in the dead-letter queue and the others move", func(t *testing.T) {
		t.Parallel()
		src, dlq := sqstest.CreateQueue(t, c, sqstest.QueueOptions{MaxReceiveCount: 3})
		putDLQ(t, c, dlq, numbered(8, func(i int) string {
			if i == 5 {
				return "refuse me"
			}
			return "ok " + strconv.Itoa(i)
		}, nil)...)
		sum, err := redrive.Run(context.Background(), refusing{c}, redrive.Options{From: dlq, To: src})
		if err != nil {
			t.Fatal(err)
		}
		if sum != (redrive.Summary{Moved: 7, Failed: 1}) {
			t.Fatalf("summary %+v, want 7 moved and 1 failed", sum)
		}
		if got, left := drain(t, c, src), bodies(drain(t, c, dlq)); len(got) != 7 || !slices.Equal(left, []string{"refuse me"}) {
			t.Errorf("%d moved and %v left, want 7 and the refused one", len(got), left)
		}
	})
}

// refusing is the real client, except that SendMessageBatch refuses the
// entries whose body starts with "refuse", the way SQS answers per entry.
type refusing struct{ *sqs.Client }

func (r refusing) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	var keep []types.SendMessageBatchRequestEntry
	var failed []types.BatchResultErrorEntry
	for _, e := range in.Entries {
		if strings.HasPrefix(aws.ToString(e.MessageBody), "refuse") {
			failed = append(failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InvalidParameterValue"), Message: aws.String("refused by the test"), SenderFault: true})
			continue
		}
		keep = append(keep, e)
	}
	out := &sqs.SendMessageBatchOutput{}
	if len(keep) > 0 {
		sent, err := r.Client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: in.QueueUrl, Entries: keep}, optFns...)
		if err != nil {
			return nil, err
		}
		out = sent
	}
	out.Failed = append(out.Failed, failed...)
	return out, nil
}

func TestInspectShowsMessagesWithoutConsumingThem(t *testing.T) {
	c := sqstest.Client(t)
	src, dlq := sqstest.CreateQueue(t, c, sqstest.QueueOptions{MaxReceiveCount: 3})
	putDLQ(t, c, dlq, numbered(13, func(i int) string { return "dead " + strconv.Itoa(i) },
		func(int) map[string]string { return contextAttrs(nil) })...)
	ctx := context.Background()
	url, err := redrive.DeadLetterURL(ctx, c, src)
	if err != nil || url != dlq {
		t.Fatalf("DeadLetterURL = %q, %v; want %q", url, err, dlq)
	}
	counts, err := redrive.QueueCounts(ctx, c, dlq)
	if err != nil || counts.Visible != 13 || !strings.HasSuffix(counts.ARN, ":"+dlq[strings.LastIndex(dlq, "/")+1:]) {
		t.Fatalf("QueueCounts = %+v, %v; want 13 visible and the queue's ARN", counts, err)
	}
	msgs, err := redrive.Inspect(ctx, c, dlq, redrive.InspectOptions{Max: 12, ARN: counts.ARN})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 12 {
		t.Fatalf("Inspect returned %d messages, want 12", len(msgs))
	}
	ids := map[string]bool{}
	for _, m := range msgs {
		ids[m.MessageID] = true
		if m.EventSource != "aws:sqs" || m.EventSourceARN != counts.ARN || m.AWSRegion != sqstest.Region {
			t.Errorf("record %s has source %q %q %q", m.MessageID, m.EventSource, m.EventSourceARN, m.AWSRegion)
		}
		if v := m.MessageAttributes["pipes-pipe"].StringValue; v == nil || *v != "orders" || m.Attributes["ApproximateReceiveCount"] != "1" {
			t.Errorf("record %s lacks its context attributes or receive count: %+v %v", m.MessageID, m.MessageAttributes, m.Attributes)
		}
	}
	if len(ids) != 12 {
		t.Errorf("Inspect returned %d distinct messages, want 12", len(ids))
	}
	if got := drain(t, c, dlq); len(got) != 13 {
		t.Errorf("the dead-letter queue shows %d messages after the inspection, want all 13", len(got))
	}
}

func TestDeadLetterURLOfAQueueWithoutRedrivePolicy(t *testing.T) {
	c := sqstest.Client(t)
	src, _ := sqstest.CreateQueue(t, c, sqstest.QueueOptions{})
	if _, err := redrive.DeadLetterURL(context.Background(), c, src); !errors.Is(err, redrive.ErrNoRedrivePolicy) {
		t.Fatalf("DeadLetterURL error = %v, want ErrNoRedrivePolicy", err)
	}
}

func TestParseRedrivePolicy(t *testing.T) {
	tests := []struct {
		name, in, want, err string
	}{
		{"a policy gives its dead-letter ARN", `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:orders-dlq","maxReceiveCount":3}`, "arn:aws:sqs:us-east-1:123456789012:orders-dlq", ""},
		{"a policy without an ARN is an error", `{"maxReceiveCount":"3"}`, "", "no deadLetterTargetArn"},
		{"a policy that is not JSON is an error", `dlq`, "", "parsing redrive policy"},
		{"an ARN that is not an SQS ARN is an error", `{"deadLetterTargetArn":"arn:aws:sns:us-east-1:1:t"}`, "", "is not of the form"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := redrive.ParseRedrivePolicy(tt.in)
			if got != tt.want || (tt.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.err)) {
				t.Fatalf("ParseRedrivePolicy(%s) = %q, %v; want %q, error with %q", tt.in, got, err, tt.want, tt.err)
			}
		})
	}
}

func FuzzParseRedrivePolicy(f *testing.F) {
	f.Add(`{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:123456789012:orders-dlq","maxReceiveCount":3}`)
	f.Add(`{"deadLetterTargetArn":""}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, s string) {
		arn, err := redrive.ParseRedrivePolicy(s)
		if err == nil {
			if _, perr := redrive.ParseQueueARN(arn); perr != nil {
				t.Fatalf("accepted %q with ARN %q that does not parse: %v", s, arn, perr)
			}
		}
	})
}

func FuzzParseQueueARN(f *testing.F) {
	f.Add("arn:aws:sqs:us-east-1:123456789012:orders")
	f.Add("arn:aws:sqs:::")
	f.Add("orders")
	f.Fuzz(func(t *testing.T, s string) {
		a, err := redrive.ParseQueueARN(s)
		if err == nil && strings.Join([]string{"arn", a.Partition, "sqs", a.Region, a.Account, a.Name}, ":") != s {
			t.Fatalf("ParseQueueARN(%q) = %+v, which does not spell it back", s, a)
		}
	})
}

func BenchmarkRecord(b *testing.B) {
	m := types.Message{
		MessageId: aws.String("m-1"), ReceiptHandle: aws.String("rh"), Body: aws.String(`{"order":1}`),
		Attributes: map[string]string{"ApproximateReceiveCount": "4", "SentTimestamp": "1"},
		MessageAttributes: map[string]types.MessageAttributeValue{
			"pipes-pipe": {DataType: aws.String("String"), StringValue: aws.String("orders")},
			"tenant":     {DataType: aws.String("String"), StringValue: aws.String("t1")},
		},
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = redrive.Record(m, "arn:aws:sqs:us-east-1:1:dlq", "us-east-1")
	}
}

func TestRecordIsWhatFiltersSee(t *testing.T) {
	m := types.Message{
		MessageId: aws.String("m-1"), Body: aws.String(`{"kind":"order"}`),
		Attributes: map[string]string{"ApproximateReceiveCount": "4"},
		MessageAttributes: map[string]types.MessageAttributeValue{
			"ErrorCode": {DataType: aws.String("String"), StringValue: aws.String("ClientError")},
		},
	}
	tests := []struct {
		name, pattern string
		want          bool
	}{
		{"a pattern on the failure context matches", `{"messageAttributes":{"ErrorCode":{"stringValue":["ClientError"]}}}`, true},
		{"a pattern on another error code does not match", `{"messageAttributes":{"ErrorCode":{"stringValue":["Throttled"]}}}`, false},
		{"a pattern on the JSON body matches", `{"body":{"kind":["order"]}}`, true},
		{"a pattern on the receive count matches", `{"attributes":{"ApproximateReceiveCount":["4"]}}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := filter.CompilePattern(tt.pattern)
			if err != nil {
				t.Fatal(err)
			}
			ev, err := pipe.NewEvent(redrive.Record(m, "", ""))
			if err != nil {
				t.Fatal(err)
			}
			if got := p.MatchEvent(ev); got != tt.want {
				t.Fatalf("MatchEvent = %v, want %v", got, tt.want)
			}
		})
	}
}
