package stepfunctions_test

// No independent Step Functions server exists on the package registries
// (npm has none for its wire protocol), so these tests run against
// internal/fakeaws.SFN: an in-process net/http server that decodes the
// awsJson1_0 requests the SDK sends (X-Amz-Target
// AWSStepFunctions.StartExecution / StartSyncExecution, a SigV4
// signature for "states") and checks their fields and limits against the
// API reference (a known state machine, input valid JSON of at most 256
// KiB, StartSyncExecution only for EXPRESS workflows).

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/internal/fakeaws"
	"github.com/pipesproject/pipes/internal/kit/partial"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/target/stepfunctions"
)

const (
	expressARN  = "arn:aws:states:us-east-1:123456789012:stateMachine:express"
	standardARN = "arn:aws:states:us-east-1:123456789012:stateMachine:standard"
)

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

// testAWSConfig is a config with static credentials and SDK retries
// without delay.
func testAWSConfig(attempts int) *aws.Config {
	return &aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDPIPESTEST", "pipes-test-secret", ""),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = attempts
				o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
				o.RateLimiter = ratelimit.None
			})
		},
	}
}

func start(t *testing.T, srv *fakeaws.SFN, cfg stepfunctions.Config) *stepfunctions.Target {
	t.Helper()
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	cfg.Endpoint = hs.URL
	if cfg.AWSConfig == nil {
		cfg.AWSConfig = testAWSConfig(3)
	}
	tg, err := stepfunctions.New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = tg.Close(t.Context()) })
	return tg
}

func events(ids ...string) []*pipe.Event {
	var evs []*pipe.Event
	for _, id := range ids {
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

func TestDeliveringStartsOneExecutionWithTheBatchAsAJSONArray(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, arn, invocation, op string
		sync                      bool
	}{
		{"fire and forget on a standard workflow starts it", standardARN, stepfunctions.FireAndForget, "StartExecution", false},
		{"fire and forget on an express workflow starts it", expressARN, stepfunctions.FireAndForget, "StartExecution", false},
		{"request response runs an express workflow synchronously", expressARN, stepfunctions.RequestResponse, "StartSyncExecution", true},
		{"the default invocation type is request response, as in Pipes", expressARN, "", "StartSyncExecution", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := fakeaws.NewSFN(map[string]fakeaws.Machine{expressARN: {Express: true}, standardARN: {}})
			var n counter
			tg := start(t, srv, stepfunctions.Config{StateMachineARN: tc.arn, InvocationType: tc.invocation, OnCall: n.onCall})
			res, err := tg.Deliver(t.Context(), events("m1", "m2", "m3"))
			if err != nil || len(res.Failures) > 0 {
				t.Fatalf("Deliver = %v, %v", res, err)
			}
			ex := srv.Executions()
			if len(ex) != 1 || ex[0].Sync != tc.sync || ex[0].StateMachineARN != tc.arn {
				t.Fatalf("executions = %+v", ex)
			}
			if got, want := string(ex[0].Input), `[{"id":"m1"},{"id":"m2"},{"id":"m3"}]`; got != want {
				t.Errorf("input = %s, want %s", got, want)
			}
			if n.get(tc.op) != 1 || srv.Calls(tc.op) != 1 {
				t.Errorf("OnCall(%s) = %d, server got %d, want 1", tc.op, n.get(tc.op), srv.Calls(tc.op))
			}
		})
	}
}

func TestASyncExecutionsOutputDecidesTheItems(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		run       func([]byte) ([]byte, string, string)
		failed    []string
		batchErr  bool
		permanent bool
		malformed bool
		code      string
	}{
		{name: "an output that is not a partial batch answer succeeds the batch",
			run: func([]byte) ([]byte, string, string) { return []byte(`{"ok":true}`), "", "" }},
		{name: "a partial batch answer fails the items it names",
			run: func([]byte) ([]byte, string, string) {
				return []byte(`{"batchItemFailures":[{"itemIdentifier":"m2"}]}`), "", ""
			}, failed: []string{"m2"}},
		{name: "a failed execution fails the whole batch, retryably",
			run:      func([]byte) ([]byte, string, string) { return nil, "States.TaskFailed", "the order service said no" },
			batchErr: true, code: "States.TaskFailed"},
		{name: "a malformed partial batch answer fails the whole batch",
			run: func([]byte) ([]byte, string, string) {
				return []byte(`{"batchItemFailures":[{"id":"m2"}]}`), "", ""
			}, batchErr: true, malformed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := fakeaws.NewSFN(map[string]fakeaws.Machine{expressARN: {Express: true, Run: tc.run}})
			tg := start(t, srv, stepfunctions.Config{StateMachineARN: expressARN})
			res, err := tg.Deliver(t.Context(), events("m1", "m2", "m3"))
			if (err != nil) != tc.batchErr {
				t.Fatalf("Deliver error = %v, want one: %v", err, tc.batchErr)
			}
			if err != nil {
				if core.IsPermanent(err) != tc.permanent {
					t.Errorf("permanent = %v, want %v: %v", core.IsPermanent(err), tc.permanent, err)
				}
				if errors.Is(err, partial.ErrMalformedAnswer) != tc.malformed {
					t.Errorf("malformed = %v, want %v: %v", !tc.malformed, tc.malformed, err)
				}
				var ee *stepfunctions.ExecutionError
				if tc.code != "" && (!errors.As(err, &ee) || ee.ErrorCode() != tc.code || ee.Status != "FAILED") {
					t.Errorf("error %v is not an ExecutionError with code %s", err, tc.code)
				}
				return
			}
			if got := failedIDs(res); !slices.Equal(got, tc.failed) {
				t.Errorf("failed = %v, want %v", got, tc.failed)
			}
		})
	}
}

func TestFailedCallsAreClassified(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                 string
		arn, invocation      string
		throttle, limit      int
		attempts             int
		throttled, permanent bool
	}{
		{name: "ThrottlingException is throttling", arn: expressARN, throttle: 5, attempts: 2, throttled: true},
		{name: "ExecutionLimitExceeded is throttling", arn: standardARN, invocation: stepfunctions.FireAndForget, limit: 5, attempts: 1, throttled: true},
		{name: "a throttled call that the SDK retries succeeds", arn: expressARN, throttle: 1, attempts: 3},
		{name: "a state machine that does not exist is permanent", arn: "arn:aws:states:us-east-1:123456789012:stateMachine:gone", attempts: 1, permanent: true},
		{name: "a synchronous start of a standard workflow is permanent", arn: standardARN, invocation: stepfunctions.RequestResponse, attempts: 1, permanent: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := fakeaws.NewSFN(map[string]fakeaws.Machine{expressARN: {Express: true}, standardARN: {}})
			srv.Throttle(tc.throttle, tc.limit)
			tg := start(t, srv, stepfunctions.Config{StateMachineARN: tc.arn, InvocationType: tc.invocation, AWSConfig: testAWSConfig(tc.attempts)})
			_, err := tg.Deliver(t.Context(), events("m1"))
			if !tc.throttled && !tc.permanent {
				if err != nil {
					t.Fatalf("Deliver: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Deliver succeeded")
			}
			if core.IsThrottled(err) != tc.throttled || core.IsPermanent(err) != tc.permanent {
				t.Errorf("throttled %v permanent %v, want %v %v: %v", core.IsThrottled(err), core.IsPermanent(err), tc.throttled, tc.permanent, err)
			}
			if strings.Contains(err.Error(), "pipes-test-secret") {
				t.Errorf("the error shows the secret key: %v", err)
			}
		})
	}
}

func TestAnInputOverStepFunctionsLimitFailsPermanentlyWithoutACall(t *testing.T) {
	t.Parallel()
	srv := fakeaws.NewSFN(map[string]fakeaws.Machine{expressARN: {Express: true}})
	tg := start(t, srv, stepfunctions.Config{StateMachineARN: expressARN})
	big := strings.Repeat("x", stepfunctions.MaxInput)
	p, _ := json.Marshal(map[string]string{"big": big})
	ev := &pipe.Event{Message: &source.Message{MessageID: "m1", Body: string(p)}, RecordJSON: p}
	_, err := tg.Deliver(t.Context(), []*pipe.Event{ev})
	if err == nil || !core.IsPermanent(err) || !strings.Contains(err.Error(), "262144") {
		t.Fatalf("Deliver = %v, want a permanent error naming the limit", err)
	}
	if srv.Calls("StartSyncExecution") != 0 {
		t.Errorf("the server got %d calls", srv.Calls("StartSyncExecution"))
	}
}

func TestNewRefusesWhatStepFunctionsWould(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  stepfunctions.Config
		want string
	}{
		{"no state machine", stepfunctions.Config{}, "state machine arn is required"},
		{"not a state machine ARN", stepfunctions.Config{StateMachineARN: "arn:aws:lambda:us-east-1:123456789012:function:f"}, "is not a state machine ARN"},
		{"an unknown invocation type", stepfunctions.Config{StateMachineARN: expressARN, InvocationType: "Event"}, `invocation type "Event" is not REQUEST_RESPONSE or FIRE_AND_FORGET`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.cfg.AWSConfig = testAWSConfig(1)
			_, err := stepfunctions.New(t.Context(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v, want %q", err, tc.want)
			}
		})
	}
}

func BenchmarkBatchInput(b *testing.B) {
	srv := fakeaws.NewSFN(map[string]fakeaws.Machine{expressARN: {Express: true, Run: func([]byte) ([]byte, string, string) { return []byte(`{}`), "", "" }}})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	tg, err := stepfunctions.New(b.Context(), stepfunctions.Config{StateMachineARN: expressARN, Endpoint: hs.URL, AWSConfig: testAWSConfig(1)})
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, 10)
	for i := range ids {
		ids[i] = "m" + string(rune('0'+i))
	}
	evs := events(ids...)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tg.Deliver(b.Context(), evs); err != nil {
			b.Fatal(err)
		}
	}
}
