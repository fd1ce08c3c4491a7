package sqs

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/pipesproject/pipes/internal/core"
)

// Differential tests of direct: the same calls through the direct path
// and through the SDK client alone, against a server whose answers the
// test sets, give the same result (the same output, or errors of the same
// class and text), and direct's requests are the SDK's (the same body and
// protocol headers) with a valid signature.

// answerServer answers every request with the answer set last and keeps
// the requests it got.
type answerServer struct {
	*httptest.Server
	mu      sync.Mutex
	status  int
	headers map[string]string
	body    string
	got     []recorded
}

type recorded struct {
	header http.Header
	body   string
	host   string
}

func startAnswerServer(t testing.TB) *answerServer {
	s := &answerServer{status: 200}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.got = append(s.got, recorded{header: r.Header.Clone(), body: string(b), host: r.Host})
		status, headers, body := s.status, s.headers, s.body
		s.mu.Unlock()
		for k, v := range headers {
			w.Header().Set(k, v)
		}
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *answerServer) set(status int, headers map[string]string, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.headers, s.body, s.got = status, headers, body, nil
}

func (s *answerServer) requests() []recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]recorded(nil), s.got...)
}

// directPair is an SQS client with the direct path and the SDK client it
// falls back to.
func directPair(t testing.TB, endpoint string) (directAPI, sqsAPI) {
	t.Helper()
	cfg := testAWSConfig()
	cfg.RetryMaxAttempts = 1 // one attempt each: the comparison is of answers, not of waits
	src, err := New(context.Background(), Config{QueueURL: endpoint + "/123456789012/q", Endpoint: endpoint, AWSConfig: cfg})
	if err != nil {
		t.Fatal(err)
	}
	d, ok := src.api.(directAPI)
	if !ok {
		t.Fatalf("the source's client is a %T, not the direct one", src.api)
	}
	return d, d.sqsAPI
}

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func receiveInput(url string) *sqs.ReceiveMessageInput {
	return &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 30,
		AttributeNames:              []types.QueueAttributeName{types.QueueAttributeNameAll},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	}
}

func deleteInput(url string) *sqs.DeleteMessageBatchInput {
	return &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: []types.DeleteMessageBatchRequestEntry{
		{Id: aws.String("0"), ReceiptHandle: aws.String("rh-0 \"quoted\" \u00e9")}, {Id: aws.String("1"), ReceiptHandle: aws.String("rh-1")}}}
}

// outcome is what a caller of the client sees: the output (without the
// SDK's result metadata) or the error's class and text.
type outcome struct {
	out                   any
	err                   string
	permanent, throttled  bool
	failed, contextFailed bool
}

func outcomeOf(out any, err error) outcome {
	if err != nil {
		c := classify(err)
		return outcome{err: err.Error(), permanent: core.IsPermanent(c), throttled: core.IsThrottled(c), failed: true}
	}
	switch o := out.(type) {
	case *sqs.ReceiveMessageOutput:
		return outcome{out: o.Messages}
	case *sqs.DeleteMessageBatchOutput:
		return outcome{out: [2]any{o.Successful, o.Failed}}
	}
	return outcome{out: out}
}

// compareDirect makes the call both ways on the answer set and compares.
func compareDirect(t testing.TB, srv *answerServer, d directAPI, sdk sqsAPI, op string) (direct, theirs outcome) {
	t.Helper()
	ctx := context.Background()
	url := srv.URL + "/123456789012/q"
	call := func(api sqsAPI) outcome {
		if op == "receive" {
			out, err := api.ReceiveMessage(ctx, receiveInput(url))
			return outcomeOf(out, err)
		}
		out, err := api.DeleteMessageBatch(ctx, deleteInput(url))
		return outcomeOf(out, err)
	}
	srv.mu.Lock()
	srv.got = nil
	srv.mu.Unlock()
	direct = call(d)
	reqs := srv.requests()
	theirs = call(sdk)
	sdkReqs := srv.requests()[len(reqs):]
	if !reflect.DeepEqual(direct, theirs) {
		t.Fatalf("%s: direct and the SDK differ:\ndirect  %+v\nthe SDK %+v", op, direct, theirs)
	}
	if len(reqs) == 0 || len(sdkReqs) != 1 {
		t.Fatalf("%s: %d requests by direct, %d by the SDK", op, len(reqs), len(sdkReqs))
	}
	checkDirectRequest(t, reqs[0], sdkReqs[0])
	return direct, theirs
}

// checkDirectRequest checks that direct's request has the SDK's body and
// protocol headers, and a signature the SDK's signer makes for it.
func checkDirectRequest(t testing.TB, mine, sdk recorded) {
	t.Helper()
	if mine.body != sdk.body {
		t.Fatalf("bodies differ:\ndirect  %s\nthe SDK %s", mine.body, sdk.body)
	}
	for _, k := range []string{"Content-Type", "X-Amz-Target", "X-Amzn-Query-Mode", "Content-Length"} {
		if mine.header.Get(k) != sdk.header.Get(k) {
			t.Fatalf("%s: direct %q, the SDK %q", k, mine.header.Get(k), sdk.header.Get(k))
		}
	}
	at, err := time.Parse("20060102T150405Z", mine.header.Get("X-Amz-Date"))
	if err != nil {
		t.Fatalf("direct's X-Amz-Date: %v", err)
	}
	r, _ := http.NewRequest(http.MethodPost, "http://"+mine.host+"/", strings.NewReader(mine.body))
	for k, v := range mine.header {
		if k != "Authorization" && k != "Accept-Encoding" {
			r.Header[k] = v
		}
	}
	sum := sha256hex(mine.body)
	creds, _ := testAWSConfig().Credentials.Retrieve(context.Background())
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, r, sum, "sqs", "us-east-1", at); err != nil {
		t.Fatal(err)
	}
	if got, want := mine.header.Get("Authorization"), r.Header.Get("Authorization"); got != want {
		t.Fatalf("direct's signature is not the SDK's for the request the server got:\ndirect  %s\nthe SDK %s", got, want)
	}
}

func TestDirectGivesWhatTheSDKGives(t *testing.T) {
	srv := startAnswerServer(t)
	d, sdk := directPair(t, srv.URL)
	ten, err := os.ReadFile("testdata/receive10.json")
	if err != nil {
		t.Fatal(err)
	}
	body := "hello \u00e9 \"quoted\" \\ \n"
	withAttrs := fmt.Sprintf(`{"Messages":[{"MessageId":"m1","ReceiptHandle":"rh1","Body":%q,"MD5OfBody":%q,`+
		`"MD5OfMessageAttributes":"abc","Attributes":{"SentTimestamp":"1","ApproximateReceiveCount":"2","AWSTraceHeader":"Root=1"},`+
		`"MessageAttributes":{"s":{"DataType":"String","StringValue":"v"},"b":{"DataType":"Binary","BinaryValue":"AAEC"},`+
		`"n":{"DataType":"Number.int","StringValue":"12"},"l":{"DataType":"String","StringListValues":["a","b"],"BinaryListValues":["AA=="]}},`+
		`"Unknown":{"x":[1,2,{"y":null}]}}]}`, body, md5hex(body))
	badSum := fmt.Sprintf(`{"Messages":[{"MessageId":"m1","ReceiptHandle":"rh1","Body":"a","MD5OfBody":%q},{"MessageId":"m2","ReceiptHandle":"rh2","Body":"b","MD5OfBody":"00"}]}`, md5hex("a"))
	queryErr := map[string]string{"x-amzn-query-error": "AWS.SimpleQueueService.NonExistentQueue;Sender"}
	for _, c := range []struct {
		name    string
		status  int
		headers map[string]string
		body    string
		fails   bool
	}{
		{"ten messages", 200, nil, string(ten), false},
		{"every kind of attribute, unknown fields", 200, nil, withAttrs, false},
		{"no messages", 200, nil, `{}`, false},
		{"an empty list", 200, nil, `{"Messages":[]}`, false},
		{"null messages", 200, nil, `{"Messages":null}`, false},
		{"an empty body", 200, nil, ``, false},
		{"a wrong MD5", 200, nil, badSum, true},
		{"a body that is not JSON", 200, nil, `<html>proxy</html>`, true},
		{"a truncated body", 200, nil, string(ten[:len(ten)/2]), true},
		{"a wrong type", 200, nil, `{"Messages":[{"Body":12}]}`, true},
		{"no such queue", 400, queryErr, `{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"The specified queue does not exist."}`, true},
		{"throttled", 400, nil, `{"__type":"com.amazonaws.sqs#RequestThrottled","message":"slow down"}`, true},
		{"access denied", 403, nil, `{"__type":"AccessDeniedException","message":"no"}`, true},
		{"server error", 500, nil, `{"__type":"InternalError","message":"oops"}`, true},
		{"an error that is not JSON", 502, map[string]string{"Content-Type": "text/html"}, `<html>bad gateway</html>`, true},
		{"a 204", 204, nil, ``, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv.set(c.status, c.headers, c.body)
			got, _ := compareDirect(t, srv, d, sdk, "receive")
			if got.failed != c.fails {
				t.Fatalf("failed %v, want %v: %+v", got.failed, c.fails, got)
			}
		})
	}
	for _, c := range []struct {
		name, body string
		status     int
	}{
		{"both deleted", `{"Successful":[{"Id":"0"},{"Id":"1"}]}`, 200},
		{"one failed", `{"Successful":[{"Id":"0"}],"Failed":[{"Id":"1","Code":"ReceiptHandleIsInvalid","Message":"bad","SenderFault":true}]}`, 200},
		{"not JSON", `nope`, 200},
		{"throttled", `{"__type":"com.amazonaws.sqs#RequestThrottled","message":"slow down"}`, 400},
		{"server error", `{}`, 503},
	} {
		t.Run("delete: "+c.name, func(t *testing.T) {
			srv.set(c.status, nil, c.body)
			compareDirect(t, srv, d, sdk, "delete")
		})
	}
}

func TestDirectIsNotUsedForClientsPipesDoesNotBuild(t *testing.T) {
	srv := startAnswerServer(t)
	t.Setenv("PIPES_HTTP_TRANSPORT", "net/http")
	src, err := New(context.Background(), Config{QueueURL: srv.URL + "/1/q", Endpoint: srv.URL, AWSConfig: testAWSConfig()})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := src.api.(directAPI); ok {
		t.Fatal("direct is used without internal/h1")
	}
}

func TestDirectGivesTheContextErrorWhenCancelled(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block }))
	defer srv.Close()
	defer close(block)
	d, _ := directPair(t, srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := d.ReceiveMessage(ctx, receiveInput(srv.URL+"/123456789012/q"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's", err)
	}
}

// FuzzDirect compares direct with the SDK client on generated answers
// (status and body) to ReceiveMessage and DeleteMessageBatch.
func FuzzDirect(f *testing.F) {
	ten, err := os.ReadFile("testdata/receive10.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint16(200), string(ten), true)
	f.Add(uint16(200), `{"Messages":[{"Body":"a","MD5OfBody":"0cc175b9c0f1b6a831c399e269772661","MessageAttributes":{"k":{"DataType":"Binary","BinaryValue":"AA=="}}}]}`, true)
	f.Add(uint16(400), `{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"x"}`, true)
	f.Add(uint16(200), `{"Successful":[{"Id":"0"}],"Failed":[{"Id":"1","Code":"X","SenderFault":true}]}`, false)
	f.Add(uint16(500), `oops`, false)
	srv := startAnswerServer(f)
	d, sdk := directPair(f, srv.URL)
	f.Fuzz(func(t *testing.T, status uint16, body string, receive bool) {
		st := int(status%500) + 100
		if st < 200 || st == 204 || st == 304 || (st >= 300 && st < 400) {
			st = 200 // no 1xx or redirects: the servers' own rules, not the client's
		}
		srv.set(st, nil, body)
		op := "delete"
		if receive {
			op = "receive"
		}
		compareDirect(t, srv, d, sdk, op)
	})
}

func sha256hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
