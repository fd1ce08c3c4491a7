package pipes_test

// End to end on the local SQS server (.ci/sqs) with the AWS APIs that have
// no independent server: Step Functions and CloudWatch Logs are
// internal/fakeaws's in-process servers, which decode the real awsJson
// wire format the SDK sends and check it against the API reference.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/awsimport"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/internal/fakeaws"
	"github.com/pipesproject/pipes/internal/sqstest"
	"github.com/pipesproject/pipes/pipe"
)

// runPipeFile builds and runs the pipe of file until done says it has
// done its work, then stops it.
func runPipeFile(t *testing.T, file string, metrics *pipe.Metrics, what string, done func() bool) {
	t.Helper()
	specs, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	built, err := pipes.NewRegistry().Build(context.Background(), specs, pipes.Env{Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- pipe.NewRunner(built...).Run(ctx) }()
	waitFor(t, 60*time.Second, what, done)
	cancel()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
}

func TestSQSToAStepFunctionsEnrichedPipeToSQS(t *testing.T) {
	t.Parallel()
	fakeAWSEnv(t)
	endpoint := sqstest.Endpoint(t)
	client := sqstest.Client(t)
	in, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{VisibilityTimeout: 5 * time.Second, MaxReceiveCount: 5})
	out, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{VisibilityTimeout: 5 * time.Second, MaxReceiveCount: 5})
	const arn = "arn:aws:states:us-east-1:123456789012:stateMachine:enrich"
	sfn := fakeaws.NewSFN(map[string]fakeaws.Machine{arn: {Express: true, Run: func(input []byte) ([]byte, string, string) {
		var recs []struct {
			MessageID string `json:"messageId"`
			Body      string `json:"body"`
		}
		if err := json.Unmarshal(input, &recs); err != nil {
			return nil, "States.Runtime", err.Error()
		}
		outs := make([]map[string]any, len(recs))
		for i, r := range recs {
			outs[i] = map[string]any{"messageId": r.MessageID, "order": r.Body, "enriched": true}
		}
		b, _ := json.Marshal(outs)
		return b, "", ""
	}}})
	srv := httptest.NewServer(sfn)
	t.Cleanup(srv.Close)
	var bodies []string
	for i := range 25 {
		bodies = append(bodies, fmt.Sprintf(`{"n":%d}`, i))
	}
	sqstest.SendBodies(t, client, in, bodies...)
	file := writeFile(t, "pipe.yaml", fmt.Sprintf(`
name: sfn-enriched
source: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1, wait_time: 1s}
enrichment: {type: stepfunctions, state_machine_arn: %s, endpoint: %s}
target: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1}
`, in, endpoint, arn, srv.URL, out, endpoint))
	metrics := pipe.NewMetrics(nil)
	var got []string
	runPipeFile(t, file, metrics, "25 enriched messages on the target queue", func() bool {
		got = append(got, sqstest.DrainBodies(t, client, out)...)
		return len(got) >= 25
	})
	var orders []string
	for _, b := range got {
		var m struct {
			Order    string `json:"order"`
			Enriched bool   `json:"enriched"`
		}
		if err := json.Unmarshal([]byte(b), &m); err != nil || !m.Enriched {
			t.Fatalf("the target got %s, not the execution's output", b)
		}
		orders = append(orders, m.Order)
	}
	slices.Sort(orders)
	want := slices.Clone(bodies)
	slices.Sort(want)
	if !slices.Equal(orders, want) {
		t.Errorf("orders = %v, want %v", orders, want)
	}
	if n := testutil.ToFloat64(metrics.APICalls.WithLabelValues("sfn-enriched", "StartSyncExecution")); n < 1 || int(n) != sfn.Calls("StartSyncExecution") {
		t.Errorf("StartSyncExecution counted %v, the server got %d", n, sfn.Calls("StartSyncExecution"))
	}
}

func TestSQSToCloudWatchLogs(t *testing.T) {
	t.Parallel()
	fakeAWSEnv(t)
	endpoint := sqstest.Endpoint(t)
	client := sqstest.Client(t)
	in, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{VisibilityTimeout: 5 * time.Second, MaxReceiveCount: 5})
	logs := fakeaws.NewLogs("/pipes/orders")
	srv := httptest.NewServer(logs)
	t.Cleanup(srv.Close)
	now := time.Now().UnixMilli()
	var bodies []string
	for i := range 30 {
		bodies = append(bodies, fmt.Sprintf(`{"n":%d,"kind":"k%d","time":%d}`, i, i%2, now-int64(i)*1000))
	}
	sqstest.SendBodies(t, client, in, bodies...)
	file := writeFile(t, "pipe.yaml", fmt.Sprintf(`
name: to-logs
source: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1, wait_time: 1s}
target:
  type: cloudwatch_logs
  log_group_name: arn:aws:logs:us-east-1:123456789012:log-group:/pipes/orders:*
  log_stream_name: orders-<$.body.kind>
  timestamp: $.body.time
  input_template: '{"n": <$.body.n>}'
  endpoint: %s
`, in, endpoint, srv.URL))
	metrics := pipe.NewMetrics(nil)
	runPipeFile(t, file, metrics, "30 log events and the source queue empty", func() bool {
		visible, inflight := sqstest.Count(t, client, in)
		return len(logs.Events("/pipes/orders", "orders-k0"))+len(logs.Events("/pipes/orders", "orders-k1")) >= 30 && visible+inflight == 0
	})
	for _, stream := range []string{"orders-k0", "orders-k1"} {
		evs := logs.Events("/pipes/orders", stream)
		if len(evs) != 15 {
			t.Errorf("%s has %d events, want 15", stream, len(evs))
		}
		for _, e := range evs {
			if !strings.HasPrefix(e.Message, `{"n": `) || e.Timestamp > now || e.Timestamp < now-30_000 {
				t.Errorf("%s: event %+v is not the template's output at the body's time", stream, e)
			}
		}
	}
	if logs.Streams("/pipes/orders") != 2 {
		t.Errorf("%d streams, want 2 (created when missing)", logs.Streams("/pipes/orders"))
	}
	for _, op := range []string{"PutLogEvents", "CreateLogStream"} {
		if n := testutil.ToFloat64(metrics.APICalls.WithLabelValues("to-logs", op)); n < 1 || int(n) != logs.Calls(op) {
			t.Errorf("%s counted %v, the server got %d", op, n, logs.Calls(op))
		}
	}
}

// API Gateway with IAM authorization: internal/fakeaws.SigV4 recomputes
// each request's signature with the SDK's v4 signer and refuses any other.
func TestSQSToAnAPIGatewayHTTPTargetSignedWithSigV4(t *testing.T) {
	t.Parallel()
	fakeAWSEnv(t)
	endpoint := sqstest.Endpoint(t)
	client := sqstest.Client(t)
	in, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{VisibilityTimeout: 5 * time.Second, MaxReceiveCount: 5})
	api := newBatchServer(t)
	creds := aws.Credentials{AccessKeyID: "AKIDPIPESTEST", SecretAccessKey: "pipes-test-secret"}
	gw := httptest.NewServer(fakeaws.SigV4{Creds: creds, Service: "execute-api", Region: "eu-west-1", Next: api.Config.Handler})
	t.Cleanup(gw.Close)
	var bodies []string
	for i := range 12 {
		bodies = append(bodies, fmt.Sprintf(`{"n":%d}`, i))
	}
	sqstest.SendBodies(t, client, in, bodies...)
	file := writeFile(t, "pipe.yaml", fmt.Sprintf(`
name: to-apigw
source: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1, wait_time: 1s}
target: {type: http, url: %s/prod/orders, auth: aws_sigv4, region: eu-west-1, query: {source: pipes}}
`, in, endpoint, gw.URL))
	runPipeFile(t, file, pipe.NewMetrics(nil), "12 signed deliveries and the source queue empty", func() bool {
		_, ok := api.counts()
		visible, inflight := sqstest.Count(t, client, in)
		return len(ok) >= 12 && visible+inflight == 0
	})
	if _, ok := api.counts(); len(ok) != 12 {
		t.Errorf("the API took %d bodies, want 12", len(ok))
	}
}

// An API Gateway enrichment with IAM authorization: each record is one
// signed call (a dynamic query parameter rendered from it, so the signed
// query is the record's), and its answer is what reaches the target.
func TestAnAPIGatewayEnrichmentIsSignedWithSigV4(t *testing.T) {
	t.Parallel()
	fakeAWSEnv(t)
	endpoint := sqstest.Endpoint(t)
	client := sqstest.Client(t)
	in, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{VisibilityTimeout: 5 * time.Second, MaxReceiveCount: 5})
	creds := aws.Credentials{AccessKeyID: "AKIDPIPESTEST", SecretAccessKey: "pipes-test-secret"}
	var mu sync.Mutex
	signed := map[string]bool{} // the query's id of each signed call
	gw := httptest.NewServer(fakeaws.SigV4{Creds: creds, Service: "execute-api", Region: "eu-west-1",
		Next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/prod/lookup" || !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKIDPIPESTEST/") {
				http.Error(w, "not the stage and resource, or unsigned", http.StatusNotFound)
				return
			}
			id := r.URL.Query().Get("id")
			mu.Lock()
			signed[id] = true
			mu.Unlock()
			_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "enriched": true})
		})})
	t.Cleanup(gw.Close)
	var got []map[string]any
	tgt := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var batch []map[string]any
		if err := json.NewDecoder(r.Body).Decode(&batch); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, batch...)
		mu.Unlock()
	}))
	t.Cleanup(tgt.Close)
	var bodies []string
	for i := range 6 {
		bodies = append(bodies, fmt.Sprintf(`{"id":"o-%d"}`, i))
	}
	sqstest.SendBodies(t, client, in, bodies...)
	file := writeFile(t, "pipe.yaml", fmt.Sprintf(`
name: enrich-apigw
source: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1, wait_time: 1s}
enrichment: {type: http, url: %s/prod/lookup, auth: aws_sigv4, region: eu-west-1, batch: false, query: {id: $.body.id}}
target: {type: http, url: %s}
`, in, endpoint, gw.URL, tgt.URL))
	runPipeFile(t, file, pipe.NewMetrics(nil), "6 enriched records at the target and the source queue empty", func() bool {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		visible, inflight := sqstest.Count(t, client, in)
		return n >= 6 && visible+inflight == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 6 || len(signed) != 6 {
		t.Fatalf("the target got %d records and the gateway %d signed ids, want 6 each: %v", len(got), len(signed), got)
	}
	for _, rec := range got {
		if rec["enriched"] != true || !signed[fmt.Sprint(rec["id"])] {
			t.Errorf("the target got %v, not the signed enrichment's answer", rec)
		}
	}
}

// An imported pipe runs as it is: a describe-pipe capture of an SQS →
// Step Functions-enriched → SQS pipe, its endpoints given the SDK's way
// (AWS_ENDPOINT_URL_SQS, AWS_ENDPOINT_URL_SFN).
func TestAnImportedStepFunctionsEnrichedPipeRuns(t *testing.T) {
	fakeAWSEnv(t)
	endpoint := sqstest.Endpoint(t)
	client := sqstest.Client(t)
	in, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{VisibilityTimeout: 5 * time.Second, MaxReceiveCount: 5})
	out, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{VisibilityTimeout: 5 * time.Second, MaxReceiveCount: 5})
	arnOf := func(queueURL string) string {
		parts := strings.Split(strings.TrimRight(queueURL, "/"), "/")
		return "arn:aws:sqs:us-east-1:" + parts[len(parts)-2] + ":" + parts[len(parts)-1]
	}
	const arn = "arn:aws:states:us-east-1:123456789012:stateMachine:enrich"
	sfn := fakeaws.NewSFN(map[string]fakeaws.Machine{arn: {Express: true, Run: func(input []byte) ([]byte, string, string) {
		var recs []map[string]any
		_ = json.Unmarshal(input, &recs)
		for _, r := range recs {
			r["enriched"] = true
		}
		b, _ := json.Marshal(recs)
		return b, "", ""
	}}})
	srv := httptest.NewServer(sfn)
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ENDPOINT_URL_SQS", endpoint)
	t.Setenv("AWS_ENDPOINT_URL_SFN", srv.URL)
	describe := fmt.Sprintf(`{"Name": "imported-sfn", "Source": %q, "Enrichment": %q, "Target": %q,
  "SourceParameters": {"SqsQueueParameters": {"BatchSize": 10}},
  "RoleArn": "arn:aws:iam::123456789012:role/p", "CurrentState": "RUNNING"}`, arnOf(in), arn, arnOf(out))
	res, err := awsimport.Import("describe.json", []byte(describe), awsimport.Options{})
	if err != nil || len(res.LeftOut) > 0 {
		t.Fatalf("Import = %v, left out %v", err, res.LeftOut)
	}
	file := writeFile(t, "pipe.yaml", string(res.YAML))
	sqstest.SendBodies(t, client, in, `{"n":1}`, `{"n":2}`, `{"n":3}`)
	var got []string
	runPipeFile(t, file, pipe.NewMetrics(nil), "3 enriched messages on the target queue", func() bool {
		got = append(got, sqstest.DrainBodies(t, client, out)...)
		return len(got) >= 3
	})
	for _, b := range got {
		if !strings.Contains(b, `"enriched":true`) {
			t.Errorf("the target got %s, not the execution's output\n%s", b, res.YAML)
		}
	}
}
