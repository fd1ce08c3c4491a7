package pipes_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/internal/sqstest"
	"github.com/pipesproject/pipes/pipe"
)

// Items a target refuses with a client error (HTTP 400) reach the pipe's
// dead-letter queue at once, with their failure context, instead of cycling
// through maxReceiveCount; the others are delivered; the source ends empty.
//
// Both servers: it relies only on send, receive and delete.
func TestClientErrorsGoToTheDeadLetterQueueAtOnceWithTheirContext(t *testing.T) {
	t.Parallel()
	sqstest.Servers(t, func(t *testing.T, s sqstest.Server) {
		testClientErrorsGoToTheDeadLetterQueueAtOnceWithTheirContext(t, s)
	})
}

func testClientErrorsGoToTheDeadLetterQueueAtOnceWithTheirContext(t *testing.T, s sqstest.Server) {
	fakeAWSEnv(t)
	endpoint := sqstest.EndpointOf(t, s)
	client := sqstest.ClientOf(t, s)
	queueURL, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{VisibilityTimeout: 2 * time.Second, MaxReceiveCount: 10})
	deadURL, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{})
	var bodies []string
	for i := range 20 {
		if i%7 == 3 {
			bodies = append(bodies, fmt.Sprintf(`{"n":%d,"invalid":true}`, i))
		} else {
			bodies = append(bodies, fmt.Sprintf(`{"n":%d}`, i))
		}
	}
	sqstest.SendBodies(t, client, queueURL, bodies...)
	var mu sync.Mutex
	calls := make(map[string]int)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		calls[string(body)]++
		mu.Unlock()
		if strings.Contains(string(body), "invalid") {
			http.Error(w, "schema violation: n must not be invalid", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	file := writeFile(t, "pipe.yaml", fmt.Sprintf(`
name: strict
source: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1, wait_time: 1s, max_concurrency: 2, initial_concurrency: 1}
target:
  type: http
  url: %s
  batch: false
  input_template: <$.body>
dead_letter:
  type: sqs
  queue_url: %s
  endpoint: %s
  region: us-east-1
`, queueURL, endpoint, srv.URL, deadURL, endpoint))
	specs, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	built, err := pipes.NewRegistry().Build(context.Background(), specs, pipes.Env{Drain: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := pipe.NewRunner(built...).Run(ctx); err != nil {
		t.Fatal(err)
	}
	out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(deadURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
		MessageAttributeNames: []string{"All"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) != 3 {
		t.Fatalf("dead-letter queue got %d messages, want the 3 invalid ones", len(out.Messages))
	}
	mu.Lock()
	defer mu.Unlock()
	for _, m := range out.Messages {
		if !strings.Contains(aws.ToString(m.Body), "invalid") {
			t.Errorf("dead-lettered %s", aws.ToString(m.Body))
		}
		attr := func(k string) string {
			v, ok := m.MessageAttributes[k]
			if !ok {
				return ""
			}
			return aws.ToString(v.StringValue)
		}
		if attr("ErrorCode") == "" || !strings.Contains(attr("ErrorMessage"), "400") || attr("pipes-stage") != "target" ||
			attr("pipes-pipe") != "strict" || attr("pipes-original-message-id") == "" || !strings.HasPrefix(attr("pipes-source-arn"), "arn:aws:sqs:") {
			t.Errorf("context attributes of %s: %v", aws.ToString(m.Body), m.MessageAttributes)
		}
		if calls[aws.ToString(m.Body)] != 1 {
			t.Errorf("%s was tried %d times, want once: a client error is not retried", aws.ToString(m.Body), calls[aws.ToString(m.Body)])
		}
	}
	visible, inflight := sqstest.Count(t, client, queueURL)
	if visible+inflight != 0 {
		t.Errorf("source queue still holds %d messages", visible+inflight)
	}
}
