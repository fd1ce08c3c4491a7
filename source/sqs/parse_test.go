package sqs

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

func TestParseRedrivePolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    redrivePolicy
		wantErr bool
	}{
		{"a numeric maxReceiveCount is read", `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:1:d","maxReceiveCount":5}`, redrivePolicy{"arn:aws:sqs:us-east-1:1:d", 5}, false},
		{"a string maxReceiveCount is read", `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:1:d","maxReceiveCount":"12"}`, redrivePolicy{"arn:aws:sqs:us-east-1:1:d", 12}, false},
		{"a missing maxReceiveCount is an error", `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:1:d"}`, redrivePolicy{}, true},
		{"a zero maxReceiveCount is an error", `{"deadLetterTargetArn":"a","maxReceiveCount":0}`, redrivePolicy{}, true},
		{"a missing target is an error", `{"maxReceiveCount":3}`, redrivePolicy{}, true},
		{"invalid JSON is an error", `{`, redrivePolicy{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseRedrivePolicy(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parseRedrivePolicy(%s) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func FuzzParseRedrivePolicy(f *testing.F) {
	for _, seed := range []string{
		`{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:1:d","maxReceiveCount":5}`,
		`{"deadLetterTargetArn":"x","maxReceiveCount":"7"}`,
		`{"maxReceiveCount":"-1"}`, `null`, `[]`, `"`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parseRedrivePolicy(s)
		if err == nil && (p.MaxReceiveCount < 1 || p.DeadLetterTargetARN == "") {
			t.Errorf("parseRedrivePolicy(%q) = %+v without an error", s, p)
		}
	})
}

func TestParseQueueARN(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    queueARN
		wantErr bool
	}{
		{"a standard queue ARN is split", "arn:aws:sqs:eu-west-1:123456789012:orders", queueARN{"aws", "eu-west-1", "123456789012", "orders"}, false},
		{"a FIFO queue in another partition is split", "arn:aws-cn:sqs:cn-north-1:1:o.fifo", queueARN{"aws-cn", "cn-north-1", "1", "o.fifo"}, false},
		{"another service is refused", "arn:aws:sns:eu-west-1:1:t", queueARN{}, true},
		{"an empty region is refused", "arn:aws:sqs::1:q", queueARN{}, true},
		{"too few parts are refused", "arn:aws:sqs:eu-west-1:q", queueARN{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseQueueARN(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parseQueueARN(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func FuzzParseQueueARN(f *testing.F) {
	for _, seed := range []string{"arn:aws:sqs:us-east-1:123456789012:q", "arn:aws:sqs:::", "arn::sqs:a:b:c:d", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := parseQueueARN(s)
		if err != nil {
			return
		}
		if back := fmt.Sprintf("arn:%s:sqs:%s:%s:%s", a.partition, a.region, a.account, a.name); back != s {
			t.Errorf("parseQueueARN(%q) = %+v, which formats back as %q", s, a, back)
		}
	})
}

func TestRegionFromURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"the current AWS form gives its region", "https://sqs.eu-west-3.amazonaws.com/1/q", "eu-west-3"},
		{"the China form gives its region", "https://sqs.cn-north-1.amazonaws.com.cn/1/q", "cn-north-1"},
		{"the legacy form gives its region", "https://us-west-2.queue.amazonaws.com/1/q", "us-west-2"},
		{"a local server gives none", "http://127.0.0.1:9324/1/q", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := regionFromURL(tt.in); got != tt.want {
				t.Errorf("regionFromURL(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func FuzzRegionFromURL(f *testing.F) {
	for _, seed := range []string{"https://sqs.eu-west-3.amazonaws.com/1/q", "https://x.queue.amazonaws.com", "sqs..amazonaws.", "::"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) { _ = regionFromURL(s) })
}

// sdkMessages are ten typical received messages: system attributes and
// two message attributes each.
func sdkMessages() []types.Message {
	msgs := make([]types.Message, 10)
	for i := range msgs {
		msgs[i] = types.Message{
			MessageId:     aws.String("0e1f2a3b-0000-4000-8000-00000000000" + strconv.Itoa(i)),
			ReceiptHandle: aws.String("AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a..."),
			Body:          aws.String(`{"order":42,"items":[1,2,3]}`),
			MD5OfBody:     aws.String("e4e68fb7bd0e697a0ae8f1bb342846b3"),
			Attributes: map[string]string{
				"ApproximateReceiveCount": "1", "SentTimestamp": "1545082649183",
				"SenderId": "AIDAIENQZJOLO23YVJ4VO", "ApproximateFirstReceiveTimestamp": "1545082649185",
			},
			MessageAttributes: map[string]types.MessageAttributeValue{
				"kind":  {DataType: aws.String("String"), StringValue: aws.String("order")},
				"count": {DataType: aws.String("Number"), StringValue: aws.String("3")},
			},
			MD5OfMessageAttributes: aws.String("00484c68...59e48f06"),
		}
	}
	return msgs
}

func TestToMessagesKeepsEveryField(t *testing.T) {
	t.Parallel()
	in := sdkMessages()
	out := toMessages(in, "arn:aws:sqs:us-east-1:1:q", "us-east-1")
	if len(out) != len(in) {
		t.Fatalf("%d records from %d messages", len(out), len(in))
	}
	m := out[3]
	if m.MessageID != aws.ToString(in[3].MessageId) || m.Body != aws.ToString(in[3].Body) || m.ReceiptHandle != aws.ToString(in[3].ReceiptHandle) ||
		m.MD5OfBody != aws.ToString(in[3].MD5OfBody) || m.MD5OfMessageAttributes != aws.ToString(in[3].MD5OfMessageAttributes) ||
		m.EventSource != "aws:sqs" || m.EventSourceARN != "arn:aws:sqs:us-east-1:1:q" || m.AWSRegion != "us-east-1" ||
		m.Attributes["SenderId"] != "AIDAIENQZJOLO23YVJ4VO" || m.MessageAttributes["count"].DataType != "Number" ||
		m.MessageAttributes["kind"].StringListValues == nil || m.MessageAttributes["kind"].BinaryListValues == nil {
		t.Errorf("record %+v does not match message %+v", m, in[3])
	}
	if toMessages(nil, "", "") != nil {
		t.Errorf("no messages did not map to nil")
	}
}

func BenchmarkToMessages(b *testing.B) {
	in := sdkMessages()
	b.ReportAllocs()
	for b.Loop() {
		_ = toMessages(in, "arn:aws:sqs:us-east-1:123456789012:orders", "us-east-1")
	}
}
