package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/pipesproject/pipes/internal/rabbittest"
	"github.com/pipesproject/pipes/internal/sqstest"
)

// sqsTestEnv gives the SDK static credentials and a region, and no
// endpoint from the machine's environment.
func sqsTestEnv(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDPIPESTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "pipes-test-secret")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_ENDPOINT_URL_SQS", "")
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// sendPipeFile is a pipe reading the SQS queue named name at endpoint.
func sendPipeFile(t *testing.T, name, endpoint string) string {
	return writeFile(t, "pipe.yaml", fmt.Sprintf(`
name: send-test
source:
  type: sqs
  queue_name: %s
  endpoint: %s
  region: us-east-1
target:
  type: stdout
`, name, endpoint))
}

func deleteQueueAtEnd(t *testing.T, c *sqs.Client, name string) {
	t.Cleanup(func() {
		out, err := c.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
		if err == nil {
			_, _ = c.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl})
		}
	})
}

func receiveAll(t *testing.T, c *sqs.Client, url string, want int) []types.Message {
	t.Helper()
	var got []types.Message
	for range 20 {
		if len(got) >= want {
			break
		}
		out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 60,
			MessageAttributeNames: []string{"All"},
			// local-aws-sqs reads the older AttributeNames, not MessageSystemAttributeNames.
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll}, //nolint:staticcheck
		})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, out.Messages...)
	}
	return got
}

// Relies on local-aws-sqs's CreateQueue, RedrivePolicy attribute, a typed
// QueueDoesNotExist from GetQueueUrl, and SendMessageBatch.
func TestSendCreatesTheQueueWithItsDLQAndSendsEveryLineInBatches(t *testing.T) {
	sqsTestEnv(t)
	endpoint := sqstest.Endpoint(t)
	client := sqstest.Client(t)
	name := sqstest.QueueName(t.Name(), "")
	deleteQueueAtEnd(t, client, name)
	deleteQueueAtEnd(t, client, name+"-dlq")
	file := sendPipeFile(t, name, endpoint)
	var lines []string
	for i := range 23 {
		lines = append(lines, `{"n":`+strconv.Itoa(i)+`}`)
	}
	lines = append(lines[:5], append([]string{"", "plain text, not JSON"}, lines[5:]...)...)
	input := writeFile(t, "events.jsonl", strings.Join(lines, "\n")+"\n")

	code, _, stderr := runCLI(t, "send", "-f", file, "--input", input)
	if code != 1 || !strings.Contains(stderr, "does not exist") || !strings.Contains(stderr, "--create") {
		t.Fatalf("send to a missing queue without --create: exit %d, stderr:\n%s", code, stderr)
	}

	code, _, stderr = runCLI(t, "send", "-f", file, "--input", input, "--create", "--max-receive-count", "3")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	for _, want := range []string{"created SQS queue", name + "-dlq", "maxReceiveCount 3", "sent 24 of 24 message(s)", "0 failed"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "\r") {
		t.Errorf("a progress line was written to a buffer, not a terminal:\n%q", stderr)
	}
	url, err := client.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	attrs, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: url.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameRedrivePolicy},
	})
	if err != nil {
		t.Fatal(err)
	}
	var policy struct {
		Target string `json:"deadLetterTargetArn"`
		Max    any    `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal([]byte(attrs.Attributes["RedrivePolicy"]), &policy); err != nil || !strings.HasSuffix(policy.Target, ":"+name+"-dlq") || fmt.Sprint(policy.Max) != "3" {
		t.Errorf("redrive policy %q, want maxReceiveCount 3 to %s-dlq", attrs.Attributes["RedrivePolicy"], name)
	}
	bodies := sqstest.DrainBodies(t, client, aws.ToString(url.QueueUrl))
	if len(bodies) != 24 || !strings.Contains(strings.Join(bodies, "\n"), "plain text, not JSON") {
		t.Errorf("the queue holds %d bodies, want the 24 lines as written: %q", len(bodies), bodies)
	}

	// A second --create leaves the queue as it is and only sends.
	code, _, stderr = runCLI(t, "send", "-f", file, "--input", input, "--create")
	if code != 0 || strings.Contains(stderr, "created") || !strings.Contains(stderr, "sent 24 of 24") {
		t.Errorf("send to an existing queue with --create: exit %d, stderr:\n%s", code, stderr)
	}
}

// Relies on local-aws-sqs's FIFO queues keeping MessageGroupId and
// MessageDeduplicationId, returned for the older AttributeNames (it ignores
// MessageSystemAttributeNames).
func TestSendRecordsKeepsAttributesAndGroupIDsOnAFIFOQueue(t *testing.T) {
	sqsTestEnv(t)
	endpoint := sqstest.Endpoint(t)
	client := sqstest.Client(t)
	name := sqstest.QueueName(t.Name(), ".fifo")
	deleteQueueAtEnd(t, client, name)
	deleteQueueAtEnd(t, client, strings.TrimSuffix(name, ".fifo")+"-dlq.fifo")
	file := sendPipeFile(t, name, endpoint)
	input := writeFile(t, "records.jsonl", `{"messageId":"a","body":"{\"n\":1}","attributes":{"MessageGroupId":"g1","MessageDeduplicationId":"d1"},"messageAttributes":{"kind":{"stringValue":"order","stringListValues":[],"binaryListValues":[],"dataType":"String"}}}
{"messageId":"b","body":"two","attributes":{},"messageAttributes":{}}
`)
	code, _, stderr := runCLI(t, "send", "-f", file, "--input", input, "--records", "--create", "--group-id", "fallback")
	if code != 0 || !strings.Contains(stderr, "sent 2 of 2") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	url, err := client.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	msgs := receiveAll(t, client, aws.ToString(url.QueueUrl), 2)
	groups := map[string]string{}
	for _, m := range msgs {
		groups[aws.ToString(m.Body)] = m.Attributes["MessageGroupId"]
		if aws.ToString(m.Body) == `{"n":1}` {
			if a := m.MessageAttributes["kind"]; aws.ToString(a.StringValue) != "order" || aws.ToString(a.DataType) != "String" {
				t.Errorf("message attribute kind = %+v, want the String order", a)
			}
			if d := m.Attributes["MessageDeduplicationId"]; d != "d1" {
				t.Errorf("MessageDeduplicationId = %q, want d1", d)
			}
		}
	}
	if groups[`{"n":1}`] != "g1" || groups["two"] != "fallback" {
		t.Errorf("groups by body %v, want the record's g1 and --group-id fallback", groups)
	}
}

func TestSendCreateIsRefusedAgainstAWSWithoutYes(t *testing.T) {
	sqsTestEnv(t)
	file := writeFile(t, "pipe.yaml", `
name: aws
source:
  type: sqs
  queue_url: https://sqs.eu-west-1.amazonaws.com/123456789012/orders
target:
  type: stdout
`)
	input := writeFile(t, "events.jsonl", "{}\n")
	for _, tc := range []struct {
		name string
		env  string
	}{
		{"no endpoint", ""},
		{"an AWS endpoint in the environment", "https://sqs.eu-west-1.amazonaws.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AWS_ENDPOINT_URL_SQS", tc.env)
			code, _, stderr := runCLI(t, "send", "-f", file, "--input", input, "--create")
			if code != 2 || !strings.Contains(stderr, "--yes") {
				t.Errorf("exit %d, stderr:\n%s", code, stderr)
			}
		})
	}
}

func TestSendRefusesBadUsage(t *testing.T) {
	sqsTestEnv(t)
	sqsFile := writeFile(t, "pipe.yaml", `
name: local
source:
  type: sqs
  queue_url: http://127.0.0.1:1/123456789012/orders
  endpoint: http://127.0.0.1:1
target:
  type: stdout
`)
	memFile := writeFile(t, "memory.yaml", "name: mem\nsource:\n  type: memory\ntarget:\n  type: stdout\n")
	good := writeFile(t, "events.jsonl", "{}\n")
	bad := writeFile(t, "bad.jsonl", "{\"body\":\"x\"}\nnot json\n{\"eventSource\":\"aws:rmq\",\"data\":\"%%%\"}\n")
	rmq := writeFile(t, "rmq.jsonl", `{"eventSource":"aws:rmq","data":"eA=="}`+"\n")
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"no input", []string{"-f", sqsFile}, []string{"--input is required"}},
		{"memory source", []string{"-f", memFile, "--input", good}, []string{"memory queue", "preload"}},
		{"bad records, every line named", []string{"-f", sqsFile, "--input", bad, "--records"}, []string{"bad.jsonl:2:", "bad.jsonl:3:", "base64"}},
		{"a RabbitMQ record for an sqs source", []string{"-f", sqsFile, "--input", rmq, "--records"}, []string{"rmq.jsonl:1", "RabbitMQ record"}},
		{"max receive count", []string{"-f", sqsFile, "--input", good, "--max-receive-count", "0"}, []string{"--max-receive-count"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, append([]string{"send"}, tc.args...)...)
			if code != 2 {
				t.Errorf("exit %d, want 2; stderr:\n%s", code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
		})
	}
}

func TestParseSendLine(t *testing.T) {
	for _, tc := range []struct {
		name    string
		line    string
		records bool
		body    string
		group   string
		rabbit  bool
		headers map[string]any
		err     string
	}{
		{name: "a plain line is the body", line: `{"a": 1}`, body: `{"a": 1}`},
		{name: "plain text", line: `hello`, body: `hello`},
		{name: "an SQS record", line: `{"body":"x","attributes":{"MessageGroupId":"g"}}`, records: true, body: "x", group: "g"},
		{name: "an SQS record without body", line: `{"messageId":"m"}`, records: true, err: "body is missing"},
		{name: "an attribute without a data type", line: `{"body":"x","messageAttributes":{"a":{"stringValue":"v"}}}`, records: true, err: "dataType"},
		{name: "a RabbitMQ record", line: `{"eventSource":"aws:rmq","data":"aGk=","basicProperties":{"headers":{"s":{"bytes":[104,105]},"n":3,"f":1.5,"t":{"x":true}}}}`,
			records: true, body: "hi", rabbit: true, headers: map[string]any{"s": "hi", "n": int64(3), "f": 1.5, "t": map[string]any{"x": true}}},
		{name: "bad bytes", line: `{"eventSource":"aws:rmq","data":"","basicProperties":{"headers":{"s":{"bytes":[300]}}}}`, records: true, rabbit: true, err: "0..255"},
		{name: "no data", line: `{"eventSource":"aws:rmq"}`, records: true, err: "data is missing"},
		{name: "not JSON", line: `nope`, records: true, err: "not a Pipes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseSendLine(tc.line, tc.records)
			if err == nil && o.rabbit {
				_, err = publishing(o)
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(o.body) != tc.body || o.group != tc.group || o.rabbit != tc.rabbit {
				t.Errorf("got body %q group %q rabbit %v", o.body, o.group, o.rabbit)
			}
			if tc.headers != nil {
				msg, _ := publishing(o)
				if fmt.Sprint(map[string]any(msg.Headers)) != fmt.Sprint(tc.headers) {
					t.Errorf("headers %v, want %v", msg.Headers, tc.headers)
				}
			}
		})
	}
}

func FuzzParseSendLine(f *testing.F) {
	f.Add(`{"body":"x","messageAttributes":{"a":{"stringValue":"v","dataType":"String"}}}`, true)
	f.Add(`{"eventSource":"aws:rmq","data":"aGk=","basicProperties":{"headers":{"s":{"bytes":[104]},"l":[1,{"a":2}]}}}`, true)
	f.Add(`plain`, false)
	f.Fuzz(func(t *testing.T, line string, records bool) {
		o, err := parseSendLine(line, records)
		if err != nil {
			return
		}
		if !records && string(o.body) != line {
			t.Fatalf("plain line %q became body %q", line, o.body)
		}
		if o.rabbit {
			_, _ = publishing(o)
		}
	})
}

// Relies on RabbitMQ 3.10: quorum queues with x-delivery-limit, publisher
// confirms, and the management API to read the declared arguments.
func TestSendToRabbitMQCreatesTheQueueAndPublishesWithConfirms(t *testing.T) {
	rabbittest.ManagementURL(t) // skips without it: the queue's arguments are read through the management API
	amqpURL := rabbittest.URL(t)
	queue := rabbittest.Name(t, "")
	t.Cleanup(func() {
		ch := rabbittest.Channel(t)
		_, _ = ch.QueueDelete(queue, false, false, false)
		_, _ = ch.QueueDelete(queue+"-dlq", false, false, false)
	})
	file := writeFile(t, "pipe.yaml", fmt.Sprintf(`
name: rmq
source:
  type: rabbitmq
  url: %s
  queue: %s
target:
  type: stdout
`, amqpURL, queue))
	plain := writeFile(t, "events.jsonl", "{\"n\":1}\n{\"n\":2}\n")
	records := writeFile(t, "records.jsonl", `{"eventSource":"aws:rmq","data":"aGk=","basicProperties":{"contentType":"text/plain","messageId":"m-1","headers":{"kind":{"bytes":[111,114,100,101,114]},"n":7}}}`+"\n")

	code, _, stderr := runCLI(t, "send", "-f", file, "--input", plain)
	if code != 1 || !strings.Contains(stderr, "does not exist") {
		t.Fatalf("missing queue without --create: exit %d, stderr:\n%s", code, stderr)
	}
	code, _, stderr = runCLI(t, "send", "-f", file, "--input", plain, "--create", "--max-receive-count", "4")
	if code != 0 || !strings.Contains(stderr, "created RabbitMQ quorum queue") || !strings.Contains(stderr, "sent 2 of 2") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if strings.Contains(stderr, "guest") {
		t.Errorf("the AMQP credentials appear in the output:\n%s", stderr)
	}
	var info struct {
		Arguments map[string]any `json:"arguments"`
	}
	if st := rabbittest.Management(t, "GET", "/api/queues/%2F/"+queue, nil, &info); st != 200 {
		t.Fatalf("management API: status %d", st)
	}
	if info.Arguments["x-queue-type"] != "quorum" || fmt.Sprint(info.Arguments["x-delivery-limit"]) != "4" || info.Arguments["x-dead-letter-routing-key"] != queue+"-dlq" {
		t.Errorf("queue arguments %v, want a quorum queue with x-delivery-limit 4 dead-lettering to %s-dlq", info.Arguments, queue)
	}
	code, _, stderr = runCLI(t, "send", "-f", file, "--input", records, "--records")
	if code != 0 || !strings.Contains(stderr, "sent 1 of 1") {
		t.Fatalf("records: exit %d, stderr:\n%s", code, stderr)
	}
	got := rabbittest.Get(t, queue)
	if len(got) != 3 {
		t.Fatalf("the queue holds %d messages, want 3", len(got))
	}
	if string(got[0].Body) != `{"n":1}` || got[0].DeliveryMode != 2 {
		t.Errorf("first message %q (delivery mode %d), want the line as written, persistent", got[0].Body, got[0].DeliveryMode)
	}
	last := got[2]
	if string(last.Body) != "hi" || last.ContentType != "text/plain" || last.MessageId != "m-1" || last.Headers["kind"] != "order" || fmt.Sprint(last.Headers["n"]) != "7" {
		t.Errorf("record message: body %q, properties %+v", last.Body, last.Headers)
	}
}
