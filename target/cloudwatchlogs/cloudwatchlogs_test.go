package cloudwatchlogs_test

// No independent CloudWatch Logs server exists on the package registries
// (npm has none for its wire protocol), so these tests run against
// internal/fakeaws.Logs: an in-process net/http server that decodes the
// awsJson1_1 requests the SDK sends (X-Amz-Target
// Logs_20140328.PutLogEvents / CreateLogStream, a SigV4 signature for
// "logs") and checks PutLogEvents against the API reference: 1 to 10,000
// events, at most 1,048,576 bytes with 26 bytes per event, timestamps in
// order spanning at most 24 hours, the group and the stream existing, and
// rejectedLogEventsInfo for events too old, too new or expired.

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
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
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/target/cloudwatchlogs"
)

const group = "/pipes/orders"

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

func start(t testing.TB, srv *fakeaws.Logs, cfg cloudwatchlogs.Config) *cloudwatchlogs.Target {
	t.Helper()
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	cfg.Endpoint = hs.URL
	if cfg.LogGroup == "" {
		cfg.LogGroup = group
	}
	if cfg.LogStream == "" {
		cfg.LogStream = "orders"
	}
	if cfg.AWSConfig == nil {
		cfg.AWSConfig = testAWSConfig(3)
	}
	tg, err := cloudwatchlogs.New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = tg.Close(t.Context()) })
	return tg
}

// event is the event of an SQS message whose body is a JSON object with
// id, and time when ms is not 0: its payload is the SQS record.
func event(id string, ms int64, extra string) *pipe.Event {
	p := `{"id":"` + id + `"`
	if ms != 0 {
		p += `,"time":` + strconv.FormatInt(ms, 10)
	}
	p += extra + `}`
	ev, err := pipe.NewEvent(&source.Message{MessageID: id, Body: p})
	if err != nil {
		panic(err)
	}
	return ev
}

func failedIDs(r pipe.Result) []string {
	ids := make([]string, 0, len(r.Failures))
	for _, f := range r.Failures {
		ids = append(ids, f.ID)
	}
	sort.Strings(ids)
	return ids
}

func TestEventsAreWrittenToTheStreamCreatedWhenMissing(t *testing.T) {
	t.Parallel()
	srv := fakeaws.NewLogs(group)
	var n counter
	clock := time.UnixMilli(1_750_000_000_000)
	tg := start(t, srv, cloudwatchlogs.Config{OnCall: n.onCall, Now: func() time.Time { return clock }, AWSConfig: testAWSConfig(1)})
	srvNow(srv, clock)
	for round := range 2 {
		res, err := tg.Deliver(t.Context(), []*pipe.Event{event("m1", 0, ""), event("m2", 0, "")})
		if err != nil || len(res.Failures) > 0 {
			t.Fatalf("round %d: Deliver = %v, %v", round, res, err)
		}
	}
	got := srv.Events(group, "orders")
	if len(got) != 4 || !strings.Contains(got[0].Message, `"messageId":"m1"`) || got[0].Timestamp != clock.UnixMilli() {
		t.Fatalf("events = %+v", got)
	}
	// The first PutLogEvents found no stream: CreateLogStream, then again.
	if n.get("CreateLogStream") != 1 || n.get("PutLogEvents") != 3 {
		t.Errorf("calls: CreateLogStream %d, PutLogEvents %d, want 1 and 3", n.get("CreateLogStream"), n.get("PutLogEvents"))
	}
}

// srvNow sets the server's clock to the test's.
func srvNow(srv *fakeaws.Logs, now time.Time) { srv.SetNow(func() time.Time { return now }) }

func TestTheTimestampAndTheStreamAreRenderedPerEvent(t *testing.T) {
	t.Parallel()
	srv := fakeaws.NewLogs(group)
	base := time.Now().Add(-time.Hour).UnixMilli()
	tg := start(t, srv, cloudwatchlogs.Config{LogStream: "orders-<$.body.kind>", Timestamp: "$.body.time"})
	evs := []*pipe.Event{
		event("m1", base+3000, `,"kind":"a"`),
		event("m2", base+1000, `,"kind":"b"`),
		event("m3", base+2000, `,"kind":"a"`),
		event("m4", base+1000, `,"kind":"a"`),
	}
	res, err := tg.Deliver(t.Context(), evs)
	if err != nil || len(res.Failures) > 0 {
		t.Fatalf("Deliver = %v, %v", res, err)
	}
	var order []int64
	for _, e := range srv.Events(group, "orders-a") {
		order = append(order, e.Timestamp-base)
	}
	if !slices.Equal(order, []int64{1000, 2000, 3000}) {
		t.Errorf("orders-a timestamps = %v, want in order 1000 2000 3000", order)
	}
	if got := srv.Events(group, "orders-b"); len(got) != 1 {
		t.Errorf("orders-b = %+v", got)
	}
}

func TestCallsAreCutAsTheAPIAllows(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range []struct {
		name  string
		evs   func() []*pipe.Event
		calls int
	}{
		{"more than 1,048,576 bytes with the 26 bytes per event make two calls", func() []*pipe.Event {
			pad := `,"pad":"` + strings.Repeat("x", 100_000) + `"`
			evs := make([]*pipe.Event, 11)
			for i := range evs {
				evs[i] = event("m"+strconv.Itoa(i), now.UnixMilli(), pad)
			}
			return evs
		}, 2},
		{"events spanning more than 24 hours make two calls", func() []*pipe.Event {
			return []*pipe.Event{
				event("m1", now.Add(-25*time.Hour).UnixMilli(), ""),
				event("m2", now.Add(-time.Hour).UnixMilli(), ""),
				event("m3", now.UnixMilli(), ""),
			}
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := fakeaws.NewLogs(group)
			tg := start(t, srv, cloudwatchlogs.Config{Timestamp: "$.body.time"})
			evs := tc.evs()
			res, err := tg.Deliver(t.Context(), evs)
			if err != nil || len(res.Failures) > 0 {
				t.Fatalf("Deliver = %v, %v", len(res.Failures), err)
			}
			// One more call found the stream missing.
			if got := srv.Calls("PutLogEvents") - srv.Calls("CreateLogStream"); got != tc.calls {
				t.Errorf("PutLogEvents calls (beyond the first) = %d, want %d", got, tc.calls)
			}
			if got := len(srv.Events(group, "orders")); got != len(evs) {
				t.Errorf("stored %d events, want %d", got, len(evs))
			}
		})
	}
}

func TestRejectedEventsFailAlone(t *testing.T) {
	t.Parallel()
	srv := fakeaws.NewLogs(group)
	now := time.Now()
	srv.Cutoff = now.Add(-48 * time.Hour)
	tg := start(t, srv, cloudwatchlogs.Config{Timestamp: "$.body.time"})
	evs := []*pipe.Event{
		event("old", now.Add(-15*24*time.Hour).UnixMilli(), ""),
		event("expired", now.Add(-72*time.Hour).UnixMilli(), ""),
		event("ok", now.UnixMilli(), ""),
		event("new", now.Add(3*time.Hour).UnixMilli(), ""),
		event("notanumber", 0, `,"time":"soon"`),
		{Message: &source.Message{MessageID: "empty"}, RecordJSON: []byte{}},
	}
	res, err := tg.Deliver(t.Context(), evs)
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if got, want := failedIDs(res), []string{"empty", "expired", "new", "notanumber", "old"}; !slices.Equal(got, want) {
		t.Fatalf("failed = %v, want %v", got, want)
	}
	codes := map[string]string{}
	for _, f := range res.Failures {
		if !core.IsPermanent(f.Err) {
			t.Errorf("%s: %v is not permanent", f.ID, f.Err)
		}
		var re *cloudwatchlogs.RejectedError
		if errors.As(f.Err, &re) {
			codes[f.ID] = re.ErrorCode()
		}
	}
	if want := map[string]string{"old": "LogEventTooOld", "expired": "LogEventExpired", "new": "LogEventTooNew"}; fmt.Sprint(codes) != fmt.Sprint(want) {
		t.Errorf("codes = %v, want %v", codes, want)
	}
	if got := srv.Events(group, "orders"); len(got) != 1 || !strings.Contains(got[0].Message, `"messageId":"ok"`) {
		t.Errorf("stored %+v", got)
	}
}

func TestFailedCallsAreClassified(t *testing.T) {
	t.Parallel()
	t.Run("throttling the SDK does not get past is throttling", func(t *testing.T) {
		t.Parallel()
		srv := fakeaws.NewLogs(group)
		srv.Throttle(10)
		tg := start(t, srv, cloudwatchlogs.Config{AWSConfig: testAWSConfig(2)})
		_, err := tg.Deliver(t.Context(), []*pipe.Event{event("m1", 0, "")})
		if !core.IsThrottled(err) {
			t.Fatalf("Deliver = %v, want throttled", err)
		}
	})
	t.Run("a log group that does not exist is permanent", func(t *testing.T) {
		t.Parallel()
		srv := fakeaws.NewLogs()
		tg := start(t, srv, cloudwatchlogs.Config{AWSConfig: testAWSConfig(1)})
		_, err := tg.Deliver(t.Context(), []*pipe.Event{event("m1", 0, "")})
		if !core.IsPermanent(err) || core.IsThrottled(err) || strings.Contains(err.Error(), "pipes-test-secret") {
			t.Fatalf("Deliver = %v, want permanent", err)
		}
	})
}

func TestNewRefusesWhatCloudWatchLogsWould(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  cloudwatchlogs.Config
		want string
	}{
		{"no log group", cloudwatchlogs.Config{LogStream: "s"}, "log group name is required"},
		{"no log stream", cloudwatchlogs.Config{LogGroup: group}, "log stream name is required"},
		{"a stream with a colon", cloudwatchlogs.Config{LogGroup: group, LogStream: "a:b"}, "is not a log stream name"},
		{"a constant timestamp", cloudwatchlogs.Config{LogGroup: group, LogStream: "s", Timestamp: "1700000000000"}, "is a constant"},
		{"a group that is no name", cloudwatchlogs.Config{LogGroup: "a b", LogStream: "s"}, "is not a log group name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.cfg.AWSConfig = testAWSConfig(1)
			_, err := cloudwatchlogs.New(t.Context(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := cloudwatchlogs.New(t.Context(), cloudwatchlogs.Config{
		LogGroup: "arn:aws:logs:eu-west-1:123456789012:log-group:/pipes/orders:*", LogStream: "s", AWSConfig: &aws.Config{},
	}); err != nil {
		t.Errorf("a log group ARN (and its region): %v", err)
	}
}
