package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/internal/sqstest"
)

// scopeRegion is the region of a SigV4 Authorization header's credential
// scope (Credential=AKID/20240101/us-east-1/sqs/aws4_request).
var scopeRegion = regexp.MustCompile(`Credential=[^/]+/[0-9]+/([^/]+)/`)

// regionRecorder is an in-process HTTP proxy in front of an SQS server
// that records the region every call was signed for.
type regionRecorder struct {
	mu      sync.Mutex
	regions []string
}

func (r *regionRecorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Compact(slices.Sorted(slices.Values(r.regions)))
}

func newRegionRecorder(t *testing.T, upstream string) (*regionRecorder, string) {
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	rec := &regionRecorder{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		region := "unsigned"
		if m := scopeRegion.FindStringSubmatch(req.Header.Get("Authorization")); m != nil {
			region = m[1]
		}
		rec.mu.Lock()
		rec.regions = append(rec.regions, region)
		rec.mu.Unlock()
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	return rec, srv.URL
}

// --endpoint-url and --region, as the AWS CLI takes them, override the
// region and endpoint a pipeline file gives its source and target (and
// AWS_REGION): against local-aws-sqs, behind a proxy that records the
// signing region, `pipes send` fills the source queue, `pipes run --drain`
// moves the messages to the target queue and `pipes dlq inspect` (its
// first name --endpoint kept) reads them, although the file's endpoints
// point where nothing listens and its regions are others.
func TestAWSFlagsOverrideTheFilesRegionAndEndpoint(t *testing.T) {
	client := sqstest.Client(t)
	rec, endpoint := newRegionRecorder(t, sqstest.Endpoint(t))
	srcURL, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{})
	dstURL, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{})
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDPIPESTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "pipes-test-secret")
	t.Setenv("AWS_REGION", "ap-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_ENDPOINT_URL_SQS", "")

	dir := t.TempDir()
	file := filepath.Join(dir, "pipeline.yaml")
	pipeline := fmt.Sprintf(`name: flags
source:
  type: sqs
  queue_url: %s
  region: eu-west-3
  endpoint: http://127.0.0.1:9
  wait_time: 1s
target:
  type: sqs
  queue_url: %s
  region: eu-west-3
  endpoint: http://127.0.0.1:9
`, srcURL, dstURL)
	if err := os.WriteFile(file, []byte(pipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	events := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(events, []byte("{\"n\":1}\n{\"n\":2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--endpoint-url", endpoint, "--region", "us-west-2"}
	var out, errb bytes.Buffer
	if code := run(context.Background(), append([]string{"send", "-f", file, "--input", events}, flags...), nil, &out, &errb); code != 0 {
		t.Fatalf("send exit %d: %s", code, errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := run(context.Background(), append([]string{"run", "-f", file, "--drain", "--metrics-addr", ""}, flags...), nil, &out, &errb); code != 0 {
		t.Fatalf("run --drain exit %d: %s", code, errb.String())
	}
	if visible, _ := sqstest.Count(t, client, dstURL); visible != 2 {
		t.Errorf("the target queue holds %d messages, want 2; run's stderr:\n%s", visible, errb.String())
	}
	if got := rec.seen(); !slices.Equal(got, []string{"us-west-2"}) {
		t.Errorf("calls were signed for %v, want us-west-2 (--region) only", got)
	}
	// dlq reads the source queue's attributes through the flags too (the
	// queue has no redrive policy, so it names --queue-url).
	out.Reset()
	errb.Reset()
	code := run(context.Background(), []string{"dlq", "inspect", "-f", file, "--endpoint", endpoint, "--region", "us-west-2", "--queue-url", dstURL}, nil, &out, &errb)
	if code != 0 || !strings.Contains(errb.String(), "2 visible") {
		t.Errorf("dlq inspect --endpoint: exit %d, stderr %q", code, errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := run(context.Background(), []string{"send", "-f", file, "--input", events, "--endpoint-url", "127.0.0.1:9324"}, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), "want an http:// or https:// URL") {
		t.Errorf("a bad --endpoint-url: exit %d, stderr %q", code, errb.String())
	}
}

// The flags reach every AWS part of a pipe and nothing else: an sqs
// source, a lambda enrichment, AWS targets and dead-letter targets; not an
// http target or a rabbitmq source.
func TestAWSFlagsApplyToEveryAWSPart(t *testing.T) {
	specs, err := config.Loader{}.Parse("p.yaml", []byte(`pipes:
  - name: a
    source: {type: sqs, queue_name: q, region: eu-west-1}
    enrichment: {type: lambda, function_name: f}
    target: {type: sns, topic_arn: "arn:aws:sns:eu-west-1:123456789012:t"}
    dead_letter: {type: sqs, queue_url: "https://sqs.eu-west-1.amazonaws.com/123456789012/d"}
  - name: b
    source: {type: rabbitmq, url: "amqp://guest:guest@127.0.0.1:5672/", queue: q}
    target: {type: http, url: "http://127.0.0.1:1/x"}
`))
	if err != nil {
		t.Fatal(err)
	}
	awsFlags{region: "us-west-2", endpoint: "http://127.0.0.1:4566"}.apply(specs)
	a, b := specs[0], specs[1]
	for _, got := range [][2]string{
		{a.Source.Region, a.Source.Endpoint}, {a.Enrichment.Region, a.Enrichment.Endpoint},
		{a.Target.Region, a.Target.Endpoint}, {a.DeadLetter.Target.Region, a.DeadLetter.Target.Endpoint},
	} {
		if got != [2]string{"us-west-2", "http://127.0.0.1:4566"} {
			t.Errorf("pipe a: region and endpoint %q, want the flags'", got)
		}
	}
	if b.Source.Region != "" || b.Target.Endpoint != "" || b.Target.Region != "" {
		t.Errorf("pipe b has no AWS part, got %+v %+v", b.Source, b.Target)
	}
}
