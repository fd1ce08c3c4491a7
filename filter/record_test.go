package filter

import (
	"context"
	"testing"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

func ptr[T any](v T) *T { return &v }

// testMessage is an SQS record as a source makes it.
func testMessage(body string) *source.Message {
	return &source.Message{
		MessageID:     "059f36b4-87a3-44ab-83d2-661975830a7d",
		ReceiptHandle: "AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a",
		Body:          body,
		Attributes: map[string]string{
			"ApproximateReceiveCount":          "1",
			"SentTimestamp":                    "1545082649183",
			"SenderId":                         "AIDAIENQZJOLO23YVJ4VO",
			"ApproximateFirstReceiveTimestamp": "1545082649185",
		},
		MessageAttributes: map[string]source.MessageAttribute{
			"tenant": {StringValue: ptr("acme"), DataType: "String"},
			"blob":   {BinaryValue: []byte("hi"), DataType: "Binary"},
		},
		MD5OfBody:      "e4e68fb7bd0e697a0ae8f1bb342846b3",
		EventSource:    "aws:sqs",
		EventSourceARN: "arn:aws:sqs:us-east-2:123456789012:my-queue",
		AWSRegion:      "us-east-2",
	}
}

type recordCase struct {
	name    string
	pattern string
	body    string
	want    bool
}

func runRecordCases(t *testing.T, cases []recordCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ps, err := CompilePatterns([]string{c.pattern})
			if err != nil {
				t.Fatalf("CompilePatterns(%s): %v", c.pattern, err)
			}
			ev := &pipe.Event{Message: testMessage(c.body)}
			got, err := ps.Match(context.Background(), ev)
			if err != nil {
				t.Fatalf("Match: %v", err)
			}
			if got != c.want {
				t.Errorf("pattern %s on body %q: got %v, want %v", c.pattern, c.body, got, c.want)
			}
		})
	}
}

// The SQS body format check, row by row (EB-2023 eb-pipes-event-filtering,
// SPEC B §4.4).
func TestRecordBodyFormatCheck(t *testing.T) {
	runRecordCases(t, []recordCase{
		{"Pipes SQS body table / plain string body, plain string pattern: normal filtering (match)", `{"body":["hello"]}`, `hello`, true},
		{"Pipes SQS body table / plain string body, plain string pattern: normal filtering (no match)", `{"body":["hello"]}`, `goodbye`, false},
		{"Pipes SQS body table / plain string body, plain string pattern with an operator", `{"body":[{"prefix":"hel"}]}`, `hello`, true},
		{"Pipes SQS body table / plain string body, no body in the pattern: filter on metadata only", `{"attributes":{"ApproximateReceiveCount":["1"]}}`, `hello`, true},
		{"Pipes SQS body table / plain string body, JSON object pattern: message dropped", `{"body":{"City":["Seattle"]}}`, `City=Seattle`, false},
		{"Pipes SQS body table / plain string body, JSON object pattern of exists false: still dropped", `{"body":{"City":[{"exists":false}]}}`, `hello`, false},
		{"Pipes SQS body table / valid JSON body, plain string pattern: message dropped", `{"body":["{\"City\":\"Seattle\"}"]}`, `{"City":"Seattle"}`, false},
		{"Pipes SQS body table / valid JSON body that is a JSON string, plain string pattern: message dropped", `{"body":["hello"]}`, `"hello"`, false},
		{"Pipes SQS body table / valid JSON body, no body in the pattern: filter on metadata only", `{"messageId":["059f36b4-87a3-44ab-83d2-661975830a7d"]}`, `{"City":"Seattle"}`, true},
		{"Pipes SQS body table / valid JSON body, JSON object pattern: normal filtering (match)", `{"body":{"City":["Seattle"]}}`, `{"City":"Seattle","State":"WA"}`, true},
		{"Pipes SQS body table / valid JSON body, JSON object pattern: normal filtering (no match)", `{"body":{"City":["Seattle"]}}`, `{"City":"Portland"}`, false},
		{"Pipes SQS body table / valid JSON array body, JSON object pattern: any element matches", `{"body":{"City":["Seattle"]}}`, `[{"City":"Portland"},{"City":"Seattle"}]`, true},
	})
}

func TestRecordFields(t *testing.T) {
	runRecordCases(t, []recordCase{
		{"Pipes filtering / metadata: messageId", `{"messageId":[{"prefix":"059f36b4"}]}`, `x`, true},
		{"Pipes filtering / metadata: receiptHandle", `{"receiptHandle":[{"exists":true}]}`, `x`, true},
		{"Pipes filtering / metadata: md5OfBody", `{"md5OfBody":["e4e68fb7bd0e697a0ae8f1bb342846b3"]}`, `x`, true},
		{"Pipes filtering / metadata: attributes are strings", `{"attributes":{"ApproximateReceiveCount":["1"],"SenderId":[{"prefix":"AIDA"}]}}`, `x`, true},
		{"Pipes filtering / metadata: attributes are strings, not numbers", `{"attributes":{"ApproximateReceiveCount":[1]}}`, `x`, false},
		{"Pipes filtering / metadata: an absent attribute", `{"attributes":{"MessageGroupId":[{"exists":false}]}}`, `x`, true},
		{"Pipes filtering / metadata: messageAttributes stringValue", `{"messageAttributes":{"tenant":{"stringValue":["acme"],"dataType":["String"]}}}`, `x`, true},
		{"Pipes filtering / metadata: messageAttributes binaryValue is base64", `{"messageAttributes":{"blob":{"binaryValue":["aGk="]}}}`, `x`, true},
		{"Pipes filtering / metadata: an absent message attribute", `{"messageAttributes":{"other":[{"exists":true}]}}`, `x`, false},
		{"SPEC §2.1 awsRegion is added by the poller and not filterable: a pattern naming it never matches", `{"awsRegion":["us-east-2"]}`, `x`, false},
		{"SPEC §2.1 eventSource is added by the poller and not filterable: a pattern naming it never matches", `{"eventSource":["aws:sqs"]}`, `x`, false},
		{"SPEC §2.1 eventSourceARN is added by the poller and not filterable: a pattern naming it never matches", `{"eventSourceARN":[{"prefix":"arn:"}]}`, `x`, false},
		{"SPEC §2.1 a field that is not filterable is absent, so exists false holds", `{"eventSource":[{"exists":false}]}`, `x`, true},
		{"EB patterns / body and metadata AND-ed", `{"body":{"n":[{"numeric":[">",5]}]},"attributes":{"ApproximateReceiveCount":["1"]}}`, `{"n":6}`, true},
		{"EB operators / $or across body and metadata", `{"$or":[{"body":{"n":[1]}},{"messageAttributes":{"tenant":{"stringValue":["acme"]}}}]}`, `{"n":2}`, true},
		{"EB operators / $or at the top applies the body format check to its alternative", `{"$or":[{"body":{"n":[1]}},{"body":["hello"]}]}`, `hello`, true},
	})
}

func TestRecordExactNumbersCompareText(t *testing.T) {
	runRecordCases(t, []recordCase{
		{"SPEC §4.1 exact numbers compare by text in a record body: 300 matches 300", `{"body":{"n":[300]}}`, `{"n":300}`, true},
		{"SPEC §4.1 exact numbers compare by text in a record body: 300 does not match 300.0", `{"body":{"n":[300]}}`, `{"n":300.0}`, false},
		{"SPEC §4.1 exact numbers compare by text in a record body: 300 does not match 3.0e2", `{"body":{"n":[300]}}`, `{"n":3.0e2}`, false},
		{"SPEC §4.1 numeric compares by value in a record body: = 300 matches 3.0e2", `{"body":{"n":[{"numeric":["=",300]}]}}`, `{"n":3.0e2}`, true},
		{"SPEC §4.1 exact numbers with text: the other fields still match by their rules", `{"body":{"n":[1.5],"s":[{"prefix":"a"}]}}`, `{"n":1.5,"s":"ab"}`, true},
		{"SPEC §4.1 exact numbers: a body with a number out of range is not JSON", `{"body":{"n":[1]}}`, `{"n":1,"m":1e400}`, false},
	})
}

func TestMatchSharesTheDecodedBody(t *testing.T) {
	ps, err := CompilePatterns([]string{`{"body":{"n":[300]}}`})
	if err != nil {
		t.Fatal(err)
	}
	ev := &pipe.Event{Message: testMessage(`{"n":300.0,"s":"x"}`)}
	if _, err := ps.Match(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	body, isJSON := ev.Body()
	m, ok := body.(map[string]any)
	if !isJSON || !ok || m["n"] != 300.0 || m["s"] != "x" {
		t.Fatalf("the event's body after matching: %#v, %v; want the float64 form", body, isJSON)
	}
}

func TestRecordValueHasEveryField(t *testing.T) {
	ev := &pipe.Event{Message: testMessage(`{"a":[1,"x"]}`)}
	rec := RecordValue(ev)
	for _, k := range []string{"messageId", "receiptHandle", "body", "attributes", "messageAttributes", "md5OfBody", "eventSource", "eventSourceARN", "awsRegion"} {
		if _, ok := rec[k]; !ok {
			t.Errorf("RecordValue has no %q", k)
		}
	}
	body := rec["body"].(map[string]any)
	if a := body["a"].([]any); a[0] != 1.0 || a[1] != "x" {
		t.Errorf("body: %#v", body)
	}
	tenant := rec["messageAttributes"].(map[string]any)["tenant"].(map[string]any)
	if tenant["stringValue"] != "acme" || tenant["dataType"] != "String" {
		t.Errorf("messageAttributes.tenant: %#v", tenant)
	}
}

func TestPatternsAreORed(t *testing.T) {
	ps, err := CompilePatterns([]string{`{"body":{"a":["1"]}}`, `{"body":{"b":["2"]}}`})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		body string
		want bool
	}{{`{"a":"1"}`, true}, {`{"b":"2"}`, true}, {`{"a":"2","b":"1"}`, false}} {
		got, _ := ps.Match(context.Background(), &pipe.Event{Message: testMessage(c.body)})
		if got != c.want {
			t.Errorf("body %s: got %v, want %v", c.body, got, c.want)
		}
	}
}
