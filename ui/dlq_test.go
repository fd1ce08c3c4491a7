package ui_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/internal/sqstest"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/ui"
)

// opsFixture is the status page of an sqs pipe (not running) whose target
// has a secret header, with its live tail on (with execution data; see
// newOpsFixtureWith).
type opsFixture struct {
	hs       *httptest.Server
	rec      *ui.Recorder
	client   *sqs.Client
	src, dlq string
}

const opsSecret = "Bearer ops-SECRET-77"

func newOpsFixture(t *testing.T) *opsFixture {
	t.Helper()
	return newOpsFixtureWith(t, true)
}

// newOpsFixtureWith is newOpsFixture with the pipe's
// logging.include_execution_data set to execData.
func newOpsFixtureWith(t *testing.T, execData bool) *opsFixture {
	t.Helper()
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "AKIDPIPESTEST", "AWS_SECRET_ACCESS_KEY": "pipes-test-secret", "AWS_EC2_METADATA_DISABLED": "true"} {
		t.Setenv(k, v)
	}
	c := sqstest.Client(t)
	src, dlq := sqstest.CreateQueue(t, c, sqstest.QueueOptions{MaxReceiveCount: 2})
	file := filepath.Join(t.TempDir(), "p.yaml")
	yaml := fmt.Sprintf(`name: ops
source:
  type: sqs
  queue_url: %s
  endpoint: %s
  region: us-east-1
target:
  type: http
  url: http://127.0.0.1:1/hook
  headers:
    Authorization: ${API_TOKEN}
logging:
  level: error
  include_execution_data: %t
`, src, sqstest.Endpoint(t), execData)
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	specs, err := config.Loader{LookupEnv: func(k string) (string, bool) { return opsSecret, k == "API_TOKEN" }}.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	built, err := pipes.NewRegistry().Build(context.Background(), specs, pipes.Env{})
	if err != nil {
		t.Fatal(err)
	}
	scrub := ui.Secrets(specs[0]).Text
	rec := ui.NewRecorder(time.Second, scrub)
	built[0].SetObserver(rec)
	depths, redriver := ui.Queues(specs[0], nil, nil)
	srv, err := ui.New(ui.Config{Addr: "127.0.0.1:0", Token: "tok", DepthEvery: time.Second,
		Pipes: []ui.Pipe{{Control: built[0], Recorder: rec, Settings: ui.Settings(specs[0]), Scrub: scrub,
			Depths: depths, Redriver: redriver, ExecutionData: execData, Tail: execData}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); _ = srv.Close() })
	return &opsFixture{hs: hs, rec: rec, client: c, src: src, dlq: dlq}
}

// putDeadLetters puts messages in the dead-letter queue as pipes'
// dead-letter stage leaves them: the failure context quotes the secret,
// as a target's error might, and so does the body.
func (f *opsFixture) putDeadLetters(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		attr := func(v string) types.MessageAttributeValue {
			return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
		}
		_, err := f.client.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(f.dlq),
			MessageBody: aws.String(fmt.Sprintf(`{"order":%d,"auth":%q}`, i, opsSecret)),
			MessageAttributes: map[string]types.MessageAttributeValue{
				pipe.DLQErrorCode: attr("ClientError"), pipe.DLQErrorMessage: attr("HTTP 400 with " + opsSecret),
				pipe.DLQStage: attr("target"), pipe.DLQPipe: attr("ops"),
			}})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func (f *opsFixture) noSecret(t *testing.T, what, body string) {
	t.Helper()
	for _, s := range []string{opsSecret, "ops-SECRET"} {
		if strings.Contains(body, s) {
			t.Fatalf("%s shows the secret %q:\n%s", what, s, body)
		}
	}
}

// TestTheDLQBrowserListsAndRedrivesASelection runs on local-aws-sqs
// (.ci/sqs) and relies on its message ids staying the same from receive
// to receive, on a message made visible again (visibility 0) being
// received again at once, and on its approximate counts being exact on an
// idle queue.
func TestTheDLQBrowserListsAndRedrivesASelection(t *testing.T) {
	f := newOpsFixture(t)
	f.putDeadLetters(t, 3)
	var list ui.DLQView
	getJSON(t, f.hs.URL+"/api/pipes/ops/dlq", &list)
	if len(list.Messages) != 3 || list.Error != "" {
		t.Fatalf("listed %+v, want 3 messages", list)
	}
	for _, m := range list.Messages {
		if !strings.Contains(m.Reason, "at target: ClientError: HTTP 400 with ") || !strings.HasPrefix(m.Preview, `{"order":`) ||
			!strings.Contains(m.Deliveries, "received 1×") || m.AgeSeconds == nil {
			t.Errorf("message %+v: want the reason, the preview, the receive count and the age", m)
		}
	}
	if v, _ := sqstest.Count(t, f.client, f.dlq); v != 3 {
		t.Fatalf("after the listing the dead-letter queue shows %d visible, want the 3 given back", v)
	}
	page := fetch(t, f.hs.URL+"/pipes/ops/dlq")
	for _, m := range list.Messages {
		if !strings.Contains(page, `name="id" value="`+m.ID+`"`) {
			t.Errorf("the page has no checkbox for %s", m.ID)
		}
	}
	f.noSecret(t, "the DLQ page", page)
	raw := fetch(t, f.hs.URL+"/api/pipes/ops/dlq")
	f.noSecret(t, "/api/pipes/ops/dlq", raw)

	t.Run("a redrive of one selected message needs the token and moves only it", func(t *testing.T) {
		post := func(auth, query string) int {
			req, _ := http.NewRequest(http.MethodPost, f.hs.URL+"/api/pipes/ops/dlq/redrive?"+query, nil)
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			return res.StatusCode
		}
		if got := post("Bearer wrong", "id="+list.Messages[1].ID); got != http.StatusUnauthorized {
			t.Fatalf("a wrong token: %d, want 401", got)
		}
		if got := post("Bearer tok", ""); got != http.StatusBadRequest {
			t.Fatalf("no selection: %d, want 400", got)
		}
		if got := post("Bearer tok", "rate=0&id="+list.Messages[1].ID); got != http.StatusAccepted {
			t.Fatalf("the redrive: %d, want 202", got)
		}
		eventually(t, "the redrive done", func() bool {
			var v ui.PipeView
			getJSON(t, f.hs.URL+"/api/pipes/ops", &v)
			return v.Redrive != nil && v.Redrive.State == "done" && v.Redrive.Moved == 1
		})
		if v, inflight := sqstest.CountReleased(t, f.client, f.dlq, 5*time.Second); v != 2 || inflight != 0 {
			t.Errorf("the dead-letter queue shows %d visible, %d in flight, want 2 visible", v, inflight)
		}
		got := sqstest.DrainBodies(t, f.client, f.src)
		if len(got) != 1 || !strings.HasPrefix(list.Messages[1].Preview, got[0][:11]) { // the preview has the secret scrubbed
			t.Errorf("the source queue holds %q, want the one message selected", got)
		}
	})
}

// TestTheDLQBrowserShowsNoBodyWithoutExecutionData lists the dead-letter
// queue of a pipe whose logging.include_execution_data is off: the
// messages, their deliveries and reasons are listed, their bodies are not
// (neither in the API nor on the page).
func TestTheDLQBrowserShowsNoBodyWithoutExecutionData(t *testing.T) {
	f := newOpsFixtureWith(t, false)
	f.putDeadLetters(t, 2)
	var list ui.DLQView
	getJSON(t, f.hs.URL+"/api/pipes/ops/dlq", &list)
	if len(list.Messages) != 2 || list.Error != "" || list.ExecutionData {
		t.Fatalf("listed %+v, want 2 messages and executionData false", list)
	}
	for _, m := range list.Messages {
		if m.Preview != "" || !strings.Contains(m.Reason, "at target: ClientError") || m.Size == 0 {
			t.Errorf("message %+v: want its reason and size, no preview", m)
		}
	}
	raw := fetch(t, f.hs.URL+"/api/pipes/ops/dlq")
	page := fetch(t, f.hs.URL+"/pipes/ops/dlq")
	for what, body := range map[string]string{"/api/pipes/ops/dlq": raw, "the DLQ page": page} {
		if strings.Contains(body, `order`) || strings.Contains(body, `"preview"`) {
			t.Errorf("%s shows a body:\n%s", what, body)
		}
		f.noSecret(t, what, body)
	}
	if !strings.Contains(page, `name="id" value="`+list.Messages[0].ID+`"`) {
		t.Error("the page lists no message to select")
	}
}

// TestTheDLQPagesRedriveAllMovesEveryMessage posts the DLQ page's form
// as a browser does (its CSRF cookie and field, the token) with "Redrive
// all": every message goes back to the source queue. It runs on
// local-aws-sqs (.ci/sqs), relying on its approximate counts being exact
// on an idle queue.
func TestTheDLQPagesRedriveAllMovesEveryMessage(t *testing.T) {
	f := newOpsFixture(t)
	f.putDeadLetters(t, 3)
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	page := fetchWith(t, browser, f.hs.URL+"/pipes/ops/dlq")
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]{32})"`).FindStringSubmatch(page)
	if m == nil || !strings.Contains(page, `name="scope" value="all"`) {
		t.Fatalf("no form with the CSRF field and Redrive all in\n%s", page)
	}
	post := func(form url.Values) *http.Response {
		t.Helper()
		res, err := browser.PostForm(f.hs.URL+"/pipes/ops/dlq/redrive", form)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	if res := post(url.Values{"csrf": {m[1]}, "token": {"wrong"}, "scope": {"all"}, "rate": {"0"}}); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %s, want 401", res.Status)
	}
	res := post(url.Values{"csrf": {m[1]}, "token": {"tok"}, "scope": {"all"}, "rate": {"0"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/pipes/ops/dlq?done=redrive" {
		t.Fatalf("redrive all: %s to %q, want 303 to the DLQ page", res.Status, res.Header.Get("Location"))
	}
	eventually(t, "the redrive done", func() bool {
		var v ui.PipeView
		getJSON(t, f.hs.URL+"/api/pipes/ops", &v)
		return v.Redrive != nil && v.Redrive.State == "done" && v.Redrive.Moved == 3
	})
	if v, inflight := sqstest.CountReleased(t, f.client, f.dlq, 5*time.Second); v != 0 || inflight != 0 {
		t.Errorf("the dead-letter queue shows %d visible, %d in flight, want it empty", v, inflight)
	}
	if got := sqstest.DrainBodies(t, f.client, f.src); len(got) != 3 {
		t.Errorf("the source queue holds %q, want the 3 messages", got)
	}
}

// TestTheLiveTailIsMaskedRateLimitedAndHoldsNothingUnwatched opens the
// tail's stream, hands the recorder events that quote the secret, faster
// than a viewer may get them, and reads the stream.
func TestTheLiveTailIsMaskedRateLimitedAndHoldsNothingUnwatched(t *testing.T) {
	f := newOpsFixture(t)
	if f.rec.Tapping() {
		t.Fatal("the tail taps with no viewer")
	}
	page := fetch(t, f.hs.URL+"/pipes/ops/tail")
	if !strings.Contains(page, `data-tail="/api/pipes/ops/tail"`) || strings.Contains(page, "<script>") {
		t.Fatalf("the tail page:\n%s", page)
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.hs.URL+"/api/pipes/ops/tail", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	eventually(t, "the viewer counted", f.rec.Tapping)
	// 200 messages through every stage within about a second.
	go func() {
		for i := range 200 {
			id := fmt.Sprintf("m-%d", i)
			for _, st := range []string{core.TapReceived, core.TapFilter, core.TapTarget, core.TapOutcome} {
				detail := ""
				if st == core.TapOutcome {
					detail = "failed: target: HTTP 401 for " + opsSecret
				}
				f.rec.Tapped(core.TapEvent{Stage: st, MessageID: id, Detail: detail, Sample: `{"auth":"` + opsSecret + `"}`, At: time.Now()})
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	var events []ui.TailEvent
	start := time.Now()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() && time.Since(start) < 1500*time.Millisecond {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		f.noSecret(t, "the tail", line)
		var e ui.TailEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	cancel()
	res.Body.Close()
	// A burst of 10, then 10 a second: at most 25 in 1.5 s.
	if len(events) == 0 || len(events) > 25 {
		t.Fatalf("%d events in 1.5 s, want 1 to 25", len(events))
	}
	if events[0].Stage != core.TapReceived || !strings.Contains(events[0].Sample, `"auth"`) {
		t.Errorf("first event %+v, want a receive with its masked sample", events[0])
	}
	eventually(t, "no viewer left", func() bool { return !f.rec.Tapping() })
}
