package lambdatarget_test

// No independent Lambda server exists here, so these tests run against an
// in-process fake of Lambda's endpoint: an net/http server that speaks the
// exact wire shape of Invoke in Lambda's REST-JSON protocol (a signed
// POST /2015-03-31/functions/{name}/invocations with the payload as body
// and X-Amz-Invocation-Type; a 200 answer whose body is the function's
// answer, with X-Amz-Function-Error when the function failed, a 202 for
// Event invocations, or an error status with X-Amzn-ErrorType and a JSON
// body).

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/internal/kit/partial"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/target/lambdatarget"
)

// reply is how the fake answers an invocation.
type reply struct {
	status  int    // default 200
	errType string // X-Amzn-ErrorType for an error status
	fnError string // X-Amz-Function-Error
	body    string
}

// fake is Lambda's Invoke endpoint for one function.
type fake struct {
	t     *testing.T
	reply reply

	mu       sync.Mutex
	payloads [][]byte
	types    []string
	names    []string
}

func (f *fake) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /2015-03-31/functions/{name}/invocations", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(r.Header.Get("Authorization"), "/us-east-1/lambda/aws4_request") {
			f.t.Errorf("fake Lambda got a request not signed for lambda in us-east-1: %q", r.Header.Get("Authorization"))
		}
		f.mu.Lock()
		f.payloads = append(f.payloads, body)
		f.types = append(f.types, r.Header.Get("X-Amz-Invocation-Type"))
		f.names = append(f.names, r.PathValue("name"))
		f.mu.Unlock()
		rp := f.reply
		w.Header().Set("X-Amzn-Requestid", "req-1")
		switch {
		case rp.errType != "":
			w.Header().Set("X-Amzn-ErrorType", rp.errType)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(rp.status)
			fmt.Fprintf(w, `{"Type":"User","message":"%s from the fake"}`, rp.errType)
		case r.Header.Get("X-Amz-Invocation-Type") == "Event":
			w.WriteHeader(http.StatusAccepted)
		default:
			if rp.fnError != "" {
				w.Header().Set("X-Amz-Function-Error", rp.fnError)
			}
			w.Header().Set("X-Amz-Executed-Version", "$LATEST")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, rp.body)
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		f.t.Errorf("fake Lambda got %s %s", r.Method, r.URL.Path)
		w.WriteHeader(http.StatusNotFound)
	})
	return mux
}

type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) onCall(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[op]++
}

func (c *counter) get(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[op]
}

func start(t *testing.T, f *fake, cfg lambdatarget.Config) *lambdatarget.Target {
	t.Helper()
	f.t = t
	srv := httptest.NewServer(f.handler())
	t.Cleanup(srv.Close)
	if cfg.FunctionName == "" {
		cfg.FunctionName = "orders"
	}
	cfg.Endpoint = srv.URL
	cfg.AWSConfig = &aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDPIPESTEST", "pipes-test-secret", ""),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = 3
				o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
			})
		},
	}
	tg, err := lambdatarget.New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = tg.Close(t.Context()) })
	return tg
}

func events() []*pipe.Event {
	var evs []*pipe.Event
	for _, id := range []string{"m1", "m2", "m3"} {
		p := `{"id":"` + id + `"}`
		evs = append(evs, &pipe.Event{Message: &source.Message{MessageID: id, Body: p}, RecordJSON: []byte(p)})
	}
	return evs
}

func failedIDs(r pipe.Result) []string {
	ids := make([]string, 0, len(r.Failures))
	for _, f := range r.Failures {
		ids = append(ids, f.ID)
	}
	sort.Strings(ids)
	return ids
}

func TestTheFunctionGetsTheJSONArrayOfThePayloads(t *testing.T) {
	t.Parallel()
	f := &fake{}
	var n counter
	tg := start(t, f, lambdatarget.Config{OnCall: n.onCall})
	evs := events()
	evs = append(evs, &pipe.Event{Message: &source.Message{MessageID: "m4"}, RecordJSON: []byte("not json")})
	if res, err := tg.Deliver(t.Context(), evs); err != nil || len(res.Failures) > 0 {
		t.Fatalf("Deliver = %+v, %v; want success", res, err)
	}
	if got, want := string(f.payloads[0]), `[{"id":"m1"},{"id":"m2"},{"id":"m3"},"not json"]`; got != want {
		t.Errorf("payload = %s, want %s", got, want)
	}
	if f.types[0] != "RequestResponse" || f.names[0] != "orders" {
		t.Errorf("invocation type %q of %q, want RequestResponse of orders", f.types[0], f.names[0])
	}
	if got := n.get("Invoke"); got != 1 {
		t.Errorf("Invoke calls = %d, want 1", got)
	}
}

// TestPartialBatchAnswersFollowLambdasList covers every row of SPEC.md
// §3.2.
func TestPartialBatchAnswersFollowLambdasList(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		failed    []string
		malformed bool
	}{
		{"an empty batchItemFailures list is full success", `{"batchItemFailures":[]}`, nil, false},
		{"a null batchItemFailures is full success", `{"batchItemFailures":null}`, nil, false},
		{"an empty answer is full success", ``, nil, false},
		{"a null answer is full success", `null`, nil, false},
		{"an object without batchItemFailures is full success", `{"ok":true}`, nil, false},
		{"an array echoed back is full success", `[{"id":"m1"}]`, nil, false},
		{"named items fail and the others succeed", `{"batchItemFailures":[{"itemIdentifier":"m2"},{"itemIdentifier":"m3"}]}`, []string{"m2", "m3"}, false},
		{"an item named twice fails once", `{"batchItemFailures":[{"itemIdentifier":"m2"},{"itemIdentifier":"m2"}]}`, []string{"m2"}, false},
		{"invalid JSON fails the whole batch", `{"batchItemFailures":[`, nil, true},
		{"an empty identifier fails the whole batch", `{"batchItemFailures":[{"itemIdentifier":""}]}`, nil, true},
		{"a null identifier fails the whole batch", `{"batchItemFailures":[{"itemIdentifier":null}]}`, nil, true},
		{"a misspelt key fails the whole batch", `{"batchItemFailures":[{"itemIdentifer":"m2"}]}`, nil, true},
		{"an identifier not in the batch fails the whole batch", `{"batchItemFailures":[{"itemIdentifier":"m9"}]}`, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tg := start(t, &fake{reply: reply{body: tt.body}}, lambdatarget.Config{})
			res, err := tg.Deliver(t.Context(), events())
			if tt.malformed {
				if !errors.Is(err, partial.ErrMalformedAnswer) || core.IsPermanent(err) {
					t.Fatalf("Deliver = %+v, %v; want a retryable error wrapping ErrMalformedAnswer", res, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Deliver: %v", err)
			}
			if got := failedIDs(res); !slices.Equal(got, append([]string{}, tt.failed...)) {
				t.Errorf("failed = %v, want %v", got, tt.failed)
			}
		})
	}
}

func TestAFunctionErrorFailsTheWholeBatchWithItsMessage(t *testing.T) {
	long := strings.Repeat("é", 2000)
	tests := []struct {
		name, kind, body string
		wantCode         string
		wantIn           string
		maxLen           int
	}{
		{"an unhandled error names its type and message", "Unhandled", `{"errorType":"TypeError","errorMessage":"x is undefined","trace":[]}`, "TypeError", "TypeError: x is undefined", 0},
		{"an answer without errorMessage is quoted", "Unhandled", `Task timed out`, "FunctionError", "Task timed out", 0},
		{"a long message is cut to 1 KB", "Handled", `{"errorType":"E","errorMessage":"` + long + `"}`, "E", "ééé", 1024},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tg := start(t, &fake{reply: reply{fnError: tt.kind, body: tt.body}}, lambdatarget.Config{})
			res, err := tg.Deliver(t.Context(), events())
			var fe *lambdatarget.FunctionError
			if !errors.As(err, &fe) || core.IsPermanent(err) || core.IsThrottled(err) {
				t.Fatalf("Deliver = %+v, %v; want a retryable *FunctionError", res, err)
			}
			if fe.Kind != tt.kind || fe.ErrorCode() != tt.wantCode || !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("error = %v (kind %q code %q), want kind %q code %q containing %q", err, fe.Kind, fe.ErrorCode(), tt.kind, tt.wantCode, tt.wantIn)
			}
			if tt.maxLen > 0 && len(fe.Message) > tt.maxLen {
				t.Errorf("message is %d bytes, want at most %d", len(fe.Message), tt.maxLen)
			}
		})
	}
}

func TestCallFailuresAreClassified(t *testing.T) {
	tests := []struct {
		name              string
		status            int
		errType           string
		permanent, thrott bool
		attempts          int
	}{
		{"throttling is throttled after the SDK's retries", http.StatusTooManyRequests, "TooManyRequestsException", false, true, 3},
		{"a missing function is permanent", http.StatusNotFound, "ResourceNotFoundException", true, false, 1},
		{"access denied is permanent", http.StatusForbidden, "AccessDeniedException", true, false, 1},
		{"invalid request content is permanent", http.StatusBadRequest, "InvalidRequestContentException", true, false, 1},
		{"a request too large is permanent", http.StatusRequestEntityTooLarge, "RequestTooLargeException", true, false, 1},
		{"a function being updated is retryable", http.StatusConflict, "ResourceConflictException", false, false, 1},
		{"a service error is retryable after the SDK's retries", http.StatusInternalServerError, "ServiceException", false, false, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var n counter
			tg := start(t, &fake{reply: reply{status: tt.status, errType: tt.errType}}, lambdatarget.Config{OnCall: n.onCall})
			res, err := tg.Deliver(t.Context(), events())
			if err == nil {
				t.Fatalf("Deliver = %+v, nil; want an error", res)
			}
			if core.IsPermanent(err) != tt.permanent || core.IsThrottled(err) != tt.thrott {
				t.Errorf("error %v: permanent %t throttled %t, want %t %t", err, core.IsPermanent(err), core.IsThrottled(err), tt.permanent, tt.thrott)
			}
			if !strings.Contains(err.Error(), tt.errType) {
				t.Errorf("error %v does not name %s", err, tt.errType)
			}
			if got := n.get("Invoke"); got != tt.attempts {
				t.Errorf("OnCall counted %d attempts, want %d", got, tt.attempts)
			}
		})
	}
}

func TestAnEventInvocationIsFireAndForget(t *testing.T) {
	t.Parallel()
	f := &fake{reply: reply{body: `{"batchItemFailures":[{"itemIdentifier":"m1"}]}`}}
	tg := start(t, f, lambdatarget.Config{InvocationType: lambdatarget.Event, FunctionName: "arn:aws:lambda:us-east-1:123456789012:function:orders:live"})
	res, err := tg.Deliver(t.Context(), events())
	if err != nil || len(res.Failures) > 0 {
		t.Fatalf("Deliver = %+v, %v; want success", res, err)
	}
	if f.types[0] != "Event" {
		t.Errorf("invocation type = %q, want Event", f.types[0])
	}
	if f.names[0] != "arn:aws:lambda:us-east-1:123456789012:function:orders:live" {
		t.Errorf("function = %q", f.names[0])
	}
	var arr []json.RawMessage
	if err := json.Unmarshal(f.payloads[0], &arr); err != nil || len(arr) != 3 {
		t.Errorf("payload = %s, want an array of 3", f.payloads[0])
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  lambdatarget.Config
		want string
	}{
		{"a missing function is rejected", lambdatarget.Config{}, "function name is required"},
		{"an unknown invocation type is rejected", lambdatarget.Config{FunctionName: "f", InvocationType: "DryRun"}, `invocation type "DryRun"`},
		{"a negative timeout is rejected", lambdatarget.Config{FunctionName: "f", Timeout: -time.Second}, "timeout -1s is negative"},
		{"no region is rejected", lambdatarget.Config{FunctionName: "f", AWSConfig: &aws.Config{}}, "no AWS region"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.cfg.AWSConfig == nil {
				tt.cfg.AWSConfig = &aws.Config{Region: "us-east-1"}
			}
			_, err := lambdatarget.New(t.Context(), tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestTheRegionComesFromAFunctionARN(t *testing.T) {
	if _, err := lambdatarget.New(t.Context(), lambdatarget.Config{FunctionName: "arn:aws:lambda:eu-west-1:123456789012:function:f", AWSConfig: &aws.Config{}}); err != nil {
		t.Errorf("New: %v", err)
	}
}

func BenchmarkDeliverTenEvents(b *testing.B) {
	f := &fake{reply: reply{body: `{"batchItemFailures":[]}`}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, f.reply.body)
	}))
	defer srv.Close()
	tg, err := lambdatarget.New(b.Context(), lambdatarget.Config{FunctionName: "f", Endpoint: srv.URL, AWSConfig: &aws.Config{
		Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDPIPESTEST", "pipes-test-secret", ""),
	}})
	if err != nil {
		b.Fatal(err)
	}
	var evs []*pipe.Event
	for i := range 10 {
		p := fmt.Sprintf(`{"id":%d,"note":"%s"}`, i, strings.Repeat("x", 500))
		evs = append(evs, &pipe.Event{Message: &source.Message{MessageID: fmt.Sprint(i)}, RecordJSON: []byte(p)})
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tg.Deliver(b.Context(), evs); err != nil {
			b.Fatal(err)
		}
	}
}
