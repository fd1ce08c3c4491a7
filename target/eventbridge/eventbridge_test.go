package eventbridge_test

// No independent EventBridge server exists here, so these tests run
// against an in-process fake of EventBridge's endpoint: an net/http server
// that speaks the exact wire shape of PutEvents in the AWS JSON 1.1
// protocol (a signed POST / with X-Amz-Target: AWSEvents.PutEvents and
// Content-Type application/x-amz-json-1.1; a JSON answer with
// FailedEntryCount and Entries by position, or a {"__type", "message"}
// error).

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
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/target/eventbridge"
	"github.com/pipesproject/pipes/template"
)

// putEntry is a PutEvents request entry as it travels.
type putEntry struct {
	Source       string
	DetailType   string
	Detail       string
	EventBusName string
	Resources    []string
	Time         float64 // epoch seconds on the wire
}

// fake is EventBridge's PutEvents endpoint. answer decides a call: an HTTP
// status and error type for the whole call (0 to accept it), and for an
// accepted call the entries (by Detail) to fail with a code.
type fake struct {
	t      *testing.T
	answer func(call int, entries []putEntry) (status int, errType string, fail map[string]string)

	mu    sync.Mutex
	calls int
	put   []putEntry
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.Method != http.MethodPost || r.URL.Path != "/" ||
		r.Header.Get("X-Amz-Target") != "AWSEvents.PutEvents" ||
		r.Header.Get("Content-Type") != "application/x-amz-json-1.1" {
		f.t.Errorf("fake EventBridge got %s %s target %q type %q", r.Method, r.URL.Path, r.Header.Get("X-Amz-Target"), r.Header.Get("Content-Type"))
	}
	if !strings.Contains(r.Header.Get("Authorization"), "/us-east-1/events/aws4_request") {
		f.t.Errorf("fake EventBridge got a request not signed for events in us-east-1: %q", r.Header.Get("Authorization"))
	}
	var in struct{ Entries []putEntry }
	if err := json.Unmarshal(body, &in); err != nil {
		f.t.Errorf("fake EventBridge: decoding %s: %v", body, err)
	}
	f.mu.Lock()
	f.calls++
	call := f.calls
	f.mu.Unlock()
	status, errType, fail := 0, "", map[string]string(nil)
	if f.answer != nil {
		status, errType, fail = f.answer(call, in.Entries)
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-Requestid", fmt.Sprint("req-", call))
	if status != 0 {
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"__type":%q,"message":"%s from the fake"}`, errType, errType)
		return
	}
	type result struct {
		EventId      string `json:",omitempty"`
		ErrorCode    string `json:",omitempty"`
		ErrorMessage string `json:",omitempty"`
	}
	out := struct {
		FailedEntryCount int
		Entries          []result
	}{}
	for i, e := range in.Entries {
		if code, bad := fail[e.Detail]; bad {
			out.FailedEntryCount++
			out.Entries = append(out.Entries, result{ErrorCode: code, ErrorMessage: "refused by the fake"})
			continue
		}
		out.Entries = append(out.Entries, result{EventId: fmt.Sprint("ev-", call, "-", i)})
		f.mu.Lock()
		f.put = append(f.put, e)
		f.mu.Unlock()
	}
	_ = json.NewEncoder(w).Encode(out)
}

func (f *fake) details() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, e := range f.put {
		out = append(out, e.Detail)
	}
	sort.Strings(out)
	return out
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

func start(t *testing.T, f *fake, cfg eventbridge.Config) *eventbridge.Target {
	t.Helper()
	f.t = t
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	if cfg.Source == "" && cfg.Vars.PipeARN == "" {
		cfg.Source = "pipes.test"
	}
	if cfg.DetailType == "" && cfg.Vars.PipeARN == "" {
		cfg.DetailType = "Order"
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
	tg, err := eventbridge.New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = tg.Close(t.Context()) })
	return tg
}

func payloadEvent(id, p string) *pipe.Event {
	return &pipe.Event{Message: &source.Message{MessageID: id, Body: p}, RecordJSON: []byte(p)}
}

func numbered(n int) ([]*pipe.Event, []string) {
	var evs []*pipe.Event
	var want []string
	for i := range n {
		p := fmt.Sprintf(`{"i":"%02d"}`, i)
		evs = append(evs, payloadEvent(fmt.Sprintf("m%02d", i), p))
		want = append(want, p)
	}
	return evs, want
}

func failedIDs(r pipe.Result) []string {
	ids := make([]string, 0, len(r.Failures))
	for _, f := range r.Failures {
		ids = append(ids, f.ID)
	}
	sort.Strings(ids)
	return ids
}

func TestDeliverPutsEachPayloadAsDetailWithRenderedBusSourceAndDetailType(t *testing.T) {
	t.Parallel()
	f := &fake{}
	tg := start(t, f, eventbridge.Config{EventBusName: "bus-<$.body.region>", Source: "$.body.app", DetailType: "Order <$.body.kind>"})
	var evs []*pipe.Event
	for i, b := range []string{`{"region":"eu","app":"shop","kind":"placed"}`, `{"region":"us","app":"till","kind":"paid"}`} {
		ev, err := pipe.NewEvent(&source.Message{MessageID: fmt.Sprint("m", i), Body: b})
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	res, err := tg.Deliver(t.Context(), evs)
	if err != nil || len(res.Failures) > 0 {
		t.Fatalf("Deliver = %+v, %v; want success", res, err)
	}
	var got []string
	for _, e := range f.put {
		var rec map[string]any
		if err := json.Unmarshal([]byte(e.Detail), &rec); err != nil {
			t.Errorf("detail %s is not the record: %v", e.Detail, err)
		}
		got = append(got, fmt.Sprintf("%s|%s|%s|%s", e.EventBusName, e.Source, e.DetailType, rec["messageId"]))
	}
	sort.Strings(got)
	if want := []string{"bus-eu|shop|Order placed|m0", "bus-us|till|Order paid|m1"}; !slices.Equal(got, want) {
		t.Errorf("entries = %q, want %q", got, want)
	}
}

func TestTheDefaultBusIsUsedWhenNoneIsGiven(t *testing.T) {
	t.Parallel()
	f := &fake{}
	tg := start(t, f, eventbridge.Config{})
	if res, err := tg.Deliver(t.Context(), []*pipe.Event{payloadEvent("m1", `{}`)}); err != nil || len(res.Failures) > 0 {
		t.Fatalf("Deliver = %+v, %v", res, err)
	}
	if f.put[0].EventBusName != "default" {
		t.Errorf("bus = %q, want default", f.put[0].EventBusName)
	}
}

func TestMoreThanTenEventsArePutInCallsOfTen(t *testing.T) {
	t.Parallel()
	f := &fake{}
	var n counter
	tg := start(t, f, eventbridge.Config{OnCall: n.onCall})
	evs, want := numbered(21)
	if res, err := tg.Deliver(t.Context(), evs); err != nil || len(res.Failures) > 0 {
		t.Fatalf("Deliver = %+v, %v", res, err)
	}
	if got := n.get("PutEvents"); got != 3 {
		t.Errorf("PutEvents calls = %d, want 3", got)
	}
	if got := f.details(); !slices.Equal(got, want) {
		t.Errorf("details = %q", got)
	}
}

func TestAPayloadThatIsNotAJSONObjectFailsAloneAndPermanently(t *testing.T) {
	tests := []struct{ name, payload string }{
		{"plain text", "hello"},
		{"a JSON array", `[1,2]`},
		{"a JSON string", `"x"`},
		{"broken JSON", `{"a":`},
		{"nothing", ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fake{}
			tg := start(t, f, eventbridge.Config{})
			res, err := tg.Deliver(t.Context(), []*pipe.Event{payloadEvent("ok", `{"a":1}`), payloadEvent("bad", tt.payload)})
			if err != nil {
				t.Fatalf("Deliver: %v", err)
			}
			if got := failedIDs(res); !slices.Equal(got, []string{"bad"}) {
				t.Fatalf("failed = %v, want [bad]", got)
			}
			if e := res.Failures[0].Err; !core.IsPermanent(e) || !strings.Contains(e.Error(), "not a JSON object") {
				t.Errorf("failure = %v, want a permanent 'not a JSON object'", e)
			}
			if got := f.details(); !slices.Equal(got, []string{`{"a":1}`}) {
				t.Errorf("details = %q", got)
			}
		})
	}
}

func TestEntriesEventBridgeRefusesBecomeItemFailuresByPosition(t *testing.T) {
	t.Parallel()
	f := &fake{answer: func(int, []putEntry) (int, string, map[string]string) {
		return 0, "", map[string]string{
			`{"i":"01"}`: "ThrottlingException",
			`{"i":"02"}`: "InternalException",
			`{"i":"03"}`: "MalformedDetail",
			`{"i":"04"}`: "NotAuthorizedForSourceException",
		}
	}}
	tg := start(t, f, eventbridge.Config{})
	evs, _ := numbered(6)
	res, err := tg.Deliver(t.Context(), evs)
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if got := failedIDs(res); !slices.Equal(got, []string{"m01", "m02", "m03", "m04"}) {
		t.Fatalf("failed = %v", got)
	}
	want := map[string]string{"m01": "throttled", "m02": "retryable", "m03": "permanent", "m04": "permanent"}
	for _, fl := range res.Failures {
		kind := "retryable"
		switch {
		case core.IsThrottled(fl.Err):
			kind = "throttled"
		case core.IsPermanent(fl.Err):
			kind = "permanent"
		}
		var ee *eventbridge.EntryError
		if kind != want[fl.ID] || !errors.As(fl.Err, &ee) {
			t.Errorf("failure of %s = %v (%s), want %s with an *EntryError", fl.ID, fl.Err, kind, want[fl.ID])
		}
	}
	if got := f.details(); !slices.Equal(got, []string{`{"i":"00"}`, `{"i":"05"}`}) {
		t.Errorf("details = %q", got)
	}
}

func TestWholeCallFailuresAreClassified(t *testing.T) {
	tests := []struct {
		name              string
		status            int
		errType           string
		permanent, thrott bool
		attempts          int
	}{
		{"throttling fails the batch as throttled after the SDK's retries", http.StatusBadRequest, "ThrottlingException", false, true, 3},
		{"access denied fails the batch permanently", http.StatusBadRequest, "AccessDeniedException", true, false, 1},
		{"a missing bus fails the batch permanently", http.StatusBadRequest, "ResourceNotFoundException", true, false, 1},
		{"an internal error fails the batch, retryable, after the SDK's retries", http.StatusInternalServerError, "InternalException", false, false, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fake{answer: func(int, []putEntry) (int, string, map[string]string) { return tt.status, tt.errType, nil }}
			var n counter
			tg := start(t, f, eventbridge.Config{OnCall: n.onCall})
			evs, _ := numbered(3)
			res, err := tg.Deliver(t.Context(), evs)
			if err == nil {
				t.Fatalf("Deliver = %+v, nil; want an error", res)
			}
			if core.IsPermanent(err) != tt.permanent || core.IsThrottled(err) != tt.thrott {
				t.Errorf("error %v: permanent %t throttled %t, want %t %t", err, core.IsPermanent(err), core.IsThrottled(err), tt.permanent, tt.thrott)
			}
			if got := n.get("PutEvents"); got != tt.attempts {
				t.Errorf("OnCall counted %d attempts, want %d", got, tt.attempts)
			}
		})
	}
}

func TestACallRefusedAsInvalidIsRetriedEntryByEntry(t *testing.T) {
	t.Parallel()
	f := &fake{answer: func(_ int, es []putEntry) (int, string, map[string]string) {
		for _, e := range es {
			if e.Detail == `{"i":"01"}` {
				return http.StatusBadRequest, "ValidationException", nil
			}
		}
		return 0, "", nil
	}}
	tg := start(t, f, eventbridge.Config{})
	evs, _ := numbered(3)
	res, err := tg.Deliver(t.Context(), evs)
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if got := failedIDs(res); !slices.Equal(got, []string{"m01"}) || !core.IsPermanent(res.Failures[0].Err) {
		t.Fatalf("failures = %+v, want m01 permanent", res.Failures)
	}
	if got := f.details(); !slices.Equal(got, []string{`{"i":"00"}`, `{"i":"02"}`}) {
		t.Errorf("details = %q", got)
	}
}

func TestAnEmptyRenderedSourceFailsThatEventPermanently(t *testing.T) {
	t.Parallel()
	f := &fake{}
	tg := start(t, f, eventbridge.Config{Source: "$.body.app"})
	ok, err := pipe.NewEvent(&source.Message{MessageID: "ok", Body: `{"app":"shop"}`})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := pipe.NewEvent(&source.Message{MessageID: "bad", Body: `{}`})
	if err != nil {
		t.Fatal(err)
	}
	res, err := tg.Deliver(t.Context(), []*pipe.Event{ok, bad})
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if got := failedIDs(res); !slices.Equal(got, []string{"bad"}) || !core.IsPermanent(res.Failures[0].Err) {
		t.Fatalf("failures = %+v, want bad permanent", res.Failures)
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  eventbridge.Config
		want string
	}{
		{"a missing source without the pipe's ARN is rejected", eventbridge.Config{DetailType: "x"}, "source is required"},
		{"more than 10 resources are rejected", eventbridge.Config{Source: "x", Resources: make([]string, 11)}, "at most 10"},
		{"a template that does not parse is rejected", eventbridge.Config{Source: "<$.a", DetailType: "x"}, `source "<$.a"`},
		{"no region is rejected", eventbridge.Config{Source: "x", DetailType: "y", AWSConfig: &aws.Config{}}, "no AWS region"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.cfg.AWSConfig == nil {
				tt.cfg.AWSConfig = &aws.Config{Region: "us-east-1"}
			}
			_, err := eventbridge.New(t.Context(), tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// Pipes' defaults when EventBridgeEventBusParameters has no Source or
// DetailType: the pipe's ARN and "Event from " + the source's eventSource
// (issue 14: detail-type "Event from aws:sqs", source the pipe's ARN).
func TestMissingSourceAndDetailTypeTakePipesDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, eventSource, wantDetailType string
	}{
		{"an SQS source", "", "Event from aws:sqs"},
		{"a RabbitMQ source", "aws:rmq", "Event from aws:rmq"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fake{}
			tg := start(t, f, eventbridge.Config{EventSource: tt.eventSource, Vars: template.Vars{PipeARN: "pipes:orders"}})
			if res, err := tg.Deliver(t.Context(), []*pipe.Event{payloadEvent("m1", `{}`)}); err != nil || len(res.Failures) > 0 {
				t.Fatalf("Deliver = %+v, %v", res, err)
			}
			if got := f.put[0]; got.Source != "pipes:orders" || got.DetailType != tt.wantDetailType {
				t.Errorf("source, detail-type = %q, %q; want pipes:orders, %q", got.Source, got.DetailType, tt.wantDetailType)
			}
		})
	}
}

// PipeTargetEventBridgeEventBusParameters: "Resources: AWS resources,
// identified by Amazon Resource Name (ARN), which the event primarily
// concerns" and "Time: The time stamp of the event, per RFC3339. If no
// time stamp is provided, the time stamp of the PutEvents call is used."
// Both may be dynamic paths.
func TestResourcesAndTimeAreRenderedPerEvent(t *testing.T) {
	t.Parallel()
	f := &fake{}
	tg := start(t, f, eventbridge.Config{Resources: []string{"arn:aws:s3:::bucket", "$.body.arn", "$.body.missing"}, Time: "$.body.at"})
	good := `{"arn":"arn:aws:sqs:us-east-1:123456789012:q","at":"2026-12-01T10:00:00Z"}`
	var evs []*pipe.Event
	for i, b := range []string{good, `{"at":"yesterday"}`, `{"arn":"arn:aws:sns:us-east-1:123456789012:t"}`} {
		ev, err := pipe.NewEvent(&source.Message{MessageID: fmt.Sprint("m", i+1), Body: b})
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	res, err := tg.Deliver(t.Context(), evs)
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if got := failedIDs(res); !slices.Equal(got, []string{"m2"}) {
		t.Errorf("failed = %q, want m2 (a time that is not RFC 3339)", got)
	}
	if len(res.Failures) == 1 && !core.IsPermanent(res.Failures[0].Err) {
		t.Errorf("m2's failure %v is not permanent", res.Failures[0].Err)
	}
	var e1 putEntry
	for _, e := range f.put {
		if strings.Contains(e.Detail, `"messageId":"m1"`) {
			e1 = e
		}
	}
	if !slices.Equal(e1.Resources, []string{"arn:aws:s3:::bucket", "arn:aws:sqs:us-east-1:123456789012:q"}) || e1.Time != float64(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC).Unix()) {
		t.Errorf("m1 entry = %+v; want two resources and the body's time", e1)
	}
}

// PipeTargetEventBridgeEventBusParameters.EndpointId: "The URL subdomain
// of the endpoint": the events go through that global endpoint; the call
// carries it (and is signed with SigV4a, so this server checks no
// signature).
func TestEndpointIDIsSentWithTheCall(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			EndpointId string
			Entries    []putEntry
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &in)
		mu.Lock()
		got = append(got, in.EndpointId)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		fmt.Fprintf(w, `{"FailedEntryCount":0,"Entries":[{"EventId":"e1"}]}`)
	}))
	t.Cleanup(srv.Close)
	tg, err := eventbridge.New(t.Context(), eventbridge.Config{
		Source: "s", DetailType: "d", EndpointID: "abcde.veo", Endpoint: srv.URL,
		AWSConfig: &aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDPIPESTEST", "pipes-test-secret", "")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := tg.Deliver(t.Context(), []*pipe.Event{payloadEvent("m1", `{}`)}); err != nil || len(res.Failures) > 0 {
		t.Fatalf("Deliver = %+v, %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, []string{"abcde.veo"}) {
		t.Errorf("EndpointId sent = %q, want abcde.veo", got)
	}
}
