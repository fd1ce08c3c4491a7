package ui_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/source/memory"
	"github.com/pipesproject/pipes/ui"
)

// failBad is a func target that fails the items whose body holds "bad"
// (a partial batch answer).
type failBad struct{}

func (failBad) Deliver(_ context.Context, events []*pipe.Event) (pipe.Result, error) {
	var res pipe.Result
	for _, ev := range events {
		if strings.Contains(ev.Message.Body, "bad") {
			res.Failures = append(res.Failures, pipe.ItemFailure{ID: ev.ID(), Err: errors.New("target refused it")})
		}
	}
	return res, nil
}

// fixture is a running pipe on a memory queue (with a dead-letter queue)
// and its status page served by a real net/http server.
type fixture struct {
	pipe   *pipe.Pipe
	queue  *memory.Queue
	server *ui.Server
	http   *httptest.Server
	token  string
}

func newFixture(t *testing.T, token string) *fixture {
	t.Helper()
	b := memory.NewBroker()
	q, err := b.Queue("orders", memory.Options{WaitTime: 50 * time.Millisecond, VisibilityTimeout: 100 * time.Millisecond,
		MaxReceiveCount: 2, DeadLetterQueue: "orders-dlq"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipe.New(pipe.Options{Name: "orders", Source: q, Target: failBad{}, IncludeExecutionData: true})
	if err != nil {
		t.Fatal(err)
	}
	rec := ui.NewRecorder(100*time.Millisecond, nil)
	p.SetObserver(rec)
	spec := config.Pipe{Name: "orders", Source: config.Source{Type: "memory", QueueName: "orders",
		RedrivePolicy: &config.RedrivePolicy{MaxReceiveCount: 2, DeadLetterQueue: "orders-dlq"}}}
	depths, _ := ui.Queues(spec, b, nil)
	srv, err := ui.New(ui.Config{Addr: "127.0.0.1:0", Token: token, SampleEvery: 100 * time.Millisecond, DepthEvery: 100 * time.Millisecond,
		Pipes: []ui.Pipe{{Control: p, Recorder: rec, Settings: ui.Settings(spec), Depths: depths, ExecutionData: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	})
	for _, body := range []string{`{"n":1}`, `{"n":2}`, `{"n":"bad"}`} {
		if _, err := q.Send(context.Background(), memory.SendInput{Body: body,
			MessageAttributes: map[string]source.MessageAttribute{"trace": {DataType: "String", StringValue: ptr("attr-value-hidden")}}}); err != nil {
			t.Fatal(err)
		}
	}
	return &fixture{pipe: p, queue: q, server: srv, http: hs, token: token}
}

func ptr(s string) *string { return &s }

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, res.Status)
	}
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestTheJSONEndpoints(t *testing.T) {
	f := newFixture(t, "")
	t.Run("/api/pipes counts what the pipe did and reads the queue depths", func(t *testing.T) {
		var got struct{ Pipes []ui.PipeView }
		eventually(t, "2 delivered, 2 failed, 1 dead-lettered and the DLQ depth", func() bool {
			getJSON(t, f.http.URL+"/api/pipes", &got)
			p := got.Pipes[0]
			return p.Totals.Delivered == 2 && p.Totals.Failed == 2 && p.Totals.DeadLettered == 1 &&
				p.Depths != nil && p.Depths.DLQ != nil && p.Depths.DLQ.Visible == 1 && len(p.Sparklines.Received) > 0
		})
		p := got.Pipes[0]
		if p.Name != "orders" || p.State != "running" || p.Circuit != "closed" || p.Concurrency.Limit != 1000 || p.Concurrency.Current != 5 {
			t.Fatalf("row %+v", p)
		}
		if p.Totals.Received != 4 || p.OldestMessageAgeSeconds == nil || p.SampleSeconds != 0.1 {
			t.Fatalf("received %v (want 4: one message twice), oldest age %v, sample %v", p.Totals.Received, p.OldestMessageAgeSeconds, p.SampleSeconds)
		}
		if p.Depths.Queue == nil || p.Depths.Queue.Name != "orders" || p.Depths.DLQ.Name != "orders-dlq" {
			t.Fatalf("depths %+v", p.Depths)
		}
		if p.Actions.TokenSet || !p.Actions.Pause || p.Actions.Redrive {
			t.Fatalf("actions %+v: a memory pipe without a token can only be asked to pause (refused)", p.Actions)
		}
	})
	t.Run("/api/pipes/NAME has the failures, the settings and the scaling decision", func(t *testing.T) {
		var d ui.DetailView
		getJSON(t, f.http.URL+"/api/pipes/orders", &d)
		if len(d.Failures) != 2 || d.FailuresTotal != 2 || d.Failures[0].Seq != 2 || d.Failures[0].Attempts != 2 || d.Failures[1].Attempts != 1 {
			t.Fatalf("failures %+v (total %d): want 2, newest first", d.Failures, d.FailuresTotal)
		}
		fl := d.Failures[0]
		if fl.Stage != "target" || fl.Error != "target refused it" || fl.Sample != `{"n":"bad"}` || len(fl.Attributes) != 1 || fl.Attributes[0] != "trace" {
			t.Fatalf("failure %+v", fl)
		}
		if d.Scaling.Concurrency != 5 || d.Scaling.Reason == "" || !d.ExecutionData {
			t.Fatalf("scaling %+v", d.Scaling)
		}
		if len(d.Settings) == 0 || d.Settings[0].Key != "name" || d.Settings[0].Value != "orders" {
			t.Fatalf("settings %+v", d.Settings)
		}
	})
	t.Run("/api/pipes/NAME/failures lists them, values of attributes never", func(t *testing.T) {
		res, err := http.Get(f.http.URL + "/api/pipes/orders/failures")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var got struct{ Failures []ui.Failure }
		if err := json.Unmarshal(body, &got); err != nil || len(got.Failures) != 2 {
			t.Fatalf("%s: %v", body, err)
		}
		if strings.Contains(string(body), "attr-value-hidden") {
			t.Fatal("an attribute value was served")
		}
	})
	t.Run("an unknown pipe is 404", func(t *testing.T) {
		res, err := http.Get(f.http.URL + "/api/pipes/nope")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNotFound {
			t.Fatal(res.Status)
		}
	})
}

func TestThePagesRenderWithoutJavaScriptUnderAStrictCSP(t *testing.T) {
	f := newFixture(t, "")
	eventually(t, "a failure", func() bool {
		return f.pipe.Status().Started && len(fetch(t, f.http.URL+"/api/pipes/orders/failures")) > 20
	})
	for _, tc := range []struct{ path, want string }{
		{"/", `<tr data-pipe="orders">`},
		{"/pipes/orders", "Last failures"},
		{"/pipes/orders/failures/1", "target refused it"},
		{"/pipes/orders/confirm/pause", `name="csrf"`},
		{"/static/app.js", "data-api"},
		{"/static/app.css", "--accent"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			res, err := http.Get(f.http.URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK || !strings.Contains(string(body), tc.want) {
				t.Fatalf("%s: %s, want %q in\n%s", tc.path, res.Status, tc.want, body)
			}
			csp := res.Header.Get("Content-Security-Policy")
			if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
				t.Fatalf("CSP %q", csp)
			}
			if regexp.MustCompile(`<script>|<script [^>]*>[^<]`).Match(body) || strings.Contains(string(body), " onclick=") {
				t.Fatal("inline script in the page")
			}
		})
	}
}

func fetch(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

func TestActionsNeedTheTokenAndACSRFCheck(t *testing.T) {
	post := func(t *testing.T, url string, hdr map[string]string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	t.Run("without a token on the server every action is refused", func(t *testing.T) {
		f := newFixture(t, "")
		if got := post(t, f.http.URL+"/api/pipes/orders/pause", map[string]string{"Authorization": "Bearer anything"}); got != http.StatusForbidden {
			t.Fatalf("got %d, want 403", got)
		}
		if f.pipe.Status().Paused {
			t.Fatal("paused without a token")
		}
	})
	f := newFixture(t, "s3cret-token")
	api := f.http.URL + "/api/pipes/orders/pause"
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"no token is 401", nil, http.StatusUnauthorized},
		{"a wrong token is 401", map[string]string{"Authorization": "Bearer s3cret-tokeN"}, http.StatusUnauthorized},
		{"a token prefix is 401", map[string]string{"Authorization": "Bearer s3cret"}, http.StatusUnauthorized},
		{"the right token from another site is 403", map[string]string{"Authorization": "Bearer s3cret-token", "Origin": "http://evil.example"}, http.StatusForbidden},
		{"the right token from a cross-site fetch is 403", map[string]string{"Authorization": "Bearer s3cret-token", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := post(t, api, tc.hdr); got != tc.want {
				t.Fatalf("got %d, want %d", got, tc.want)
			}
			if f.pipe.Status().Paused {
				t.Fatal("the pipe was paused")
			}
		})
	}
	t.Run("the right bearer token pauses and resumes", func(t *testing.T) {
		if got := post(t, api, map[string]string{"Authorization": "Bearer s3cret-token"}); got != http.StatusAccepted {
			t.Fatalf("got %d", got)
		}
		if !f.pipe.Status().Paused {
			t.Fatal("not paused")
		}
		var v ui.PipeView
		getJSON(t, f.http.URL+"/api/pipes/orders", &v)
		if v.State != "paused" || !v.Actions.Resume {
			t.Fatalf("state %q, actions %+v", v.State, v.Actions)
		}
		if got := post(t, f.http.URL+"/api/pipes/orders/resume", map[string]string{"Authorization": "Bearer s3cret-token"}); got != http.StatusAccepted || f.pipe.Status().Paused {
			t.Fatalf("resume: %d, paused %v", got, f.pipe.Status().Paused)
		}
	})
	t.Run("a redrive of a pipe without a redriver is refused", func(t *testing.T) {
		if got := post(t, f.http.URL+"/api/pipes/orders/redrive", map[string]string{"Authorization": "Bearer s3cret-token"}); got != http.StatusConflict {
			t.Fatalf("got %d, want 409", got)
		}
	})

	// The form: the confirmation page sets the CSRF cookie and field.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	page := fetchWith(t, browser, f.http.URL+"/pipes/orders/confirm/pause")
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]{32})"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no csrf field in\n%s", page)
	}
	form := f.http.URL + "/pipes/orders/actions/pause"
	for _, tc := range []struct {
		name   string
		client *http.Client
		csrf   string
		token  string
		want   int
	}{
		{"a form without the CSRF cookie is 403", &http.Client{}, m[1], "s3cret-token", http.StatusForbidden},
		{"a form with another CSRF value is 403", browser, strings.Repeat("0", 32), "s3cret-token", http.StatusForbidden},
		{"a form with a wrong token is 401", browser, m[1], "guess", http.StatusUnauthorized},
		{"a form without a token is 401", browser, m[1], "", http.StatusUnauthorized},
		{"the confirmed form with the token pauses (303 to the pipe)", browser, m[1], "s3cret-token", http.StatusSeeOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := tc.client.PostForm(form, url.Values{"csrf": {tc.csrf}, "token": {tc.token}})
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tc.want {
				t.Fatalf("got %s, want %d\n%s", res.Status, tc.want, body)
			}
			if paused := f.pipe.Status().Paused; paused != (tc.want == http.StatusSeeOther) {
				t.Fatalf("paused: %v", paused)
			}
			if strings.Contains(string(body), "s3cret-token") {
				t.Fatal("the token was echoed")
			}
		})
	}
}

func fetchWith(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	res, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

func TestTheServerRefusesToStartOpenWithoutAToken(t *testing.T) {
	for _, tc := range []struct {
		addr, token string
		refused     bool
	}{
		{"127.0.0.1:0", "", false},
		{"localhost:0", "", false},
		{"[::1]:0", "", false},
		{"0.0.0.0:0", "", true},
		{":0", "", true},
		{"192.0.2.10:8080", "", true},
		{"0.0.0.0:0", "t", false},
	} {
		_, err := ui.New(ui.Config{Addr: tc.addr, Token: tc.token})
		if got := errors.Is(err, ui.ErrTokenNeeded); got != tc.refused {
			t.Errorf("New(%q, token %q): %v, want refused %v", tc.addr, tc.token, err, tc.refused)
		}
	}
}

func TestALoopbackServerAnswersOnlyToLoopbackHostNames(t *testing.T) {
	f := newFixture(t, "")
	req, _ := http.NewRequest(http.MethodGet, f.http.URL+"/api/pipes", nil)
	req.Host = "attacker.example:80"
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("got %s, want 421 (DNS rebinding)", res.Status)
	}
}

func TestNoSecretIsRenderedOrServed(t *testing.T) {
	const header, amqpPass, urlPass, query = "Bearer hdr-SECRET-1", "amqp-SECRET-2", "url-SECRET-3", "qry-SECRET-4"
	dir := t.TempDir()
	file := filepath.Join(dir, "p.yaml")
	yaml := `pipes:
  - name: secretive
    source:
      type: rabbitmq
      url: amqp://pipes:${AMQP_PASS}@127.0.0.1:1/
      queue: orders
    target:
      type: http
      url: http://user:${URL_PASS}@127.0.0.1:1/hook?key=${QUERY}
      headers:
        Authorization: ${API_TOKEN}
    logging:
      level: error
      include_execution_data: true
`
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"AMQP_PASS": amqpPass, "URL_PASS": urlPass, "QUERY": query, "API_TOKEN": header}
	specs, err := config.Loader{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	built, err := pipes.NewRegistry().Build(context.Background(), specs, pipes.Env{})
	if err != nil {
		t.Fatal(err)
	}
	p := built[0]
	rec := ui.NewRecorder(time.Second, ui.Secrets(specs[0]).Text)
	p.SetObserver(rec)
	// A failure whose error quotes the secrets, as a library's might.
	// A failure whose error quotes the secrets, as a library's might, and
	// as a server may echo them: base64-encoded, alone, as Basic
	// credentials, or inside a longer encoded text.
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	echoed := []string{b64("hdr-SECRET-1"), base64.RawURLEncoding.EncodeToString([]byte(header)), b64("user:" + urlPass),
		b64(amqpPass), b64(query), url.QueryEscape(b64(query))}
	rec.Failed(core.Failure{MessageID: "m1", Stage: "target", Err: errors.New("POST http://user:" + urlPass + "@127.0.0.1:1/hook with " + header + " and " + amqpPass +
		"; echoed " + strings.Join(echoed, ", ") + "; in a document " + b64(`{"token":"hdr-SECRET-1"}`)), At: time.Now()})
	depths, redriver := ui.Queues(specs[0], nil, nil)
	srv, err := ui.New(ui.Config{Addr: "127.0.0.1:0", Token: "tok", DepthEvery: time.Second,
		Pipes: []ui.Pipe{{Control: p, Recorder: rec, Settings: ui.Settings(specs[0]), Scrub: ui.Secrets(specs[0]).Text, Depths: depths, Redriver: redriver}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	defer srv.Close()
	check := func(path string) {
		t.Helper()
		body := fetch(t, hs.URL+path)
		for _, s := range append([]string{header, "hdr-SECRET", amqpPass, urlPass, query, b64(`{"token":"hdr-SECRET-1"}`)[16:28]}, echoed...) {
			if strings.Contains(body, s) {
				t.Fatalf("%s serves the secret %q:\n%s", path, s, body)
			}
		}
	}
	for _, path := range []string{"/", "/pipes/secretive", "/pipes/secretive/failures/1", "/pipes/secretive/confirm/redrive",
		"/api/pipes", "/api/pipes/secretive", "/api/pipes/secretive/failures", "/api/pipes/secretive/series",
		"/pipes/secretive/dlq", "/api/pipes/secretive/dlq", "/pipes/secretive/tail"} { // the DLQ browser's dial error names the broker, not the password
		check(path)
	}
	// The depth read fails (nothing listens on port 1): its error is
	// shown, scrubbed, on the next requests.
	eventually(t, "the failed depth read", func() bool {
		var v ui.PipeView
		getJSON(t, hs.URL+"/api/pipes/secretive", &v)
		return v.DepthsError != ""
	})
	check("/api/pipes/secretive")
	check("/pipes/secretive")
	// The failure groups (their example is the whole error) are scrubbed.
	var d ui.DetailView
	getJSON(t, hs.URL+"/api/pipes/secretive", &d)
	if len(d.Groups) != 1 || !strings.Contains(d.Groups[0].Example, "127.0.0.1:1/hook") {
		t.Errorf("the failure is not grouped with its scrubbed text: %+v", d.Groups)
	}
	body := fetch(t, hs.URL+"/api/pipes/secretive")
	for _, want := range []string{`"target.headers.Authorization","value":"` + ui.Masked, "amqp://pipes:xxxxx@127.0.0.1:1/", "http://user:xxxxx@127.0.0.1:1/hook?key=xxxxx"} {
		if !strings.Contains(body, want) {
			t.Errorf("the masked settings lack %q:\n%s", want, body)
		}
	}
}

// TestAPipeWhoseSourceFailsIsNotReadyWithTheReason runs an sqs pipe whose
// endpoint refuses connections (nothing listens on 127.0.0.1:1): no SQS
// server behaviour is relied on.
func TestAPipeWhoseSourceFailsIsNotReadyWithTheReason(t *testing.T) {
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "AKIDPIPESTEST", "AWS_SECRET_ACCESS_KEY": "pipes-test-secret",
		"AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"} {
		t.Setenv(k, v)
	}
	file := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(file, []byte(`
name: down
source:
  type: sqs
  queue_url: http://127.0.0.1:1/000000000000/orders
  endpoint: http://127.0.0.1:1
target:
  type: stdout
`), 0o600); err != nil {
		t.Fatal(err)
	}
	specs, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	built, err := pipes.NewRegistry().Build(context.Background(), specs, pipes.Env{Stdout: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	p := built[0]
	rec := ui.NewRecorder(time.Second, nil)
	p.SetObserver(rec)
	srv, err := ui.New(ui.Config{Addr: "127.0.0.1:0", Pipes: []ui.Pipe{{Control: p, Recorder: rec}}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	var v ui.PipeView
	eventually(t, "the pipe not ready with a reason", func() bool {
		getJSON(t, hs.URL+"/api/pipes/down", &v)
		return v.State == "not ready" && v.Reason != ""
	})
	if !strings.Contains(v.Reason, "127.0.0.1:1") {
		t.Fatalf("reason %q does not say what failed", v.Reason)
	}
	if v.Health.Level != "bad" || v.Health.Word != "not ready" {
		t.Errorf("health %+v, want bad: not ready", v.Health)
	}
	// Since when: the first sample that saw it not ready (the server
	// samples once started).
	addr, err := srv.Start()
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the not-ready health dated", func() bool {
		getJSON(t, "http://"+addr+"/api/pipes/down", &v)
		return v.Health.Since != nil && !v.Health.Since.After(time.Now())
	})
	if page := fetch(t, hs.URL+"/"); !strings.Contains(page, `data-state="not ready"`) {
		t.Fatal("the overview does not show the state")
	}
}

// countingDepther counts the reads of a real Depther.
type countingDepther struct {
	ui.Depther
	n atomic.Int64
}

func (c *countingDepther) Depths(ctx context.Context) (ui.Depths, error) {
	c.n.Add(1)
	return c.Depther.Depths(ctx)
}

func TestDepthsAreReadOnlyWhileThePageIsReadAndAtMostEvery30s(t *testing.T) {
	b := memory.NewBroker()
	q, err := b.Queue("orders", memory.Options{WaitTime: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipe.New(pipe.Options{Name: "orders", Source: q, Target: failBad{}})
	if err != nil {
		t.Fatal(err)
	}
	spec := config.Pipe{Name: "orders", Source: config.Source{Type: "memory", QueueName: "orders"}}
	real, _ := ui.Queues(spec, b, nil)
	c := &countingDepther{Depther: real}
	rec := ui.NewRecorder(50*time.Millisecond, nil)
	srv, err := ui.New(ui.Config{Addr: "127.0.0.1:0", SampleEvery: 50 * time.Millisecond, DepthEvery: time.Hour, // capped at 30 s
		Pipes: []ui.Pipe{{Control: p, Recorder: rec, Depths: c}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	time.Sleep(200 * time.Millisecond) // four samples: the sampler reads no depth
	if n := c.n.Load(); n != 0 {
		t.Fatalf("%d depth reads before any request, want 0", n)
	}
	for range 5 {
		fetch(t, hs.URL+"/")
		fetch(t, hs.URL+"/api/pipes")
	}
	var v ui.PipeView
	eventually(t, "the depths read", func() bool {
		getJSON(t, hs.URL+"/api/pipes/orders", &v)
		return v.Depths != nil
	})
	if n := c.n.Load(); n != 1 {
		t.Fatalf("%d depth reads for 11 requests within 30 s, want 1", n)
	}
}

func TestOffLoopbackEveryRequestNeedsTheToken(t *testing.T) {
	b := memory.NewBroker()
	q, err := b.Queue("orders", memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipe.New(pipe.Options{Name: "orders", Source: q, Target: failBad{}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ui.New(ui.Config{Addr: "0.0.0.0:0", Token: "lan-token", Pipes: []ui.Pipe{{Control: p, Recorder: ui.NewRecorder(time.Second, nil)}}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	for _, tc := range []struct {
		name string
		auth func(*http.Request)
		want int
	}{
		{"no token is 401 with a Basic challenge", func(*http.Request) {}, http.StatusUnauthorized},
		{"a wrong Bearer token is 401", func(r *http.Request) { r.Header.Set("Authorization", "Bearer nope") }, http.StatusUnauthorized},
		{"a wrong Basic password is 401", func(r *http.Request) { r.SetBasicAuth("me", "nope") }, http.StatusUnauthorized},
		{"the Bearer token reads", func(r *http.Request) { r.Header.Set("Authorization", "Bearer lan-token") }, http.StatusOK},
		{"the token as Basic password reads", func(r *http.Request) { r.SetBasicAuth("anyone", "lan-token") }, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/", "/api/pipes", "/static/app.js"} {
				req, _ := http.NewRequest(http.MethodGet, hs.URL+path, nil)
				tc.auth(req)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				res.Body.Close()
				if res.StatusCode != tc.want {
					t.Fatalf("%s: %s, want %d", path, res.Status, tc.want)
				}
				if tc.want == http.StatusUnauthorized && !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Basic ") {
					t.Fatalf("%s: no Basic challenge", path)
				}
			}
		})
	}
}

// TestTheStateShowsDrainingAndTheOpenCircuit runs pipes on memory queues
// (in-process, no server): one whose target is down (every call fails,
// so the circuit breaker opens after three batches) and one stopped while
// its slow batch is at the target (draining).
func TestTheStateShowsDrainingAndTheOpenCircuit(t *testing.T) {
	b := memory.NewBroker()
	newPipe := func(name string, target pipe.Target) (*pipe.Pipe, *memory.Queue) {
		q, err := b.Queue(name, memory.Options{WaitTime: 50 * time.Millisecond, VisibilityTimeout: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		p, err := pipe.New(pipe.Options{Name: name, Source: q, Target: target, BatchSize: 1, ShutdownTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return p, q
	}
	down, downQ := newPipe("down", pipe.TargetFunc(func(context.Context, []*pipe.Event) (pipe.Result, error) {
		return pipe.Result{}, errors.New("connection refused")
	}))
	release := make(chan struct{})
	slow, slowQ := newPipe("slow", pipe.TargetFunc(func(ctx context.Context, _ []*pipe.Event) (pipe.Result, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return pipe.Result{}, nil
	}))
	var uiPipes []ui.Pipe
	for _, p := range []*pipe.Pipe{down, slow} {
		rec := ui.NewRecorder(time.Second, nil)
		p.SetObserver(rec)
		uiPipes = append(uiPipes, ui.Pipe{Control: p, Recorder: rec})
	}
	srv, err := ui.New(ui.Config{Addr: "127.0.0.1:0", Pipes: uiPipes})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	for _, q := range []*memory.Queue{downQ, slowQ} {
		for _, body := range []string{`{"n":1}`, `{"n":2}`, `{"n":3}`} {
			if _, err := q.Send(context.Background(), memory.SendInput{Body: body}); err != nil {
				t.Fatal(err)
			}
		}
	}
	downCtx, stopDown := context.WithCancel(context.Background())
	slowCtx, stopSlow := context.WithCancel(context.Background())
	var runs sync.WaitGroup
	runs.Go(func() { _ = down.Run(downCtx) })
	runs.Go(func() { _ = slow.Run(slowCtx) })
	defer func() { stopDown(); stopSlow(); close(release); runs.Wait() }()

	var d ui.DetailView
	eventually(t, "the circuit open", func() bool {
		getJSON(t, hs.URL+"/api/pipes/down", &d)
		return d.Circuit == "open"
	})
	// Its own state, as /status's target_failing: the pipe can still poll
	// (/readyz counts it ready), so not "not ready".
	if d.State != "circuit open" || !strings.Contains(d.Reason, "connection refused") || !strings.Contains(d.Scaling.Reason, "circuit open") {
		t.Fatalf("state %q, reason %q, scaling %q", d.State, d.Reason, d.Scaling.Reason)
	}
	if page := fetch(t, hs.URL+"/"); !strings.Contains(page, `data-state="circuit open">circuit open</span>`) {
		t.Errorf("the overview does not name the state in words:\n%s", page)
	}
	// Its health is bad, in the state's word (not "failing" too: the
	// open circuit says it).
	if d.Health.Level != "bad" || d.Health.Word != "circuit open" {
		t.Errorf("health %+v, want bad: circuit open", d.Health)
	}
	addr, err := srv.Start() // the server samples once started
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the open circuit's health dated", func() bool {
		getJSON(t, "http://"+addr+"/api/pipes/down", &d)
		return d.Health.Since != nil && !d.Health.Since.After(time.Now())
	})
	eventually(t, "the 3 slow batches at the target", func() bool { return slow.Status().InFlight == 3 })
	stopSlow()
	var v ui.PipeView
	eventually(t, "the slow pipe draining", func() bool {
		getJSON(t, hs.URL+"/api/pipes/slow", &v)
		return v.State == "draining"
	})
	if v.Concurrency.InFlight != 3 || v.Actions.Pause {
		t.Fatalf("a draining pipe: %+v (its 3 batches of one message in flight, no pause offered)", v)
	}
	if v.Health.Level != "warn" || v.Health.Word != "draining" {
		t.Errorf("health %+v, want warn: draining", v.Health)
	}
	var all struct{ Summary ui.Summary }
	getJSON(t, hs.URL+"/api/pipes", &all)
	if all.Summary.Pipes != 2 || all.Summary.Unhealthy != 1 {
		t.Errorf("summary %+v, want 2 pipes, 1 unhealthy (the open circuit; draining is a warning)", all.Summary)
	}
}
