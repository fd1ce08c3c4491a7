package template

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

// Test cases cite the AWS page they reproduce:
// [pipes-it] = EventBridge User Guide, "Amazon EventBridge Pipes input
// transformation" (eb-pipes-input-transformation), with its section name.

var testNow = time.Date(2026, 11, 30, 1, 2, 3, 4_000_000, time.FixedZone("CET", 3600))

func testVars() Vars {
	return Vars{
		PipeName:      "example",
		PipeARN:       "arn:aws:pipes:us-east-1:123456789012:pipe/example",
		SourceARN:     "arn:aws:sqs:us-east-1:123456789012:orders",
		EnrichmentARN: "pipes:example/enrichment",
		TargetARN:     "pipes:example/target",
		Now:           func() time.Time { return testNow },
	}
}

// sqsMessage is the SQS record of the Pipes docs' SQS source sample with the
// given body.
func sqsMessage(body string) *source.Message {
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
		MD5OfBody:      "e4e68fb7bd0e697a0ae8f1bb342846b3",
		EventSource:    "aws:sqs",
		EventSourceARN: "arn:aws:sqs:us-east-2:123456789012:my-queue",
		AWSRegion:      "us-east-2",
	}
}

func sqsEvent(t testing.TB, body string) *pipe.Event {
	t.Helper()
	ev, err := pipe.NewEvent(sqsMessage(body))
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

const ec2Body = `{"version":"0","id":"7bf73129-1428-4cd3-a780-95db273d1602","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","detail":{"instance-id":"i-0123456789","state":"RUNNING"}}`

func TestRenderFollowsThePipesDocs(t *testing.T) {
	tests := []struct {
		name     string
		template string
		body     string
		kind     Kind
		want     string
	}{
		{
			name:     "a static string is copied as text [pipes-it Static string]",
			template: `Hello, sender`, body: `x`, kind: KindText,
			want: `Hello, sender`,
		},
		{
			name:     "a static string written in quotes is a JSON string copied as it is [pipes-it Static string]",
			template: `"Hello, sender"`, body: `x`, kind: KindJSON,
			want: `"Hello, sender"`,
		},
		{
			name:     "a bare JSON path gives the sender id as raw text [pipes-it JSON Path]",
			template: `<$.attributes.SenderId>`, body: `x`, kind: KindText,
			want: `AIDAIENQZJOLO23YVJ4VO`,
		},
		{
			name:     "a dynamic string in quotes is a JSON string with the value inside [pipes-it Dynamic string]",
			template: `"Hello, <$.attributes.SenderId>"`, body: `x`, kind: KindJSON,
			want: `"Hello, AIDAIENQZJOLO23YVJ4VO"`,
		},
		{
			name:     "a dynamic string without quotes is text [pipes-it Dynamic string]",
			template: `Hello, <$.attributes.SenderId>`, body: `x`, kind: KindText,
			want: `Hello, AIDAIENQZJOLO23YVJ4VO`,
		},
		{
			name:     "static JSON is copied as it is [pipes-it Static JSON, without the sample's trailing comma]",
			template: "{\n  \"key1\": \"value1\",\n  \"key2\": \"value2\",\n  \"key3\": \"value3\"\n}", body: `x`, kind: KindJSON,
			want: "{\n  \"key1\": \"value1\",\n  \"key2\": \"value2\",\n  \"key3\": \"value3\"\n}",
		},
		{
			name:     "dynamic JSON inserts a body key and the ingestion time [pipes-it Dynamic JSON, with the sample's missing comma added]",
			template: "{\n  \"key1\": \"value1\",\n  \"key2\": <$.body.key>,\n  \"d\": <aws.pipes.event.ingestion-time>\n}",
			body:     `{"key": "value"}`, kind: KindJSON,
			want: "{\n  \"key1\": \"value1\",\n  \"key2\": \"value\",\n  \"d\": \"2026-11-30T00:02:03.004Z\"\n}",
		},
		{
			name:     "square brackets take an item of an array [pipes-it Using square bracket notation]",
			template: `{"key1": "value1", "key2": <$.body.Records[3]>}`,
			body:     `{"Records": [0, 1, 2, {"eventName": "INSERT"}]}`, kind: KindJSON,
			want: `{"key1": "value1", "key2": {"eventName":"INSERT"}}`,
		},
		{
			name:     "unquoted string paths give quoted strings, as in the example output [pipes-it Input transform example]",
			template: `{"instance" : <$.body.detail.instance-id>, "state": <$.body.detail.state>, "pipeArn" : <aws.pipes.pipe-arn>, "pipeName" : <aws.pipes.pipe-name>}`,
			body:     ec2Body, kind: KindJSON,
			want: `{"instance" : "i-0123456789", "state": "RUNNING", "pipeArn" : "arn:aws:pipes:us-east-1:123456789012:pipe/example", "pipeName" : "example"}`,
		},
		{
			name:     "quoted placeholders of strings and unquoted placeholders of objects give valid JSON [pipes-it Note on quoting]",
			template: `{"state": "<$.body.detail.state>", "detail": <$.body.detail>}`,
			body:     ec2Body, kind: KindJSON,
			want: `{"state": "RUNNING", "detail": {"instance-id":"i-0123456789","state":"RUNNING"}}`,
		},
		{
			name:     "dashes, underscores, digits and forward slashes are path characters [pipes-it Note on supported syntax]",
			template: `<$.body.detail-type>|<$.body.a_b>|<$.body.k9>|<$.body.a/b>`,
			body:     `{"detail-type": "D", "a_b": "U", "k9": 9, "a/b": "S"}`, kind: KindText,
			want: `D|U|9|S`,
		},
		{
			name:     "a wildcard over an array gives the array of matches [pipes-it Note on supported syntax: wildcards]",
			template: `{"ids": <$.body.items[*].id>}`,
			body:     `{"items": [{"id": 1}, {"id": "two"}, {"no": 3}]}`, kind: KindJSON,
			want: `{"ids": [1,"two"]}`,
		},
		{
			name:     "a dot wildcard over an object gives its values in key order [pipes-it Note on supported syntax: wildcards]",
			template: `{"v": <$.body.o.*>}`,
			body:     `{"o": {"b": 2, "a": 1}}`, kind: KindJSON,
			want: `{"v": [1,2]}`,
		},
		{
			name:     "a JSON body is parsed so its keys can be referenced [pipes-it Implicit body data parsing]",
			template: `{"k": <$.body.someKey>}`,
			body:     `{"someKey": {"n": 1.5}}`, kind: KindJSON,
			want: `{"k": {"n":1.5}}`,
		},
		{
			name:     "an SQS body that is not JSON stays a plain string [pipes-it Implicit body data parsing, Note]",
			template: `{"data": <$.body>}`,
			body:     "hello \"you\"\n", kind: KindJSON,
			want: `{"data": "hello \"you\"\n"}`,
		},
		{
			name:     "a bare <$.body> gives the JSON body exactly as sent, not AWS's de-quoted {key: value} [pipes-it Implicit body data parsing caveat]",
			template: `<$.body>`,
			body:     `{"key": "value", "big": 12345678901234567890}`, kind: KindText,
			want: `{"key": "value", "big": 12345678901234567890}`,
		},
		{
			name:     "a bare JSON path with whitespace around it is still the JSON Path form [pipes-it JSON Path]",
			template: "\n<$.body>\n",
			body:     `plain text`, kind: KindText,
			want: "\nplain text\n",
		},
		{
			name:     "the caveat's fix {\"data\": <$.body>} wraps the body as a JSON value [pipes-it Implicit body data parsing caveat]",
			template: `{"data": <$.body>}`,
			body:     "{\n  \"key\": \"value\",\n  \"big\": 12345678901234567890\n}", kind: KindJSON,
			want: `{"data": {"key":"value","big":12345678901234567890}}`,
		},
		{
			name:     "an object inside a JSON string is its JSON text, escaped [pipes-it Note on quoting]",
			template: `{"msg": "got <$.body.o> and <$.body.n>"}`,
			body:     `{"o": {"k": "v"}, "n": 2}`, kind: KindJSON,
			want: `{"msg": "got {\"k\":\"v\"} and 2"}`,
		},
		{
			name:     "a missing path gives null as a bare JSON value (not documented by AWS)",
			template: `{"a": <$.body.nope>, "b": <$.body.list[9]>, "c": <$.body.list[*].x>}`,
			body:     `{"list": [1]}`, kind: KindJSON,
			want: `{"a": null, "b": null, "c": null}`,
		},
		{
			name:     "a missing path gives nothing inside a JSON string (not documented by AWS)",
			template: `{"a": "[<$.body.nope>]"}`,
			body:     `{}`, kind: KindJSON,
			want: `{"a": "[]"}`,
		},
		{
			name:     "a missing path gives nothing in a text template (not documented by AWS)",
			template: `a=<$.body.nope>.`,
			body:     `{}`, kind: KindText,
			want: `a=.`,
		},
		{
			name:     "a key under a body that is not JSON is missing (not documented by AWS)",
			template: `{"a": <$.body.key>}`,
			body:     `plain`, kind: KindJSON,
			want: `{"a": null}`,
		},
		{
			name:     "a JSON null is written as null in JSON and as text",
			template: `{"a": <$.body.n>, "b": "<$.body.n>"}`,
			body:     `{"n": null}`, kind: KindJSON,
			want: `{"a": null, "b": "null"}`,
		},
		{
			name:     "numbers and booleans are written like encoding/json writes them",
			template: `[<$.body.a>, <$.body.b>, <$.body.c>, <$.body.d>, <$.body.t>]`,
			body:     `{"a": 1.50, "b": 1e-7, "c": 1e21, "d": -0.0, "t": true}`, kind: KindJSON,
			want: `[1.5, 1e-7, 1e+21, -0, true]`,
		},
		{
			name:     "the pipe-level reserved variables are strings [pipes-it Reserved variables]",
			template: `{"a": <aws.pipes.pipe-arn>, "n": "<aws.pipes.pipe-name>", "s": <aws.pipes.source-arn>, "e": <aws.pipes.enrichment-arn>, "t": <aws.pipes.target-arn>, "d": "<aws.pipes.event.ingestion-time>"}`,
			body:     `x`, kind: KindJSON,
			want: `{"a": "arn:aws:pipes:us-east-1:123456789012:pipe/example", "n": "example", "s": "arn:aws:sqs:us-east-1:123456789012:orders", "e": "pipes:example/enrichment", "t": "pipes:example/target", "d": "2026-11-30T00:02:03.004Z"}`,
		},
		{
			name:     "reserved variables work in text [pipes-it Reserved variables]",
			template: `<aws.pipes.pipe-name> got <$.messageId> at <aws.pipes.event.ingestion-time>`,
			body:     `x`, kind: KindText,
			want: `example got 059f36b4-87a3-44ab-83d2-661975830a7d at 2026-11-30T00:02:03.004Z`,
		},
		{
			name:     "aws.pipes.event is the record as received, body still a string [pipes-it Reserved variables]",
			template: `{"e": <aws.pipes.event>}`,
			body:     `{"k": 1}`, kind: KindJSON,
			want: `{"e": {"messageId":"059f36b4-87a3-44ab-83d2-661975830a7d","receiptHandle":"AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a","body":"{\"k\": 1}","attributes":{"ApproximateFirstReceiveTimestamp":"1545082649185","ApproximateReceiveCount":"1","SenderId":"AIDAIENQZJOLO23YVJ4VO","SentTimestamp":"1545082649183"},"messageAttributes":{},"md5OfBody":"e4e68fb7bd0e697a0ae8f1bb342846b3","eventSource":"aws:sqs","eventSourceARN":"arn:aws:sqs:us-east-2:123456789012:my-queue","awsRegion":"us-east-2"}}`,
		},
		{
			name:     "aws.pipes.event.json is the record with its body decoded [pipes-it Reserved variables]",
			template: `{"e": <aws.pipes.event.json>}`,
			body:     `{"k": 1}`, kind: KindJSON,
			want: `{"e": {"messageId":"059f36b4-87a3-44ab-83d2-661975830a7d","receiptHandle":"AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a","body":{"k":1},"attributes":{"ApproximateFirstReceiveTimestamp":"1545082649185","ApproximateReceiveCount":"1","SenderId":"AIDAIENQZJOLO23YVJ4VO","SentTimestamp":"1545082649183"},"messageAttributes":{},"md5OfBody":"e4e68fb7bd0e697a0ae8f1bb342846b3","eventSource":"aws:sqs","eventSourceARN":"arn:aws:sqs:us-east-2:123456789012:my-queue","awsRegion":"us-east-2"}}`,
		},
		{
			name:     "$ alone is the whole record with its body decoded",
			template: `<$>`,
			body:     `plain`, kind: KindText,
			want: `{"messageId":"059f36b4-87a3-44ab-83d2-661975830a7d","receiptHandle":"AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a","body":"plain","attributes":{"ApproximateFirstReceiveTimestamp":"1545082649185","ApproximateReceiveCount":"1","SenderId":"AIDAIENQZJOLO23YVJ4VO","SentTimestamp":"1545082649183"},"messageAttributes":{},"md5OfBody":"e4e68fb7bd0e697a0ae8f1bb342846b3","eventSource":"aws:sqs","eventSourceARN":"arn:aws:sqs:us-east-2:123456789012:my-queue","awsRegion":"us-east-2"}`,
		},
		{
			name:     "a '<' that starts no placeholder is text",
			template: `a < b and <b>bold</b> <$.body.x>`,
			body:     `{"x": "!"}`, kind: KindText,
			want: `a < b and <b>bold</b> !`,
		},
		{
			name:     "a placeholder can be an object key inside its quotes",
			template: `{"<$.body.k>": 1}`,
			body:     `{"k": "a\"b"}`, kind: KindJSON,
			want: `{"a\"b": 1}`,
		},
		{
			name:     "a template that is a JSON string with a placeholder inside an escape is text",
			template: `"\u00<$.body.x>41"`,
			body:     `{"x": "zz"}`, kind: KindText,
			want: `"\u00zz41"`,
		},
		{
			name:     "an escaped backslash before a placeholder in a JSON string is fine",
			template: `{"p": "C:\\<$.body.dir>"}`,
			body:     `{"dir": "tmp"}`, kind: KindJSON,
			want: `{"p": "C:\\tmp"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp, err := Parse(tt.template)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if tp.Kind() != tt.kind {
				t.Errorf("kind = %v, want %v", tp.Kind(), tt.kind)
			}
			got, err := tp.Render(sqsEvent(t, tt.body), testVars())
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			if tp.Kind() == KindJSON && !json.Valid(got) {
				t.Errorf("JSON-kind output is not valid JSON: %s", got)
			}
		})
	}
}

func TestRenderMessageAttributesAsInTheRecord(t *testing.T) {
	m := sqsMessage("x")
	s := "blue"
	m.MessageAttributes = map[string]source.MessageAttribute{
		"color": {StringValue: &s, DataType: "String"},
		"bin":   {BinaryValue: []byte{1, 2, 3}, DataType: "Binary"},
	}
	ev, err := pipe.NewEvent(m)
	if err != nil {
		t.Fatal(err)
	}
	tp := MustParse(`{"c": <$.messageAttributes.color.stringValue>, "b": <$.messageAttributes.bin.binaryValue>, "t": <$.messageAttributes.*.dataType>, "a": <$.messageAttributes.color>, "l": <$.messageAttributes.color.stringListValues>, "bl": "<$.messageAttributes.bin.binaryListValues>"}`)
	got, err := tp.Render(ev, Vars{})
	if err != nil {
		t.Fatal(err)
	}
	attr, err := json.Marshal(m.MessageAttributes["color"]) // as the record has it
	if err != nil {
		t.Fatal(err)
	}
	want := `{"c": "blue", "b": "AQID", "t": ["Binary","String"], "a": ` + string(attr) + `, "l": [], "bl": "[]"}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestRenderAfterAnEnrichmentUsesItsPayload(t *testing.T) {
	tests := []struct {
		name     string
		payload  string
		template string
		want     string
	}{
		{
			name:    "paths are evaluated against a JSON payload the enrichment returned [pipes-it intro: for targets, the payload is what the enrichment returned]",
			payload: `{"order": {"id": 12345678901234567890}, "ok": true}`, template: `{"id": <$.order.id>, "ok": <$.ok>, "body": <$.body>, "t": "<$.order>"}`,
			want: `{"id": 12345678901234567890, "ok": true, "body": null, "t": "{\"id\":12345678901234567890}"}`,
		},
		{
			name:    "aws.pipes.event is the payload without metadata [pipes-it Reserved variables]",
			payload: "{\"a\": [1, 2]}", template: `{"e": <aws.pipes.event>, "j": <aws.pipes.event.json>}`,
			want: `{"e": {"a":[1,2]}, "j": {"a":[1,2]}}`,
		},
		{
			name:    "a payload that is not JSON is a string for aws.pipes.event and absent for aws.pipes.event.json [pipes-it Reserved variables]",
			payload: `done "ok"`, template: `{"e": <aws.pipes.event>, "j": <aws.pipes.event.json>, "t": "<aws.pipes.event>"}`,
			want: `{"e": "done \"ok\"", "j": null, "t": "done \"ok\""}`,
		},
		{
			name:    "a text template over a text payload gives the text",
			payload: `done`, template: `<$>!`,
			want: `done!`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := &pipe.Event{Message: sqsMessage(`{"k": 1}`), RecordJSON: []byte(tt.payload)}
			got, err := MustParse(tt.template).Render(ev, testVars())
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name     string
		template string
		want     string
	}{
		{"an empty template, which means no template", ``, `input template is empty`},
		{"a template longer than 8192 characters [SPEC B 5.1]", strings.Repeat("é", 8193), `input template is 8193 characters long; the limit is 8192`},
		{"an unterminated placeholder", `Hello <$.body.name`, `input template: line 1, column 7 (offset 6): unterminated placeholder "<$.body.name": no closing '>'`},
		{"an unterminated reserved variable", `{"a": <aws.pipes.pipe-name}`, `input template: line 1, column 7 (offset 6): unterminated placeholder "<aws.pipes.pipe-name}": no closing '>'`},
		{"a space in a path", `<$.a b>`, `input template: line 1, column 5 (offset 4): invalid path "<$.a b>": expected '.' or '[', found ' '`},
		{"recursive descent, which Pipes does not support", `x <$..a>`, `input template: line 1, column 6 (offset 5): invalid path "<$..a>": expected a name or '*' after '.', found '.'`},
		{"a path ending with a dot", `<$.a.>`, `input template: line 1, column 6 (offset 5): invalid path "<$.a.>": expected a name or '*' after '.', found the end`},
		{"a name without a dot", `<$a>`, `input template: line 1, column 3 (offset 2): invalid path "<$a>": expected '.' or '[', found 'a'`},
		{"a quoted name in brackets", `<$['a']>`, `input template: line 1, column 4 (offset 3): invalid path "<$['a']>": expected an array index or '*' after '[', found '\''`},
		{"an unclosed index", `<$.a[1>`, `input template: line 1, column 7 (offset 6): invalid path "<$.a[1>": expected ']' after the index, found the end`},
		{"an unclosed wildcard index", `<$.a[*.b]>`, `input template: line 1, column 7 (offset 6): invalid path "<$.a[*.b]>": expected ']' after '[*', found '.'`},
		{"a negative index", `<$.a[-1]>`, `input template: line 1, column 6 (offset 5): invalid path "<$.a[-1]>": expected an array index or '*' after '[', found '-'`},
		{"a huge index", `<$.a[99999999999]>`, `input template: line 1, column 6 (offset 5): invalid path "<$.a[99999999999]>": array index 99999999999 is too large`},
		{"an unknown reserved variable", `{"n": <aws.pipes.pipe_name>}`, `input template: line 1, column 7 (offset 6): unknown reserved variable "<aws.pipes.pipe_name>"`},
		{"a rule variable, which pipes do not have", `<aws.events.rule-name>`, `input template: line 1, column 1 (offset 0): unknown reserved variable "<aws.events.rule-name>"`},
		{"the Static JSON sample with its trailing comma [pipes-it Static JSON]", "{\n  \"key1\": \"value1\",\n  \"key2\": \"value2\",\n  \"key3\": \"value3\",\n}", `input template: line 5, column 1 (offset 62): not valid JSON: invalid character '}' looking for beginning of object key string at "}"`},
		{"the Dynamic JSON sample with its missing comma [pipes-it Dynamic JSON]", "{\n  \"key1\": \"value1\"\n  \"key2\": <$.body.key>,\n  \"d\": <aws.pipes.event.ingestion-time>\n}", `input template: line 3, column 3 (offset 23): not valid JSON: invalid character '"' after object key:value pair at "\"key2\": <$.body.key>,"`},
		{"two bare placeholders side by side", `{"a": <$.x><$.y>}`, `input template: line 1, column 12 (offset 11): not valid JSON: invalid character 'n' after object key:value pair at "<$.y>}"`},
		{"a bare placeholder as an object key", `{<$.k>: 1}`, `input template: line 1, column 2 (offset 1): not valid JSON: invalid character 'n' looking for beginning of object key string at "<$.k>: 1}"`},
		{"a placeholder right after a backslash in a JSON string", `{"a": "\<$.x>"}`, `input template: line 1, column 9 (offset 8): placeholder "<$.x>" is inside an escape sequence of a JSON string`},
		{"a placeholder inside a \\u escape in a JSON string", `["\u00<$.x>41"]`, `input template: line 1, column 7 (offset 6): placeholder "<$.x>" is inside an escape sequence of a JSON string`},
		{"an unterminated JSON array", `[1, <$.x>`, `input template: line 1, column 10 (offset 9): not valid JSON: unexpected end of JSON input`},
		{"a raw newline inside a JSON string", "{\"a\": \"x\ny\"}", `input template: line 1, column 9 (offset 8): not valid JSON: invalid character '\n' in string literal at "\ny\"}"`},
		{"columns count characters, not bytes", "{\n  \"é\": x}", `input template: line 2, column 8 (offset 10): not valid JSON: invalid character 'x' looking for beginning of value at "x}"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.template)
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			if err.Error() != tt.want {
				t.Errorf("got  %s\nwant %s", err, tt.want)
			}
		})
	}
}

func TestJSONOutputStaysValidForAnyStringValue(t *testing.T) {
	values := []string{
		`say "hi"`, "line1\nline2\r\n\ttab", `back\slash \"`, "unicode: é 漢字 🎉", "control \x00\x01\x1f",
		"invalid utf-8 \xff\xfe", "separators \u2028\u2029", `</script>&<`, ``, `{"looks": "like json"}`,
	}
	templates := []string{
		`{"bare": <$.body.v>}`,
		`{"in": "a <$.body.v> b", "key <$.body.v>": 1}`,
		`[<$.body.v>, "<$.body.v>", <$.body>, "<$.body>", <aws.pipes.event>, "<aws.pipes.event.json>"]`,
		`"<$.body.v>"`,
	}
	for _, v := range values {
		body, _ := json.Marshal(map[string]string{"v": v})
		for _, src := range templates {
			tp := MustParse(src)
			for _, b := range []string{string(body), v} { // the value in a JSON body, and as a plain body
				got, err := tp.Render(sqsEvent(t, b), testVars())
				if err != nil {
					t.Fatal(err)
				}
				if !json.Valid(got) {
					t.Errorf("template %s over body %q: invalid JSON %q", src, b, got)
				}
			}
		}
		// A bare string comes back unchanged (bar invalid UTF-8, which
		// becomes U+FFFD as encoding/json does).
		got, _ := MustParse(`{"bare": <$.body.v>, "in": "<$.body.v>"}`).Render(sqsEvent(t, string(body)), Vars{})
		var out struct{ Bare, In string }
		if err := json.Unmarshal(got, &out); err != nil {
			t.Fatal(err)
		}
		want := string([]rune(v))
		if out.Bare != want || out.In != want {
			t.Errorf("value %q came back as %q and %q", v, out.Bare, out.In)
		}
	}
}

func TestTransformerIsAPipeTransformerSafeForConcurrentUse(t *testing.T) {
	var tr pipe.Transformer = NewTransformer(MustParse(`{"n": <$.body.n>, "p": <aws.pipes.pipe-name>}`), testVars())
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			ev := sqsEvent(t, `{"n": `+string(rune('0'+i))+`}`)
			got, err := tr.Transform(context.Background(), ev)
			if err != nil {
				errs <- err
				return
			}
			if want := `{"n": ` + string(rune('0'+i)) + `, "p": "example"}`; string(got) != want {
				t.Errorf("got %s, want %s", got, want)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestRenderRefusesANilEvent(t *testing.T) {
	if _, err := MustParse(`x`).Render(nil, Vars{}); err == nil {
		t.Fatal("no error")
	}
}

func TestIngestionTimeIsTakenOncePerRender(t *testing.T) {
	calls := 0
	vars := Vars{Now: func() time.Time { calls++; return testNow }}
	got, _ := MustParse(`<aws.pipes.event.ingestion-time> <aws.pipes.event.ingestion-time>`).Render(sqsEvent(t, "x"), vars)
	if calls != 1 || string(got) != "2026-11-30T00:02:03.004Z 2026-11-30T00:02:03.004Z" {
		t.Errorf("calls = %d, got %s", calls, got)
	}
}

func TestAJSONTemplatesOutputIsVouchedForAndATextTemplatesIsNot(t *testing.T) {
	for _, tt := range []struct {
		src  string
		want bool
	}{{`{"id": <$.messageId>}`, true}, {`id <$.messageId>`, false}} {
		tp, err := Parse(tt.src)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := pipe.NewEvent(&source.Message{MessageID: "m-1", Body: "{}"})
		if err != nil {
			t.Fatal(err)
		}
		out, err := NewTransformer(tp, Vars{}).Transform(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		ev.RecordJSON = out
		if got := ev.PayloadIsJSON(); got != tt.want {
			t.Errorf("%s: PayloadIsJSON = %v, want %v", tt.src, got, tt.want)
		}
	}
}
