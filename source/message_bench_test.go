package source

import (
	"strings"
	"testing"
)

// Bodies of 1 KB: a typical JSON document, and one where every third
// byte needs escaping.
var (
	jsonBody = (`{"orderId":"o-20261201-000042","customer":{"id":"c-42","name":"Jane Doe","email":"jane.doe@example.com"},"items":[` +
		strings.Repeat(`{"sku":"SKU-000123","quantity":2,"unitPrice":19.99,"currency":"EUR"},`, 12) + `{"sku":"X"}]}` + strings.Repeat(" ", 1024))[:1024]
	escapeBody = (`{"lines":[` + strings.Repeat(`{"sku":"A-1","qty":2,"note":"a <b> & c"},`, 24) + `{}]}` + strings.Repeat(" ", 1024))[:1024]
)

// benchMessage is a typical SQS record: a 1 KB JSON body, the five system
// attributes SQS gives every message and two message attributes.
func benchMessage() Message { return benchMessageWith(jsonBody) }

func benchMessageWith(body string) Message {
	s := "acme"
	return Message{
		MessageID: "059f36b4-87a3-44ab-83d2-661975830a7d", ReceiptHandle: "AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a" + strings.Repeat("x", 120),
		Body: body,
		Attributes: map[string]string{
			"ApproximateReceiveCount": "1", "SentTimestamp": "1545082649183", "SenderId": "AIDAIENQZJOLO23YVJ4VO",
			"ApproximateFirstReceiveTimestamp": "1545082649185", "AWSTraceHeader": "Root=1-5759e988-bd862e3fe1be46a994272793",
		},
		MessageAttributes: map[string]MessageAttribute{
			"tenant": {StringValue: &s, DataType: "String"},
			"sig":    {BinaryValue: []byte{1, 2, 3, 4, 5, 6, 7, 8}, DataType: "Binary"},
		},
		MD5OfBody: "e4e68fb7bd0e697a0ae8f1bb342846b3", MD5OfMessageAttributes: "a4e68fb7bd0e697a0ae8f1bb342846b3",
		EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-2:123456789012:my-queue", AWSRegion: "us-east-2",
	}
}

// BenchmarkMessageJSON is the cost of one record's JSON encoding.
func BenchmarkMessageJSON(b *testing.B) {
	for _, bc := range []struct{ name, body string }{{"json body", jsonBody}, {"body dense in escapes", escapeBody}} {
		b.Run(bc.name, func(b *testing.B) {
			src := benchMessageWith(bc.body)
			var m Message
			b.ReportAllocs()
			for b.Loop() {
				m = Message{
					MessageID: src.MessageID, ReceiptHandle: src.ReceiptHandle, Body: src.Body,
					Attributes: src.Attributes, MessageAttributes: src.MessageAttributes, MD5OfBody: src.MD5OfBody,
					MD5OfMessageAttributes: src.MD5OfMessageAttributes, EventSource: src.EventSource,
					EventSourceARN: src.EventSourceARN, AWSRegion: src.AWSRegion,
				}
				if _, err := m.JSON(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
