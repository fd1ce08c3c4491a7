package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/pipesproject/pipes/internal/rabbittest"
	"github.com/pipesproject/pipes/internal/sqstest"
)

// An SQS → SQS pipe defined as CloudFormation (a filter and an input
// template) runs with `pipes run --aws` against local-aws-sqs: the paid
// orders reach the target queue rendered by the template, the other is
// filtered (and deleted, as Pipes does), and the source queue ends empty.
// It relies on local-aws-sqs's plain send, receive and delete, and on its
// accepting a queue URL whose host is AWS's (the target's URL is built from
// its ARN) while the SDK talks to AWS_ENDPOINT_URL_SQS. An imported pipe
// long-polls 20 s (AWS has no wait-time parameter), so on local-aws-sqs the
// run takes about 40 s: the first receive and the last one before the stop
// each wait out the poll.
func TestRunAWSRunsAnImportedSQSToSQSPipeEndToEnd(t *testing.T) {
	t.Parallel()
	endpoint := sqstest.Endpoint(t)
	client := sqstest.Client(t)
	srcURL, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{VisibilityTimeout: 30 * time.Second})
	dstURL, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{})

	arn := func(queueURL string) string {
		parts := strings.Split(strings.TrimRight(queueURL, "/"), "/")
		return fmt.Sprintf("arn:aws:sqs:us-east-1:%s:%s", parts[len(parts)-2], parts[len(parts)-1])
	}
	tmpl := fmt.Sprintf(`AWSTemplateFormatVersion: "2010-09-09"
Parameters:
  SourceArn: {Type: String}
  TargetArn: {Type: String, Default: "arn:aws:sqs:us-east-1:000000000000:not-this-one"}
Resources:
  OrdersPipe:
    Type: AWS::Pipes::Pipe
    Properties:
      Name: !Sub ${AWS::StackName}-paid-orders
      RoleArn: arn:aws:iam::123456789012:role/pipe
      Source: !Ref SourceArn
      SourceParameters:
        SqsQueueParameters: {BatchSize: 10}
        FilterCriteria:
          Filters:
            - Pattern: '{"body": {"status": ["paid"]}}'
      Target: !Ref TargetArn
      TargetParameters:
        InputTemplate: '{"order": <$.body.id>, "customer": "<$.body.customer>", "pipe": "<aws.pipes.pipe-name>"}'
`)
	file := filepath.Join(t.TempDir(), "stack.yaml")
	if err := os.WriteFile(file, []byte(tmpl), 0o644); err != nil {
		t.Fatal(err)
	}

	// The import on its own: the file it writes validates.
	var out, errb bytes.Buffer
	imported := filepath.Join(t.TempDir(), "pipes.yaml")
	if code := run(context.Background(), []string{"import", "aws", "--from", file, "-o", imported, "--param", "SourceArn=" + arn(srcURL), "--param", "TargetArn=" + arn(dstURL)}, nil, &out, &errb); code != 0 {
		t.Fatalf("import exit %d: %s", code, errb.String())
	}
	if code := run(context.Background(), []string{"validate", "-f", imported}, nil, &out, &errb); code != 0 {
		t.Fatalf("validate exit %d: %s", code, errb.String())
	}

	sqstest.SendBodies(t, client, srcURL,
		`{"status":"paid","id":1,"customer":"c1"}`,
		`{"status":"new","id":2,"customer":"c2"}`,
		`{"status":"paid","id":3,"customer":"c3"}`)

	// run --aws takes --param as import aws does, over the environment
	// (SOURCE_ARN, the name the import reports, names another queue); a
	// parameter no --param gives comes from the variable of its own name,
	// over the template's Default.
	env := []string{"AWS_ENDPOINT_URL_SQS=" + endpoint, "SOURCE_ARN=" + arn(dstURL), "TargetArn=" + arn(dstURL)}
	runUntilMoved(t, env, []string{"run", "--aws", file, "--param", "SourceArn=" + arn(srcURL), "--metrics-addr", ""}, client, srcURL, dstURL, 2)

	got := sqstest.DrainBodies(t, client, dstURL)
	var orders []string
	for _, b := range got {
		var v map[string]any
		if err := json.Unmarshal([]byte(b), &v); err != nil {
			t.Errorf("target got %q, not JSON: %v", b, err)
		}
		orders = append(orders, fmt.Sprint(v["order"], " ", v["customer"], " ", v["pipe"]))
	}
	slices.Sort(orders)
	if want := []string{"1 c1 paid-orders", "3 c3 paid-orders"}; !slices.Equal(orders, want) {
		t.Errorf("target queue got %q, want %q", orders, want)
	}
	if visible, inflight := sqstest.Count(t, client, srcURL); visible+inflight != 0 {
		t.Errorf("source queue holds %d visible and %d in flight, want none (the filtered one deleted too)", visible, inflight)
	}
}

// runUntilMoved runs the pipes command args in a child process of the
// test binary, with env added to the fake AWS environment (childEnv), until
// n messages are on the queue dstURL and none is left on srcURL (or the
// command ends), then stops it with SIGTERM; it must exit 0. A child, not
// run in this process: the SDK reads AWS_ENDPOINT_URL_SQS and the rest
// from the process's environment, and a child's own lets these tests run
// in parallel (t.Setenv cannot).
func runUntilMoved(t *testing.T, env, args []string, client *sqs.Client, srcURL, dstURL string, n int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = childEnv(env...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	waitUntil(t, 90*time.Second, fmt.Sprintf("%d messages on the target queue and none left on the source", n), func() bool {
		select {
		case <-done:
			return true
		default:
		}
		dstVisible, _ := sqstest.Count(t, client, dstURL)
		srcVisible, srcInflight := sqstest.Count(t, client, srcURL)
		return dstVisible >= n && srcVisible+srcInflight == 0
	})
	t.Logf("delivered and drained %s after the start", time.Since(started))
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-done
	if waitErr != nil {
		t.Fatalf("run --aws: %v (exit 0 wanted), stderr:\n%s", waitErr, stderr.String())
	}
	t.Logf("stopped %s after the start", time.Since(started))
}

// An imported SQS → http-enriched → SQS pipe runs with `pipes run --aws`
// against local-aws-sqs and a real net/http server: the source is
// `!Sub ${RootQueue.Arn}` and the target `Fn::Sub` of a variable standing
// for `!GetAtt DoneQueue.Arn`, both queues of the template; the enrichment
// is an API destination not in the file, whose endpoint (with a `*`) comes
// from LOOKUP_URL, with a dynamic path parameter, header and query value,
// rendered per record at run time.
func TestRunAWSRunsAnImportedPipeWithDynamicEnrichmentParametersEndToEnd(t *testing.T) {
	t.Parallel()
	endpoint := sqstest.Endpoint(t)
	client := sqstest.Client(t)
	srcURL, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{VisibilityTimeout: 30 * time.Second})
	dstURL, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{})
	parts := func(queueURL string) (account, name string) {
		p := strings.Split(strings.TrimRight(queueURL, "/"), "/")
		return p[len(p)-2], p[len(p)-1]
	}
	account, srcName := parts(srcURL)
	_, dstName := parts(dstURL)
	var mu sync.Mutex
	var seen []string
	lookup := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.EscapedPath())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"path": %q, "tenant": %q, "key": %q}`, r.URL.EscapedPath(), r.Header.Get("X-Tenant"), r.URL.Query().Get("key"))
	}))
	defer lookup.Close()
	env := []string{"AWS_ACCOUNT_ID=" + account, "AWS_ENDPOINT_URL_SQS=" + endpoint, "LOOKUP_URL=" + lookup.URL + "/customers/*"}
	tmpl := `Parameters:
  RootName: {Type: String}
  DoneName: {Type: String}
Resources:
  RootQueue:
    Type: AWS::SQS::Queue
    Properties: {QueueName: !Ref RootName}
  DoneQueue:
    Type: AWS::SQS::Queue
    Properties: {QueueName: !Ref DoneName}
  LookupPipe:
    Type: AWS::Pipes::Pipe
    Properties:
      Name: lookup
      Source: !Sub ${RootQueue.Arn}
      Enrichment: arn:aws:events:us-east-1:123456789012:api-destination/lookup/0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b
      EnrichmentParameters:
        HttpParameters:
          PathParameterValues: [$.body.id]
          HeaderParameters: {X-Tenant: $.body.tenant}
          QueryStringParameters: {key: <$.body.key>}
      Target:
        Fn::Sub:
          - "${Done}"
          - Done: !GetAtt DoneQueue.Arn
`
	file := filepath.Join(t.TempDir(), "stack.yaml")
	if err := os.WriteFile(file, []byte(tmpl), 0o644); err != nil {
		t.Fatal(err)
	}
	sqstest.SendBodies(t, client, srcURL,
		`{"id":"c/1","tenant":"acme","key":"k 1"}`,
		`{"id":"c2","tenant":"umbrella","key":"k2"}`)
	runUntilMoved(t, env, []string{"run", "--aws", file, "--param", "RootName=" + srcName, "--param", "DoneName=" + dstName, "--metrics-addr", ""}, client, srcURL, dstURL, 2)
	var got []string
	for _, b := range sqstest.DrainBodies(t, client, dstURL) {
		var v map[string]string
		if err := json.Unmarshal([]byte(b), &v); err != nil {
			t.Errorf("target got %q, not the enrichment's answer: %v", b, err)
		}
		got = append(got, v["path"]+" "+v["tenant"]+" "+v["key"])
	}
	slices.Sort(got)
	if want := []string{"/customers/c%2F1 acme k 1", "/customers/c2 umbrella k2"}; !slices.Equal(got, want) {
		t.Errorf("target queue got %q, want %q (enrichment requests %q)", got, want, seen)
	}
}

// run --aws reads --param Key=Value (a bad one is a usage error), and
// refuses it without --aws.
func TestRunAWSParamFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "stack.yaml")
	tmpl := `Parameters:
  SourceArn: {Type: String}
Resources:
  P:
    Type: AWS::Pipes::Pipe
    Properties: {Source: !Ref SourceArn, Target: "arn:aws:sns:us-east-1:123456789012:out"}
`
	if err := os.WriteFile(file, []byte(tmpl), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--aws", file, "--param", "SourceArn"}, `--param "SourceArn": want Key=Value`},
		{[]string{"run", "-f", "../../examples/quickstart/pipeline.yaml", "--param", "A=b"}, "--param gives values to the parameters of --aws definitions"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), tt.args, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("%q: exit %d, stderr %q, want 2 and %q", tt.args, code, errb.String(), tt.want)
		}
	}
}

// `pipes import aws` exits 2 and names what it left out, and still writes
// the rest.
func TestImportAWSExitsTwoAndNamesWhatItLeftOut(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"import", "aws", "--from", "../../awsimport/testdata/apigw_and_unmappable.yaml"}, nil, &out, &errb)
	if code != 2 {
		t.Fatalf("exit %d, want 2; stderr:\n%s", code, errb.String())
	}
	for _, want := range []string{
		"left out: Resources.StreamPipe.Properties.SourceParameters.KinesisStreamParameters",
		"set these environment variables (or pass --param): API_ID",
	} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errb.String())
		}
	}
	if !strings.Contains(out.String(), "name: check") {
		t.Errorf("the pipe that maps is not written:\n%s", out.String())
	}
	errb.Reset()
	if code := run(context.Background(), []string{"run", "--aws", "../../awsimport/testdata/apigw_and_unmappable.yaml"}, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), "cannot run here") {
		t.Errorf("run --aws of a partial import: exit %d, stderr:\n%s", code, errb.String())
	}
	if code := run(context.Background(), []string{"import", "aws"}, nil, &out, &errb); code != 2 {
		t.Errorf("import aws without --from: exit %d, want 2", code)
	}
	describe, err := os.ReadFile("../../awsimport/testdata/describe_pipe.json")
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run(context.Background(), []string{"import", "aws", "--from", "-"}, bytes.NewReader(describe), &out, &errb); code != 0 || !strings.Contains(out.String(), "name: orders-to-bus") {
		t.Errorf("import aws --from - (describe-pipe on stdin): exit %d\n%s", code, out.String())
	}
}

// An input of megabytes whose filter pattern is over Pipes' 4096
// characters and whose template is over its 8192 does not exit 0 with a
// file `pipes validate` refuses: the importer checks what it writes as
// validate does, names those pipes as left out with their path and the
// reason, writes the rest, and exits 2.
func TestImportAWSOfAnOversizedInputLeavesOutWhatDoesNotValidate(t *testing.T) {
	values := make([]string, 300_000)
	for i := range values {
		values[i] = fmt.Sprintf("%q", fmt.Sprintf("sku-%07d", i))
	}
	pattern := `{"body": {"sku": [` + strings.Join(values, ",") + `]}}`
	tmpl := `{"pad": "` + strings.Repeat("x", 1<<20) + `", "body": <$.body>}`
	doc, err := json.Marshal(map[string]any{"Resources": map[string]any{
		"In": map[string]any{"Type": "AWS::SQS::Queue", "Properties": map[string]any{"QueueName": "in"}},
		"Big": map[string]any{"Type": "AWS::Pipes::Pipe", "Properties": map[string]any{
			"Source": map[string]any{"Fn::GetAtt": []any{"In", "Arn"}}, "Target": "arn:aws:sns:us-east-1:123456789012:out",
			"SourceParameters": map[string]any{"FilterCriteria": map[string]any{"Filters": []any{map[string]any{"Pattern": pattern}}}},
			"TargetParameters": map[string]any{"InputTemplate": tmpl},
		}},
		// A template made with a variable is not judged by the check of
		// the written pipe (a placeholder until deploy time); its text
		// without the variable is over the limit all the same.
		"BigSub": map[string]any{"Type": "AWS::Pipes::Pipe", "Properties": map[string]any{
			"Source": map[string]any{"Fn::GetAtt": []any{"In", "Arn"}}, "Target": "arn:aws:sns:us-east-1:123456789012:out",
			"TargetParameters": map[string]any{"InputTemplate": map[string]any{"Fn::Sub": `{"stage": "${Stage}", "pad": "` + strings.Repeat("z", 9000) + `"}`}},
		}},
		"Small": map[string]any{"Type": "AWS::Pipes::Pipe", "Properties": map[string]any{
			"Source": map[string]any{"Fn::GetAtt": []any{"In", "Arn"}}, "Target": "arn:aws:sns:us-east-1:123456789012:out",
		}},
	}, "Parameters": map[string]any{"Stage": map[string]any{"Type": "String"}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	in, written := filepath.Join(dir, "big.json"), filepath.Join(dir, "pipes.yaml")
	if err := os.WriteFile(in, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("input of %d MB", len(doc)>>20)
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"import", "aws", "--from", in, "-o", written}, nil, &out, &errb); code != 2 {
		t.Fatalf("exit %d, want 2; stderr:\n%.2000s", code, errb.String())
	}
	for _, want := range []string{
		"left out: Resources.Big.Properties.SourceParameters.FilterCriteria.Filters[0].Pattern: the pattern is 4200018 characters long as JSON; at most 4096 are allowed (Pipes' limit); the pipe is not imported",
		"left out: Resources.Big.Properties.TargetParameters.InputTemplate: the input template is 1048605 characters long; the limit is 8192 (Pipes' limit); the pipe is not imported",
		"left out: Resources.BigSub.Properties.TargetParameters.InputTemplate: the input template is 9024 characters long without its variables; the limit is 8192 (Pipes' limit); the pipe is not imported",
	} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q:\n%.2000s", want, errb.String())
		}
	}
	if len(errb.String()) > 4000 {
		t.Errorf("the report quotes the input: %d bytes", errb.Len())
	}
	t.Setenv("AWS_REGION", "us-east-1")
	errb.Reset()
	if code := run(context.Background(), []string{"validate", "-f", written}, nil, &out, &errb); code != 0 {
		t.Errorf("the written file does not validate: exit %d: %s", code, errb.String())
	}
}

// `pipes validate` accepts every golden file of the importer, with the
// variables its report lists set as a user would set them.
func TestPipesValidateAcceptsEveryImportedGolden(t *testing.T) {
	goldens, err := filepath.Glob("../../awsimport/testdata/golden/*.yaml")
	if err != nil || len(goldens) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	value := func(name string) string {
		switch {
		case name == "AWS_REGION":
			return "us-east-1"
		case name == "AWS_ACCOUNT_ID":
			return "123456789012"
		case name == "PARTNER_WEBHOOK_URL":
			return "https://partner.example.com/orders/*/*"
		case name == "PARTNER_LOOKUP_URL":
			return "https://partner.example.com/customers/*"
		case strings.HasSuffix(name, "QUEUE_URL"):
			return "https://sqs.us-east-1.amazonaws.com/123456789012/q"
		case strings.HasSuffix(name, "_URL"):
			return "https://api.example.com/x"
		case strings.HasSuffix(name, "_HOST"):
			return "broker.example.com"
		case strings.HasSuffix(name, "FLOW_ARN"): // a state machine's
			return "arn:aws:states:us-east-1:123456789012:stateMachine:flow"
		}
		return "x"
	}
	for _, g := range goldens {
		t.Run(filepath.Base(g), func(t *testing.T) {
			report, err := os.ReadFile(strings.TrimSuffix(g, ".yaml") + ".stderr")
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(string(report), "\n") {
				if names, ok := strings.CutPrefix(line, "env: "); ok {
					for _, n := range strings.Split(names, ", ") {
						t.Setenv(n, value(n))
					}
				}
			}
			var out, errb bytes.Buffer
			if code := run(context.Background(), []string{"validate", "-f", g}, nil, &out, &errb); code != 0 {
				t.Errorf("validate exit %d: %s", code, errb.String())
			}
		})
	}
}

// A CreatePipe body with an Amazon MQ for RabbitMQ source
// (RabbitMQBrokerParameters: QueueName, BatchSize) and an SQS target runs
// with `pipes run --aws` against the machine's RabbitMQ and local-aws-sqs:
// the broker's scheme, host, port and credentials come from the variables
// the import names, the input template reads the decoded data and the
// record's eventSourceKey, and the broker's queue ends empty. It relies on
// RabbitMQ's plain AMQP 0-9-1 consume and ack and on local-aws-sqs's send.
func TestRunAWSRunsAnImportedRabbitMQPipeEndToEnd(t *testing.T) {
	broker, err := url.Parse(rabbittest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	queue := rabbittest.Name(t, "")
	rabbittest.DeclareQueue(t, queue, rabbittest.QueueOptions{})
	client := sqstest.Client(t)
	dstURL, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{})
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDPIPESTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "pipes-test-secret")
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_ENDPOINT_URL_SQS", sqstest.Endpoint(t))
	password, _ := broker.User.Password()
	port := broker.Port()
	if port == "" {
		port = "5672"
	}
	for k, v := range map[string]string{
		"RMQ_ORDERS_RABBITMQ_SCHEME":   broker.Scheme,
		"RMQ_ORDERS_RABBITMQ_USER":     broker.User.Username(),
		"RMQ_ORDERS_RABBITMQ_PASSWORD": password,
		"RMQ_ORDERS_RABBITMQ_HOST":     broker.Hostname(),
		"RMQ_ORDERS_RABBITMQ_PORT":     port,
	} {
		t.Setenv(k, v)
	}
	parts := strings.Split(strings.TrimRight(dstURL, "/"), "/")
	body, err := json.Marshal(map[string]any{
		"Name":    "rmq-orders",
		"RoleArn": "arn:aws:iam::123456789012:role/pipe",
		"Source":  "arn:aws:mq:us-east-1:123456789012:broker:shop:b-0123abcd-4567-89ef-0123-456789abcdef",
		"SourceParameters": map[string]any{"RabbitMQBrokerParameters": map[string]any{
			"Credentials": map[string]any{"BasicAuth": "arn:aws:secretsmanager:us-east-1:123456789012:secret:rmq"},
			"QueueName":   queue,
			"BatchSize":   5,
		}},
		"Target": fmt.Sprintf("arn:aws:sqs:us-east-1:%s:%s", parts[len(parts)-2], parts[len(parts)-1]),
		"TargetParameters": map[string]any{
			"InputTemplate": `{"order": <$.data.id>, "key": "<$.eventSourceKey>"}`,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "create-pipe.json")
	if err := os.WriteFile(file, body, 0o644); err != nil {
		t.Fatal(err)
	}
	rabbittest.Publish(t, queue, `{"id":1}`, `{"id":2}`, `{"id":3}`)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var runOut, runErr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"run", "--aws", file, "--metrics-addr", ""}, nil, &runOut, &runErr)
	}()
	waitUntil(t, 60*time.Second, "three messages on the target queue and the broker's queue empty", func() bool {
		select {
		case code := <-done:
			done <- code
			return true
		default:
		}
		visible, _ := sqstest.Count(t, client, dstURL)
		return visible >= 3 && rabbittest.Count(t, queue) == 0
	})
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("run --aws exit %d: %s", code, runErr.String())
	}
	got := sqstest.DrainBodies(t, client, dstURL)
	slices.Sort(got)
	want := []string{
		`{"order": 1, "key": "` + queue + `::/"}`,
		`{"order": 2, "key": "` + queue + `::/"}`,
		`{"order": 3, "key": "` + queue + `::/"}`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("target queue got %q, want %q", got, want)
	}
}
