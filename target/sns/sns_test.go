package sns_test

// No independent SNS server exists here, so these tests run against an
// in-process fake of SNS's endpoint: an net/http server that speaks the
// exact wire shape of PublishBatch in the AWS query protocol (a signed,
// form-encoded POST with Action=PublishBatch&Version=2010-03-31 and
// PublishBatchRequestEntries.member.N.* fields; an XML answer with
// Successful and Failed members, or an ErrorResponse).

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
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
	"github.com/pipesproject/pipes/target/sns"
)

const (
	topic     = "arn:aws:sns:us-east-1:123456789012:orders"
	fifoTopic = "arn:aws:sns:us-east-1:123456789012:orders.fifo"
)

// published is one entry as the fake received it.
type published struct {
	ID, Message, GroupID, DedupID string
	Attrs                         map[string]string // name → DataType=value (binary base64-decoded)
}

// fake is SNS's PublishBatch endpoint. answer decides a call: it returns
// an HTTP status and an error code for the whole call (0 to accept it),
// and for an accepted call the entries to fail with their code and fault.
type fake struct {
	t      *testing.T
	answer func(call int, entries []published) (status int, code string, fail map[string]entryFault)

	mu        sync.Mutex
	calls     int
	published []published
}

type entryFault struct {
	code   string
	sender bool
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
		f.t.Errorf("fake SNS got %s with Content-Type %q", r.Method, r.Header.Get("Content-Type"))
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKIDPIPESTEST/") || !strings.Contains(r.Header.Get("Authorization"), "/us-east-1/sns/aws4_request") {
		f.t.Errorf("fake SNS got a request not signed for sns in us-east-1: %q", r.Header.Get("Authorization"))
	}
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	if err := r.ParseForm(); err != nil {
		f.t.Errorf("fake SNS: parsing the form: %v", err)
	}
	form := r.PostForm
	if form.Get("Action") != "PublishBatch" || form.Get("Version") != "2010-03-31" {
		f.t.Errorf("fake SNS got Action=%q Version=%q", form.Get("Action"), form.Get("Version"))
	}
	var entries []published
	for n := 1; ; n++ {
		p := "PublishBatchRequestEntries.member." + strconv.Itoa(n) + "."
		if !form.Has(p + "Id") {
			break
		}
		e := published{ID: form.Get(p + "Id"), Message: form.Get(p + "Message"), GroupID: form.Get(p + "MessageGroupId"), DedupID: form.Get(p + "MessageDeduplicationId")}
		for k := 1; ; k++ {
			a := p + "MessageAttributes.entry." + strconv.Itoa(k) + "."
			if !form.Has(a + "Name") {
				break
			}
			if e.Attrs == nil {
				e.Attrs = map[string]string{}
			}
			v := form.Get(a + "Value.StringValue")
			if b := form.Get(a + "Value.BinaryValue"); b != "" {
				raw, err := base64.StdEncoding.DecodeString(b)
				if err != nil {
					f.t.Errorf("fake SNS: binary value %q is not base64", b)
				}
				v = string(raw)
			}
			e.Attrs[form.Get(a+"Name")] = form.Get(a+"Value.DataType") + "=" + v
		}
		entries = append(entries, e)
	}
	f.mu.Lock()
	f.calls++
	call := f.calls
	f.mu.Unlock()

	status, code, fail := 0, "", map[string]entryFault(nil)
	if f.answer != nil {
		status, code, fail = f.answer(call, entries)
	}
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("X-Amzn-Requestid", "req-"+strconv.Itoa(call))
	if status != 0 {
		w.WriteHeader(status)
		fmt.Fprintf(w, `<ErrorResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><Error><Type>Sender</Type><Code>%s</Code><Message>%s from the fake</Message></Error><RequestId>req-%d</RequestId></ErrorResponse>`, code, code, call)
		return
	}
	var ok, failed strings.Builder
	for _, e := range entries {
		if fe, bad := fail[e.Message]; bad {
			fmt.Fprintf(&failed, `<member><Id>%s</Id><Code>%s</Code><Message>refused by the fake</Message><SenderFault>%t</SenderFault></member>`, e.ID, fe.code, fe.sender)
			continue
		}
		fmt.Fprintf(&ok, `<member><Id>%s</Id><MessageId>sns-%s</MessageId></member>`, e.ID, e.ID)
		f.mu.Lock()
		f.published = append(f.published, e)
		f.mu.Unlock()
	}
	fmt.Fprintf(w, `<PublishBatchResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/"><PublishBatchResult><Successful>%s</Successful><Failed>%s</Failed></PublishBatchResult><ResponseMetadata><RequestId>req-%d</RequestId></ResponseMetadata></PublishBatchResponse>`, ok.String(), failed.String(), call)
}

func (f *fake) messages() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.published))
	for i, p := range f.published {
		out[i] = p.Message
	}
	sort.Strings(out)
	return out
}

// counter counts OnCall reports by operation.
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

// start runs the fake and returns a target publishing to it; the SDK
// retries up to 3 attempts without waiting.
func start(t *testing.T, f *fake, cfg sns.Config) *sns.Target {
	t.Helper()
	f.t = t
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	if cfg.TopicARN == "" {
		cfg.TopicARN = topic
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
	tg, err := sns.New(t.Context(), cfg)
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
		p := fmt.Sprintf(`{"i":%02d}`, i)
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

func str(s string) *string { return &s }

func TestDeliverPublishesEachPayloadWithTheEventsAttributes(t *testing.T) {
	t.Parallel()
	f := &fake{}
	tg := start(t, f, sns.Config{})
	ev := payloadEvent("m2", `{"n":2}`)
	ev.Attributes = map[string]source.MessageAttribute{
		"ErrorCode": {DataType: "String", StringValue: str("Boom")},
		"raw":       {DataType: "Binary", BinaryValue: []byte("xy")},
	}
	res, err := tg.Deliver(t.Context(), []*pipe.Event{payloadEvent("m1", `{"n":1}`), ev})
	if err != nil || len(res.Failures) > 0 {
		t.Fatalf("Deliver = %+v, %v; want success", res, err)
	}
	if got, want := f.messages(), []string{`{"n":1}`, `{"n":2}`}; !slices.Equal(got, want) {
		t.Fatalf("messages = %q, want %q", got, want)
	}
	for _, p := range f.published {
		if p.Message == `{"n":2}` && fmt.Sprint(p.Attrs) != "map[ErrorCode:String=Boom raw:Binary=xy]" {
			t.Errorf("attributes = %v", p.Attrs)
		}
		if p.GroupID != "" || p.DedupID != "" {
			t.Errorf("a standard topic got group %q dedup %q", p.GroupID, p.DedupID)
		}
	}
}

func TestMoreThanTenEventsArePublishedInCallsOfTen(t *testing.T) {
	t.Parallel()
	f := &fake{}
	var n counter
	tg := start(t, f, sns.Config{OnCall: n.onCall})
	evs, want := numbered(23)
	res, err := tg.Deliver(t.Context(), evs)
	if err != nil || len(res.Failures) > 0 {
		t.Fatalf("Deliver = %+v, %v; want success", res, err)
	}
	if got := n.get("PublishBatch"); got != 3 {
		t.Errorf("PublishBatch calls = %d, want 3", got)
	}
	if got := f.messages(); !slices.Equal(got, want) {
		t.Errorf("messages = %q, want %q", got, want)
	}
}

func TestAFIFOTopicGetsTheGroupAndDeduplicationIDsRenderedPerEvent(t *testing.T) {
	t.Parallel()
	f := &fake{}
	tg := start(t, f, sns.Config{TopicARN: fifoTopic, MessageGroupID: "$.body.customer", MessageDeduplicationID: "<$.messageId>-<$.body.order>"})
	var evs []*pipe.Event
	for i, c := range []string{"ada", "bob"} {
		ev, err := pipe.NewEvent(&source.Message{MessageID: fmt.Sprint("m", i), Body: fmt.Sprintf(`{"customer":%q,"order":"o%d"}`, c, i)})
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	if res, err := tg.Deliver(t.Context(), evs); err != nil || len(res.Failures) > 0 {
		t.Fatalf("Deliver = %+v, %v; want success", res, err)
	}
	var got []string
	for _, p := range f.published {
		got = append(got, p.GroupID+"/"+p.DedupID)
	}
	sort.Strings(got)
	if want := []string{"ada/m0-o0", "bob/m1-o1"}; !slices.Equal(got, want) {
		t.Errorf("group/dedup = %v, want %v", got, want)
	}
}

func TestEntriesSNSRefusesBecomeItemFailuresClassifiedBySenderFault(t *testing.T) {
	t.Parallel()
	f := &fake{answer: func(int, []published) (int, string, map[string]entryFault) {
		return 0, "", map[string]entryFault{
			`{"i":01}`: {"InvalidParameter", true},
			`{"i":03}`: {"InternalError", false},
			`{"i":04}`: {"Throttled", false},
		}
	}}
	tg := start(t, f, sns.Config{})
	evs, _ := numbered(5)
	res, err := tg.Deliver(t.Context(), evs)
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if got := failedIDs(res); !slices.Equal(got, []string{"m01", "m03", "m04"}) {
		t.Fatalf("failed = %v, want [m01 m03 m04]", got)
	}
	for _, fl := range res.Failures {
		var ee *sns.EntryError
		if !errors.As(fl.Err, &ee) {
			t.Errorf("failure of %s = %v, want an *EntryError", fl.ID, fl.Err)
		}
		permanent, throttled := core.IsPermanent(fl.Err), core.IsThrottled(fl.Err)
		switch fl.ID {
		case "m01":
			if !permanent || ee.ErrorCode() != "InvalidParameter" {
				t.Errorf("a sender fault is %v, want permanent InvalidParameter", fl.Err)
			}
		case "m03":
			if permanent || throttled {
				t.Errorf("a service fault is %v, want retryable", fl.Err)
			}
		case "m04":
			if !throttled {
				t.Errorf("a throttled entry is %v, want throttled", fl.Err)
			}
		}
	}
	if got := f.messages(); !slices.Equal(got, []string{`{"i":00}`, `{"i":02}`}) {
		t.Errorf("messages = %q", got)
	}
}

func TestWholeCallFailuresAreClassified(t *testing.T) {
	tests := []struct {
		name              string
		status            int
		code              string
		permanent, thrott bool
		attempts          int
	}{
		// The SDK does not retry SNS's "Throttled" code itself.
		{"throttling fails the batch as throttled", http.StatusTooManyRequests, "Throttled", false, true, 1},
		{"an authorization error fails the batch permanently", http.StatusForbidden, "AuthorizationError", true, false, 1},
		{"a missing topic fails the batch permanently", http.StatusNotFound, "NotFound", true, false, 1},
		{"an internal error fails the batch, retryable, after the SDK's retries", http.StatusInternalServerError, "InternalError", false, false, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fake{answer: func(int, []published) (int, string, map[string]entryFault) { return tt.status, tt.code, nil }}
			var n counter
			tg := start(t, f, sns.Config{OnCall: n.onCall})
			evs, _ := numbered(3)
			res, err := tg.Deliver(t.Context(), evs)
			if err == nil {
				t.Fatalf("Deliver = %+v, nil; want an error", res)
			}
			if core.IsPermanent(err) != tt.permanent || core.IsThrottled(err) != tt.thrott {
				t.Errorf("error %v: permanent %t throttled %t, want %t %t", err, core.IsPermanent(err), core.IsThrottled(err), tt.permanent, tt.thrott)
			}
			if !strings.Contains(err.Error(), tt.code) {
				t.Errorf("error %v does not name %s", err, tt.code)
			}
			if got := n.get("PublishBatch"); got != tt.attempts {
				t.Errorf("OnCall counted %d attempts, want %d", got, tt.attempts)
			}
		})
	}
}

func TestACallRefusedAsInvalidIsRetriedEntryByEntrySoOnlyTheBadOneFails(t *testing.T) {
	t.Parallel()
	f := &fake{answer: func(_ int, es []published) (int, string, map[string]entryFault) {
		for _, e := range es {
			if e.Message == `{"i":02}` {
				return http.StatusBadRequest, "InvalidParameter", nil
			}
		}
		return 0, "", nil
	}}
	tg := start(t, f, sns.Config{})
	evs, _ := numbered(4)
	res, err := tg.Deliver(t.Context(), evs)
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if got := failedIDs(res); !slices.Equal(got, []string{"m02"}) || !core.IsPermanent(res.Failures[0].Err) {
		t.Fatalf("failures = %+v, want m02 permanent", res.Failures)
	}
	if got := f.messages(); !slices.Equal(got, []string{`{"i":00}`, `{"i":01}`, `{"i":03}`}) {
		t.Errorf("messages = %q", got)
	}
}

func TestOnAFIFOTopicAFailedCallStopsTheRestOfTheBatch(t *testing.T) {
	t.Parallel()
	f := &fake{answer: func(call int, _ []published) (int, string, map[string]entryFault) {
		if call > 1 {
			return http.StatusInternalServerError, "InternalError", nil
		}
		return 0, "", nil
	}}
	tg := start(t, f, sns.Config{TopicARN: fifoTopic, MessageGroupID: "g"})
	evs, want := numbered(25)
	res, err := tg.Deliver(t.Context(), evs)
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if got := f.messages(); !slices.Equal(got, want[:10]) {
		t.Errorf("published %q, want the first ten", got)
	}
	if len(res.Failures) != 15 {
		t.Fatalf("%d failures, want 15", len(res.Failures))
	}
	for _, fl := range res.Failures {
		if core.IsPermanent(fl.Err) {
			t.Errorf("failure of %s is permanent: %v", fl.ID, fl.Err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls != 2+2 { // the first call, then the second with 2 SDK retries; the third never
		t.Errorf("calls = %d, want 4", f.calls)
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  sns.Config
		want string
	}{
		{"a missing topic is rejected", sns.Config{}, "topic arn is required"},
		{"a topic that is not an ARN is rejected", sns.Config{TopicARN: "orders"}, "is not an SNS topic ARN"},
		{"a FIFO topic without a group id is rejected", sns.Config{TopicARN: fifoTopic}, "message group id is required for a FIFO topic"},
		{"a deduplication id on a standard topic is rejected", sns.Config{TopicARN: topic, MessageDeduplicationID: "x"}, "only for FIFO topics"},
		{"a template that does not parse is rejected", sns.Config{TopicARN: fifoTopic, MessageGroupID: "<$.body"}, `message group id "<$.body"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.AWSConfig = &aws.Config{Region: "us-east-1"}
			_, err := sns.New(t.Context(), tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestTheRegionComesFromTheTopicARNWhenTheConfigHasNone(t *testing.T) {
	if _, err := sns.New(t.Context(), sns.Config{TopicARN: "arn:aws:sns:eu-west-1:123456789012:t", AWSConfig: &aws.Config{}}); err != nil {
		t.Errorf("New: %v", err)
	}
}
