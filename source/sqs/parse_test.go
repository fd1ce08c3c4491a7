package sqs

import (
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

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
