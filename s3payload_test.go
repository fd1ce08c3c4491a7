package pipes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/budget"
	"github.com/pipesproject/pipes/internal/s3payload"
	"github.com/pipesproject/pipes/internal/sqstest"
	"github.com/pipesproject/pipes/pipe"
)

// The tests of this file run large payloads through S3 on fauxqs, the one
// server with S3 (local-aws-sqs has none): Extended Client pointers
// unwrapped by the sqs source, their objects deleted after their message,
// the sqs target's offload read back by another pipe, and S3 event
// notifications split into one record per object. They rely on fauxqs's
// S3 (path-style, on the SQS port) and on its redrive policy moving a
// message received maxReceiveCount times to the dead-letter queue.

// payload is a JSON body of about size bytes: {"kind":…,"id":…,"pad":"…"}.
func payload(kind, id string, size int) []byte {
	head := fmt.Sprintf(`{"kind":%q,"id":%q,"pad":"`, kind, id)
	pad := max(size-len(head)-2, 0)
	b := make([]byte, 0, len(head)+pad+2)
	b = append(b, head...)
	for i := range pad {
		b = append(b, 'a'+byte(i%26))
	}
	return append(b, '"', '}')
}

// sendPointer stores body in S3 under key (unless body is nil: a pointer
// to nothing) and sends the Extended Client's pointer message for it, as
// the Java client does: the pointer body and ExtendedPayloadSize.
func sendPointer(t *testing.T, c *sqs.Client, queueURL, bucket, key string, body []byte, size int) {
	t.Helper()
	if body != nil {
		sqstest.PutObject(t, sqstest.S3Client(t), bucket, key, body)
	}
	_, err := c.SendMessage(t.Context(), &sqs.SendMessageInput{
		QueueUrl:    aws.String(queueURL),
		MessageBody: aws.String(s3payload.Pointer{Bucket: bucket, Key: key}.Body()),
		MessageAttributes: map[string]types.MessageAttributeValue{
			s3payload.AttrPayloadSize: {DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(size))},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// payloadRecord is the part of a record these tests read.
type payloadRecord struct {
	MessageID         string          `json:"messageId"`
	Body              string          `json:"body"`
	Envelope          json.RawMessage `json:"envelope"`
	MessageAttributes map[string]struct {
		StringValue string `json:"stringValue"`
	} `json:"messageAttributes"`
}

// payloadServer is a real HTTP target that keeps every record it gets and
// fails (batchItemFailures) those whose body's id starts with "fail", and
// answers 400 (a client error: dead-lettered) to a batch with an id
// starting with "reject".
type payloadServer struct {
	*httptest.Server
	mu   sync.Mutex
	seen map[string][]payloadRecord // by the body's id
}

func newPayloadServer(t *testing.T) *payloadServer {
	s := &payloadServer{seen: map[string][]payloadRecord{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var batch []payloadRecord
		if err := json.NewDecoder(r.Body).Decode(&batch); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		var failures []map[string]string
		reject := false
		s.mu.Lock()
		for _, rec := range batch {
			var b struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal([]byte(rec.Body), &b)
			s.seen[b.ID] = append(s.seen[b.ID], rec)
			reject = reject || strings.HasPrefix(b.ID, "reject")
			if strings.HasPrefix(b.ID, "fail") {
				failures = append(failures, map[string]string{"itemIdentifier": rec.MessageID})
			}
		}
		s.mu.Unlock()
		if reject {
			http.Error(w, "rejected", http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"batchItemFailures": failures})
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *payloadServer) records(id string) []payloadRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.seen[id])
}

// dlqMessages receives every message of the dead-letter queue url.
func dlqMessages(t *testing.T, c *sqs.Client, url string) []types.Message {
	t.Helper()
	var out []types.Message
	for {
		res, err := c.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, VisibilityTimeout: 60, MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Messages) == 0 {
			return out
		}
		out = append(out, res.Messages...)
	}
}

// fauxqs only (S3). Bodies of 1 MB and 10 MB reach the HTTP target whole,
// filtered on their content; the pointer is the record's envelope; a
// pointer to a missing object fails alone and, like a message the target
// fails, ends in the dead-letter queue as the pointer it was, its object
// (when there is one) kept; the objects of delivered and filtered
// messages are deleted after their message.
func TestS3PointersOnFauxqsReachTheTargetWholeAndTheirObjectsGoOnlyAfterTheirMessage(t *testing.T) {
	t.Parallel()
	fakeAWSEnv(t)
	endpoint := sqstest.EndpointOf(t, sqstest.Fauxqs)
	client := sqstest.ClientOf(t, sqstest.Fauxqs)
	s3c := sqstest.S3Client(t)
	bucket := sqstest.CreateBucket(t, s3c)
	queueURL, dlqURL := sqstest.CreateQueue(t, client, sqstest.QueueOptions{VisibilityTimeout: 2 * time.Second, MaxReceiveCount: 2})

	one := payload("big", "one", 1_000_000)
	ten := payload("big", "ten", 10_000_000)
	other := payload("other", "other", 300_000)
	failing := payload("big", "fail-1", 400_000)
	sendPointer(t, client, queueURL, bucket, "in/one", one, len(one))
	sendPointer(t, client, queueURL, bucket, "in/ten", ten, len(ten))
	sendPointer(t, client, queueURL, bucket, "in/other", other, len(other))
	sendPointer(t, client, queueURL, bucket, "in/fail", failing, len(failing))
	sendPointer(t, client, queueURL, bucket, "in/missing", nil, 500_000)

	srv := newPayloadServer(t)
	metrics := pipe.NewMetrics(nil)
	built := buildPipe(t, pipes.NewRegistry(), pipes.Env{Drain: true, Metrics: metrics, Budget: budget.New(4 << 20)}, fmt.Sprintf(`
name: large
source:
  type: sqs
  queue_url: %s
  endpoint: %s
  region: us-east-1
  wait_time: 1s
  unwrap: s3pointer
  delete_payloads: true
  s3: {endpoint: %s}
filter:
  patterns: ['{"body": {"kind": ["big"]}}']
target: {type: http, url: %s}
`, queueURL, endpoint, endpoint, srv.URL))
	runUntilDrained(t, 120*time.Second, built)

	for _, want := range []struct {
		id    string
		body  []byte
		times int
		key   string
	}{{"one", one, 1, "in/one"}, {"ten", ten, 1, "in/ten"}, {"fail-1", failing, 2, "in/fail"}} {
		recs := srv.records(want.id)
		if len(recs) != want.times {
			t.Errorf("%s reached the target %d times, want %d", want.id, len(recs), want.times)
			continue
		}
		r := recs[0]
		if r.Body != string(want.body) {
			t.Errorf("%s: the target got a body of %d bytes, want the object's %d", want.id, len(r.Body), len(want.body))
		}
		if ptr, ok := s3payload.ParsePointer(string(r.Envelope)); !ok || ptr != (s3payload.Pointer{Bucket: bucket, Key: want.key}) {
			t.Errorf("%s: envelope %s, want the pointer to s3://%s/%s", want.id, r.Envelope, bucket, want.key)
		}
		if got := r.MessageAttributes[s3payload.AttrPayloadSize].StringValue; got != strconv.Itoa(len(want.body)) {
			t.Errorf("%s: ExtendedPayloadSize %q, want %d", want.id, got, len(want.body))
		}
	}
	if recs := srv.records("other"); len(recs) > 0 {
		t.Errorf("the filtered payload reached the target %d times", len(recs))
	}
	var dead []string
	for _, m := range dlqMessages(t, client, dlqURL) {
		ptr, ok := s3payload.ParsePointer(aws.ToString(m.Body))
		if !ok {
			t.Errorf("dead-lettered body %.80q is not the pointer", aws.ToString(m.Body))
			continue
		}
		if _, ok := m.MessageAttributes[s3payload.AttrPayloadSize]; !ok {
			t.Errorf("dead-lettered %s lost ExtendedPayloadSize", ptr)
		}
		dead = append(dead, ptr.Key)
	}
	slices.Sort(dead)
	if want := []string{"in/fail", "in/missing"}; !slices.Equal(dead, want) {
		t.Errorf("dead-lettered %v, want %v", dead, want)
	}
	if keys := sqstest.Keys(t, s3c, bucket); !slices.Equal(keys, []string{"in/fail"}) {
		t.Errorf("objects left %v, want only the failed message's (delivered and filtered ones deleted after their message)", keys)
	}
	if n := testutil.ToFloat64(metrics.PayloadDeletes.WithLabelValues("large", "ok")); n != 3 {
		t.Errorf("payload deletes ok = %v, want 3", n)
	}
	if n := testutil.ToFloat64(metrics.PayloadDeletes.WithLabelValues("large", "failed")); n != 0 {
		t.Errorf("payload deletes failed = %v, want 0", n)
	}
	if n := testutil.ToFloat64(metrics.Failed.WithLabelValues("large", "runtime")); n < 2 {
		t.Errorf("failed{stage=runtime} = %v, want the missing object's two failed receives", n)
	}
}

// fauxqs only (S3). A message the target refuses with a client error goes
// to the pipe's dead-letter target (as its pointer) and is then deleted
// from the source: its object stays, for the dead-lettered pointer. With
// missing_object: dead_letter, a pointer to a missing object goes there
// at once too, at stage unwrap, after one receive.
func TestS3PointerSentToTheDeadLetterTargetKeepsItsObject(t *testing.T) {
	t.Parallel()
	fakeAWSEnv(t)
	endpoint := sqstest.EndpointOf(t, sqstest.Fauxqs)
	client := sqstest.ClientOf(t, sqstest.Fauxqs)
	s3c := sqstest.S3Client(t)
	bucket := sqstest.CreateBucket(t, s3c)
	queueURL, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{VisibilityTimeout: 5 * time.Second})
	dlqURL, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{})
	rejected := payload("big", "reject-1", 300_000)
	sendPointer(t, client, queueURL, bucket, "rejected", rejected, len(rejected))
	sendPointer(t, client, queueURL, bucket, "missing", nil, 300_000)

	srv := newPayloadServer(t)
	metrics := pipe.NewMetrics(nil)
	built := buildPipe(t, pipes.NewRegistry(), pipes.Env{Drain: true, Metrics: metrics}, fmt.Sprintf(`
name: dl
source: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1, wait_time: 1s, unwrap: s3pointer, delete_payloads: true, s3: {endpoint: %s, missing_object: dead_letter}}
target: {type: http, url: %s}
dead_letter: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1}
`, queueURL, endpoint, endpoint, srv.URL, dlqURL, endpoint))
	runUntilDrained(t, 60*time.Second, built)

	if n := len(srv.records("reject-1")); n != 1 {
		t.Fatalf("the rejected payload reached the target %d times, want 1", n)
	}
	dead := dlqMessages(t, client, dlqURL)
	stages := map[string]string{}
	for _, m := range dead {
		ptr, ok := s3payload.ParsePointer(aws.ToString(m.Body))
		if !ok {
			t.Errorf("dead-lettered body %.100q, want the pointer", aws.ToString(m.Body))
			continue
		}
		if _, ok := m.MessageAttributes[s3payload.AttrPayloadSize]; !ok {
			t.Errorf("the dead-lettered pointer to %s lost ExtendedPayloadSize", ptr)
		}
		stages[ptr.Key] = aws.ToString(m.MessageAttributes[pipe.DLQStage].StringValue)
	}
	if want := map[string]string{"rejected": "target", "missing": "unwrap"}; fmt.Sprint(stages) != fmt.Sprint(want) {
		t.Errorf("dead-lettered (key: stage) %v, want %v", stages, want)
	}
	if body, ok := sqstest.GetObject(t, s3c, bucket, "rejected"); !ok || !bytes.Equal(body, rejected) {
		t.Errorf("the dead-lettered message's object is gone (ok=%v): its pointer now points at nothing", ok)
	}
	if visible, inflight := sqstest.Count(t, client, queueURL); visible+inflight != 0 {
		t.Errorf("the source queue still holds %d+%d messages, want the dead-lettered one deleted", visible, inflight)
	}
	if n := testutil.ToFloat64(metrics.PayloadDeletes.WithLabelValues("dl", "ok")); n != 0 {
		t.Errorf("payload deletes = %v, want none", n)
	}
}

// fauxqs only (S3). Pipe A's sqs target offloads the payloads at or above
// its threshold to S3, the Extended Client way (pointer body and
// ExtendedPayloadSize); pipe B reads them back with unwrap s3pointer and
// deletes the objects after their messages.
func TestSQSTargetOffloadOnFauxqsIsReadBackByAnS3PointerSource(t *testing.T) {
	t.Parallel()
	fakeAWSEnv(t)
	endpoint := sqstest.EndpointOf(t, sqstest.Fauxqs)
	client := sqstest.ClientOf(t, sqstest.Fauxqs)
	s3c := sqstest.S3Client(t)
	bucket := sqstest.CreateBucket(t, s3c)
	inURL, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{})
	midURL, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{})
	small := payload("big", "small", 2_000)
	large := payload("big", "large", 700_000)
	sqstest.SendBodies(t, client, inURL, string(small), string(large))

	a := buildPipe(t, pipes.NewRegistry(), pipes.Env{Drain: true}, fmt.Sprintf(`
name: a
source: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1, wait_time: 1s}
target:
  type: sqs
  queue_url: %s
  endpoint: %s
  region: us-east-1
  input_template: '<$.body>'
  offload: {bucket: %s, threshold: 262144, key_prefix: offloaded/, endpoint: %s}
`, inURL, endpoint, midURL, endpoint, bucket, endpoint))
	runUntilDrained(t, 60*time.Second, a)

	keys := sqstest.Keys(t, s3c, bucket)
	if len(keys) != 1 || !strings.HasPrefix(keys[0], "offloaded/") || len(keys[0]) != len("offloaded/")+36 {
		t.Fatalf("objects %v, want one offloaded/<uuid>: only the large payload is offloaded", keys)
	}
	if body, _ := sqstest.GetObject(t, s3c, bucket, keys[0]); !bytes.Equal(body, large) {
		t.Fatalf("the offloaded object holds %d bytes, want the large payload's %d", len(body), len(large))
	}
	// A look at the messages as an Extended Client consumer sees them; they
	// are made visible again for pipe B (fauxqs counts no visibility change
	// as a receive).
	peek, err := client.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(midURL), MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range peek.Messages {
		if _, err := client.ChangeMessageVisibility(t.Context(), &sqs.ChangeMessageVisibilityInput{
			QueueUrl: aws.String(midURL), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0,
		}); err != nil {
			t.Fatal(err)
		}
	}
	pointers := 0
	for _, m := range peek.Messages {
		if aws.ToString(m.Body) == string(small) {
			continue
		}
		want := s3payload.Pointer{Bucket: bucket, Key: keys[0]}.Body()
		if aws.ToString(m.Body) != want {
			t.Errorf("offloaded message body %.200q, want %s", aws.ToString(m.Body), want)
		}
		a := m.MessageAttributes[s3payload.AttrPayloadSize]
		if aws.ToString(a.DataType) != "Number" || aws.ToString(a.StringValue) != strconv.Itoa(len(large)) {
			t.Errorf("ExtendedPayloadSize = %s %s, want Number %d", aws.ToString(a.DataType), aws.ToString(a.StringValue), len(large))
		}
		pointers++
	}
	if pointers != 1 {
		t.Errorf("%d pointer messages among %d, want 1", pointers, len(peek.Messages))
	}

	srv := newPayloadServer(t)
	b := buildPipe(t, pipes.NewRegistry(), pipes.Env{Drain: true}, fmt.Sprintf(`
name: b
source: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1, wait_time: 1s, unwrap: auto, delete_payloads: true, s3: {endpoint: %s}}
target: {type: http, url: %s}
`, midURL, endpoint, endpoint, srv.URL))
	runUntilDrained(t, 60*time.Second, b)
	for id, want := range map[string][]byte{"small": small, "large": large} {
		recs := srv.records(id)
		if len(recs) != 1 || recs[0].Body != string(want) {
			t.Errorf("%s: %d records, want 1 with the %d bytes sent", id, len(recs), len(want))
		}
	}
	if keys := sqstest.Keys(t, s3c, bucket); len(keys) != 0 {
		t.Errorf("objects %v left after pipe B deleted their messages", keys)
	}
}

// notification is an S3 event notification about keys of bucket, in the
// shape S3 sends to SQS (the S3 user guide's event message structure 2.1).
func notification(bucket string, keys ...string) string {
	var recs []string
	for _, k := range keys {
		recs = append(recs, fmt.Sprintf(`{"eventVersion":"2.1","eventSource":"aws:s3","awsRegion":"us-east-1","eventTime":"2026-12-01T10:00:00.000Z","eventName":"ObjectCreated:Put","userIdentity":{"principalId":"A1"},"requestParameters":{"sourceIPAddress":"10.0.0.1"},"responseElements":{"x-amz-request-id":"R","x-amz-id-2":"H"},"s3":{"s3SchemaVersion":"1.0","configurationId":"uploads","bucket":{"name":%q,"ownerIdentity":{"principalId":"A1"},"arn":"arn:aws:s3:::%s"},"object":{"key":%q,"size":1024,"eTag":"e","sequencer":"0A"}}}`, bucket, bucket, k))
	}
	return `{"Records":[` + strings.Join(recs, ",") + `]}`
}

// Both servers (nothing S3 is called: notifications are split, the objects
// are not fetched); a failed record brings its notification back after the
// visibility timeout, and nothing here changes a visibility. A
// notification of three objects is three records; one failing fails the
// notification, which comes back whole; S3's test event is deleted
// without reaching the target.
func TestS3EventNotificationsSplitIntoOneRecordPerObject(t *testing.T) {
	t.Parallel()
	sqstest.Servers(t, func(t *testing.T, s sqstest.Server) {
		fakeAWSEnv(t)
		endpoint := sqstest.EndpointOf(t, s)
		client := sqstest.ClientOf(t, s)
		queueURL, dlqURL := sqstest.CreateQueue(t, client, sqstest.QueueOptions{VisibilityTimeout: 2 * time.Second, MaxReceiveCount: 5})
		sqstest.SendBodies(t, client, queueURL,
			notification("uploads", "a.csv", "b+c.csv", "c.csv"),
			notification("uploads", "d.csv"),
			`{"Service":"Amazon S3","Event":"s3:TestEvent","Time":"2026-12-01T10:00:00.000Z","Bucket":"uploads","RequestId":"R","HostId":"H"}`)

		var mu sync.Mutex
		seen := map[string]int{}
		envelopes := map[string]bool{}
		failedOnce := false
		reg := pipes.NewRegistry()
		reg.MustRegisterFunc("objects", pipe.TargetFunc(func(_ context.Context, events []*pipe.Event) (pipe.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			var res pipe.Result
			for _, ev := range events {
				var rec struct {
					Body     string          `json:"body"`
					Envelope json.RawMessage `json:"envelope"`
				}
				if err := json.Unmarshal(ev.RecordJSON, &rec); err != nil {
					return pipe.Result{}, err
				}
				var entry struct {
					EventName string `json:"eventName"`
					S3        struct {
						Object struct {
							Key string `json:"key"`
						} `json:"object"`
					} `json:"s3"`
				}
				_ = json.Unmarshal([]byte(rec.Body), &entry)
				key := entry.S3.Object.Key
				if key == "" {
					key = "?" + rec.Body
				}
				seen[key]++
				envelopes[key] = strings.HasPrefix(string(rec.Envelope), `{"Records":[`)
				if key == "b+c.csv" && !failedOnce {
					failedOnce = true
					res.Failures = append(res.Failures, pipe.ItemFailure{ID: ev.ID()})
				}
			}
			return res, nil
		}))
		built := buildPipe(t, reg, pipes.Env{Drain: true}, fmt.Sprintf(`
name: events
source: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1, wait_time: 1s, unwrap: s3event}
filter:
  patterns: ['{"body": {"eventName": [{"prefix": "ObjectCreated:"}]}}']
target: {type: func, func: objects}
`, queueURL, endpoint))
		runUntilDrained(t, 60*time.Second, built)

		mu.Lock()
		defer mu.Unlock()
		want := map[string]int{"a.csv": 2, "b+c.csv": 2, "c.csv": 2, "d.csv": 1}
		for k, n := range want {
			if seen[k] != n {
				t.Errorf("record %s delivered %d times, want %d", k, seen[k], n)
			}
			if !envelopes[k] {
				t.Errorf("record %s lacks the notification as its envelope", k)
			}
		}
		if len(seen) != len(want) {
			t.Errorf("records delivered %v, want only %v (the test event is not one)", seen, want)
		}
		if visible, inflight := sqstest.Count(t, client, queueURL); visible+inflight != 0 {
			t.Errorf("the queue still holds %d+%d messages", visible, inflight)
		}
		if dead := sqstest.DrainBodies(t, client, dlqURL); len(dead) > 0 {
			t.Errorf("dead-lettered %d messages, want none", len(dead))
		}
	})
}

// No server: building makes no call. A pipe whose region comes only from
// its queue's URL or ARN builds its S3 client in that region, as its SQS
// client (no AWS_REGION, no profile).
func TestS3PayloadClientsTakeTheQueuesRegion(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	tests := []struct{ name, yaml string }{
		{"a source URL", `
source: {type: sqs, queue_url: 'https://sqs.eu-west-1.amazonaws.com/123456789012/q', unwrap: auto}
target: {type: stdout}`},
		{"a source ARN", `
source: {type: sqs, queue_arn: 'arn:aws:sqs:eu-west-1:123456789012:q', unwrap: s3pointer, delete_payloads: true}
target: {type: stdout}`},
		{"a target URL", `
source: {type: memory}
target: {type: sqs, queue_url: 'https://sqs.eu-west-1.amazonaws.com/123456789012/q', offload: {bucket: payloads}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			buildPipe(t, pipes.NewRegistry(), pipes.Env{}, "name: r"+tt.yaml+"\n")
		})
	}
}

// fauxqs only (S3). --max-inflight-bytes counts what was fetched, not the
// pointer: while the target has the message, the budget holds at least the
// object's bytes, and all is given back once it is deleted.
func TestS3PointerFetchedSizeCountsInTheInflightByteBudget(t *testing.T) {
	fakeAWSEnv(t)
	endpoint := sqstest.EndpointOf(t, sqstest.Fauxqs)
	client := sqstest.ClientOf(t, sqstest.Fauxqs)
	bucket := sqstest.CreateBucket(t, sqstest.S3Client(t))
	queueURL, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{})
	body := payload("big", "two", 2_000_000)
	sendPointer(t, client, queueURL, bucket, "two", body, len(body))

	budget := budget.New(64 << 20)
	metrics := pipe.NewMetrics(nil)
	var heldBudget int64
	var heldGauge float64
	reg := pipes.NewRegistry()
	reg.MustRegisterFunc("watch", pipe.TargetFunc(func(_ context.Context, events []*pipe.Event) (pipe.Result, error) {
		heldBudget = budget.Used()
		heldGauge = testutil.ToFloat64(metrics.InFlightBytes.WithLabelValues("budget"))
		return pipe.Result{}, nil
	}))
	built := buildPipe(t, reg, pipes.Env{Drain: true, Budget: budget, Metrics: metrics}, fmt.Sprintf(`
name: budget
source: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1, wait_time: 1s, unwrap: s3pointer, s3: {endpoint: %s}}
target: {type: func, func: watch}
`, queueURL, endpoint, endpoint))
	runUntilDrained(t, 60*time.Second, built)
	if heldBudget < int64(len(body)) || heldGauge < float64(len(body)) {
		t.Errorf("while at the target the budget held %d bytes and pipes_inflight_bytes said %v, want at least the object's %d", heldBudget, heldGauge, len(body))
	}
	if used := budget.Used(); used != 0 {
		t.Errorf("the budget holds %d bytes after the drain, want 0", used)
	}
}

// fauxqs only (S3). A payload of 10 MB, far above what SQS takes (1 MiB),
// made by a jq enrichment from a small message, goes through the sqs
// target's offload and comes back whole through a pointer source.
func TestATenMegabytePayloadGoesThroughOffloadAndBack(t *testing.T) {
	fakeAWSEnv(t)
	endpoint := sqstest.EndpointOf(t, sqstest.Fauxqs)
	client := sqstest.ClientOf(t, sqstest.Fauxqs)
	s3c := sqstest.S3Client(t)
	bucket := sqstest.CreateBucket(t, s3c)
	midURL, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{})
	preload := writeFile(t, "small.jsonl", `{"body": {"id": "ten"}}`+"\n")

	a := buildPipe(t, pipes.NewRegistry(), pipes.Env{Drain: true}, fmt.Sprintf(`
name: grow
source: {type: memory, preload: %s, wait_time: 1s}
enrichment: {type: jq, jq: '{kind: "big", id: .body.id, pad: ("x" * 10000000)}'}
target: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1, offload: {bucket: %s, endpoint: %s}}
`, preload, midURL, endpoint, bucket, endpoint))
	runUntilDrained(t, 60*time.Second, a)
	if keys := sqstest.Keys(t, s3c, bucket); len(keys) != 1 {
		t.Fatalf("objects %v, want the one offloaded payload", keys)
	}

	srv := newPayloadServer(t)
	b := buildPipe(t, pipes.NewRegistry(), pipes.Env{Drain: true}, fmt.Sprintf(`
name: back
source: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1, wait_time: 1s, unwrap: s3pointer, delete_payloads: true, s3: {endpoint: %s}}
target: {type: http, url: %s}
`, midURL, endpoint, endpoint, srv.URL))
	runUntilDrained(t, 60*time.Second, b)
	recs := srv.records("ten")
	if len(recs) != 1 {
		t.Fatalf("the payload reached the target %d times, want 1", len(recs))
	}
	var got struct {
		Kind, ID, Pad string
	}
	if err := json.Unmarshal([]byte(recs[0].Body), &got); err != nil || got.Kind != "big" || len(got.Pad) != 10_000_000 || strings.Trim(got.Pad, "x") != "" {
		t.Fatalf("the target got kind %q and %d bytes of pad (%v), want big and 10000000", got.Kind, len(got.Pad), err)
	}
	if keys := sqstest.Keys(t, s3c, bucket); len(keys) != 0 {
		t.Errorf("objects %v left after the message was deleted", keys)
	}
}
