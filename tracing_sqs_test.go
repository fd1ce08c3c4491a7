package pipes_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/internal/otlptest"
	"github.com/pipesproject/pipes/internal/sqstest"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/tracing"
)

// TestSQSMessagesLinkTheirProducersTracesToTheBatchSpan sends, to a real
// SQS-compatible server, one message with a traceparent message attribute
// and one with the AWSTraceHeader system attribute (SendMessage's
// MessageSystemAttributes), runs an http-target pipe with the OTLP tracer
// and reads the in-process receiver: the batch spans link to both
// producers (the X-Ray Root/Parent turned into W3C ids), and the target
// got a traceparent of the batch's trace.
//
// Server behaviour relied on: local-aws-sqs returns the AWSTraceHeader a
// message was sent with among its attributes (it ignores
// MessageSystemAttributeNames and returns every system attribute), and
// keeps String message attributes. fauxqs 2.4.1 does not return an
// AWSTraceHeader sent this way (tried: only the traceparent link came
// back), so the test runs on local-aws-sqs only.
func TestSQSMessagesLinkTheirProducersTracesToTheBatchSpan(t *testing.T) {
	t.Parallel()
	fakeAWSEnv(t)
	endpoint := sqstest.EndpointOf(t, sqstest.LocalAWSSQS)
	client := sqstest.ClientOf(t, sqstest.LocalAWSSQS)
	queueURL, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{VisibilityTimeout: 5 * time.Second, MaxReceiveCount: 5})
	ctx := context.Background()
	const (
		w3c  = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		xray = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	)
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(`{"n":1}`),
		MessageAttributes: map[string]types.MessageAttributeValue{"traceparent": {DataType: aws.String("String"), StringValue: aws.String(w3c)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(`{"n":2}`),
		MessageSystemAttributes: map[string]types.MessageSystemAttributeValue{"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String(xray)}}}); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var traceparents []string
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		traceparents = append(traceparents, r.Header.Get("traceparent"))
		mu.Unlock()
	}))
	defer target.Close()
	rcv := otlptest.Start(t)
	tr, err := tracing.New(ctx, tracing.Config{Endpoint: rcv.URL})
	if err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, "pipe.yaml", fmt.Sprintf(`
name: linked
source: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1, wait_time: 1s}
target: {type: http, url: %s}
`, queueURL, endpoint, target.URL))
	specs, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	built, err := pipes.NewRegistry().Build(ctx, specs, pipes.Env{Drain: true, Tracer: tr})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := pipe.NewRunner(built...).Run(runCtx); err != nil {
		t.Fatal(err)
	}
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	links := map[string]bool{}
	batchTraces := map[string]bool{}
	for _, s := range rcv.Spans() {
		if s.GetName() != "batch" {
			continue
		}
		batchTraces[hex.EncodeToString(s.GetTraceId())] = true
		for _, l := range s.GetLinks() {
			links[hex.EncodeToString(l.GetTraceId())+"-"+hex.EncodeToString(l.GetSpanId())] = true
		}
	}
	for _, want := range []string{
		"4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", // the traceparent attribute
		"5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8", // AWSTraceHeader's Root and Parent
	} {
		if !links[want] {
			t.Errorf("no batch span links to %s; links %v", want, links)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(traceparents) == 0 {
		t.Fatal("the target got no request")
	}
	for _, tp := range traceparents {
		sc, ok := tracing.ParseTraceparent(tp)
		if !ok || !batchTraces[sc.TraceID().String()] {
			t.Errorf("the target got traceparent %q, not of a batch span's trace (%v)", tp, batchTraces)
		}
	}
}
