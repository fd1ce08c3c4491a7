package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/sqstest"
	"github.com/pipesproject/pipes/internal/testenv"
)

// chromiumPath is Debian's chromium, which .ci/run installs.
const chromiumPath = "/usr/bin/chromium"

// browserTools returns node and the package.json of .ci/browser (where
// playwright-core is installed), skipping the test when one is missing,
// with one line saying what provides it, or failing it under CI=true.
func browserTools(t *testing.T) (node, playwright string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, testenv.Service{Name: "Node.js (for the status page's browser test)",
			Fix: "install it with `apt-get install nodejs npm`"}, err)
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		testenv.Missing(t, testenv.Service{Name: "chromium (for the status page's browser test)", At: chromiumPath,
			Fix: "install it with `apt-get install chromium`"}, nil)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	playwright = filepath.Join(root, ".ci/browser/package.json")
	if _, err := os.Stat(filepath.Join(root, ".ci/browser/node_modules/playwright-core/package.json")); err != nil {
		testenv.Missing(t, testenv.Service{Name: "playwright-core (for the status page's browser test)", At: ".ci/browser/node_modules",
			Fix: "install it with `cd .ci/browser && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci`"}, nil)
	}
	return node, playwright
}

// partialTarget is an HTTP target that fails, by a partial batch answer,
// the records whose body holds "bad", unless they were redriven (they
// carry pipes-redriven-at): after a redrive they are taken.
type partialTarget struct {
	*httptest.Server
	mu        sync.Mutex
	delivered map[string]int
}

func newPartialTarget(t *testing.T) *partialTarget {
	p := &partialTarget{delivered: map[string]int{}}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var batch []struct {
			MessageID         string         `json:"messageId"`
			Body              string         `json:"body"`
			MessageAttributes map[string]any `json:"messageAttributes"`
		}
		if err := json.NewDecoder(r.Body).Decode(&batch); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		type failure struct {
			ID string `json:"itemIdentifier"`
		}
		res := struct {
			Failures []failure `json:"batchItemFailures"`
		}{Failures: []failure{}}
		p.mu.Lock()
		for _, rec := range batch {
			if _, redriven := rec.MessageAttributes["pipes-redriven-at"]; strings.Contains(rec.Body, "bad") && !redriven {
				res.Failures = append(res.Failures, failure{rec.MessageID})
				continue
			}
			p.delivered[rec.Body]++
		}
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(res)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *partialTarget) got(body string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.delivered[body]
}

// artifactsDir is $PIPES_TEST_ARTIFACTS/<test> when set (kept after the
// test), else a temporary folder.
func artifactsDir(t *testing.T) string {
	if d := os.Getenv("PIPES_TEST_ARTIFACTS"); d != "" {
		dir := filepath.Join(d, t.Name())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return t.TempDir()
}

// TestStatusPageInABrowser runs `pipes run --ui` on a pipe reading the
// local SQS server, with a target failing some items and a dead-letter
// queue, and drives the page in headless Chromium: counts move, a failure
// opens, an action without the token is refused, the DLQ is redriven
// after a confirmation and the messages are moved, polling is paused and
// resumed. It runs on fauxqs,
// relying on its receive counts (maxReceiveCount 2 dead-letters a message
// after exactly two failed receives; local-aws-sqs would count the
// heartbeat's visibility changes too) and its approximate counts (it does
// not count in-flight messages as visible, so the DLQ depth reads 0 once
// the redrive has moved everything).
func TestStatusPageInABrowser(t *testing.T) {
	node, playwright := browserTools(t)
	endpoint := sqstest.EndpointOf(t, sqstest.Fauxqs)
	client := sqstest.ClientOf(t, sqstest.Fauxqs)
	queueURL, dlqURL := sqstest.CreateQueue(t, client, sqstest.QueueOptions{VisibilityTimeout: 2 * time.Second, MaxReceiveCount: 2})
	target := newPartialTarget(t)
	file := filepath.Join(t.TempDir(), "pipe.yaml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(`
name: orders
source:
  type: sqs
  queue_url: %s
  endpoint: %s
  region: us-east-1
  wait_time: 1s
target:
  type: http
  url: %s
  headers:
    Authorization: ${PIPES_TEST_TARGET_KEY}
logging:
  level: error
  include_execution_data: true
`, queueURL, endpoint, target.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	// A second pipe with a long name (40 characters) whose source cannot
	// be reached: the overview still fits, with its reason.
	down := filepath.Join(t.TempDir(), "down.yaml")
	if err := os.WriteFile(down, []byte(`
name: `+longPipeName+`
source:
  type: sqs
  queue_url: http://127.0.0.1:1/000000000000/notifications
  endpoint: http://127.0.0.1:1
  region: us-east-1
target:
  type: stdout
logging:
  level: error
`), 0o644); err != nil {
		t.Fatal(err)
	}
	const token, targetKey = "ui-token-for-the-test", "Bearer target-key-never-shown"
	t.Setenv("PIPES_UI_TOKEN", token)
	t.Setenv("PIPES_TEST_TARGET_KEY", targetKey)
	bad := []string{`{"order":"bad-1"}`, `{"order":"bad-2"}`, `{"order":"bad-3"}`}
	sqstest.SendBodies(t, client, queueURL, append([]string{`{"order":1}`, `{"order":2}`}, bad...)...)

	// Sampled every second, the charts have their points in seconds.
	p := startRunner(t, file, "-f", down, "--ui", "127.0.0.1:0", "--ui-sample-interval", "1s")
	m := regexp.MustCompile(`msg="serving the status page" addr=(\S+)`).FindStringSubmatch(p.stderr.String())
	if m == nil {
		t.Fatalf("no status page address in the log:\n%s", p.stderr)
	}
	base := "http://" + m[1]
	waitUntil(t, 60*time.Second, "the 3 bad messages in the DLQ", func() bool {
		visible, _ := sqstest.Count(t, client, dlqURL)
		return visible == len(bad)
	})

	// More messages keep coming while the browser watches.
	stop := make(chan struct{})
	var feeder sync.WaitGroup
	feeder.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
				sqstest.SendBodies(t, client, queueURL, fmt.Sprintf(`{"order":"more-%d"}`, i))
			}
		}
	})
	defer func() { close(stop); feeder.Wait() }()

	t.Run("an action without the token is refused", func(t *testing.T) {
		for _, auth := range []string{"", "Bearer wrong"} {
			req, _ := http.NewRequest(http.MethodPost, base+"/api/pipes/orders/redrive", nil)
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusUnauthorized {
				t.Fatalf("Authorization %q: %s, want 401", auth, res.Status)
			}
		}
		if visible, _ := sqstest.Count(t, client, dlqURL); visible != len(bad) {
			t.Fatalf("the DLQ holds %d, want %d: something moved", visible, len(bad))
		}
	})

	artifacts := artifactsDir(t)
	cmd := exec.Command(node, "../../test/browser/status_page.mjs")
	cmd.Env = append(os.Environ(), "PIPES_UI_URL="+base, "PIPES_PIPE=orders", "PIPES_DOWN_PIPE="+longPipeName,
		fmt.Sprintf("PIPES_DLQ_COUNT=%d", len(bad)),
		"PIPES_ARTIFACTS="+artifacts, "PIPES_PLAYWRIGHT="+playwright, "PIPES_CHROMIUM="+chromiumPath)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("the browser script failed: %v\n%s\nrunner:\n%s", err, errb.String(), p.stderr)
	}
	t.Logf("browser: %s", out.String())
	var found struct {
		ReceivedBefore, ReceivedAfter float64
		State                         string
		Down                          struct {
			State, Word, Level, Reason string
			Names                      map[string]int // the long name's lines, by viewport width
		}
		A11y struct {
			Problems      []string
			WorstContrast float64
		}
		PhoneOverflow float64
		Overflow      map[string]struct {
			Scroll, Spill float64
			BrokenNames   []string
		}
		Health struct {
			Word, Level string
			RowMarked   bool
		}
		Summary        map[string]string
		VisibleColumns []string
		Charts         []struct {
			Chart          string
			Points, Canvas int
			// Nonnull counts each series' measured (not null) values.
			Nonnull map[string]int
		}
		Readout, Window string
		Flow            []struct {
			Step        string
			In, Stopped float64
		}
		Groups []struct {
			Count                       int
			Stage, Error, Example, Link string
		}
		FailuresTotal int
		GroupOpen     bool
		ErrorWrap     bool
		Failure       struct{ Error, ID, Sample string }
		NoToken       int
		DLQBefore     string
		ConfirmLabels bool
		WrongToken    string
		Moved         int
		DLQAfter      string
		Pause, Resume string
		CSPErrors     []string
	}
	if err := json.Unmarshal(out.Bytes(), &found); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	checks := []struct {
		what string
		ok   bool
	}{
		{"the received count moved", found.ReceivedAfter > found.ReceivedBefore},
		{"the pipe is running", found.State == "running"},
		{"no accessibility problem", len(found.A11y.Problems) == 0 && found.A11y.WorstContrast >= 4.5},
		{"the phone view does not scroll sideways", found.PhoneOverflow <= 0},
		{"the failure names the partial answer and has the sample", strings.Contains(found.Failure.Error, "batchItemFailures") && found.Failure.ID != "" && strings.Contains(found.Failure.Sample, "bad-")},
		{"the page's fetch without the token is refused", found.NoToken == http.StatusUnauthorized},
		{"the DLQ depth was shown", strings.HasPrefix(found.DLQBefore, fmt.Sprint(len(bad))+" ")},
		{"every input of the confirmation has a label", found.ConfirmLabels},
		{"a wrong token is refused", strings.Contains(found.WrongToken, "wrong or missing token")},
		{"the redrive moved the 3", found.Moved == len(bad)},
		{"the DLQ depth went to 0", strings.HasPrefix(found.DLQAfter, "0 ")},
		{"pausing shows the pipe paused", found.Pause == "paused"},
		{"resuming shows it running", found.Resume == "running"},
		{"no CSP violation or script error", len(found.CSPErrors) == 0},
		{"the unreachable pipe is not ready, in red, with its reason", found.Down.State == "not ready" && found.Down.Word == "not ready" &&
			found.Down.Level == "bad" && strings.Contains(found.Down.Reason, "127.0.0.1:1")},
		{"the long name is on one line at 1280 px (on a phone it may wrap after a hyphen: overflow's brokenNames)", found.Down.Names["1280"] == 1},
	}
	checks = append(checks, dashboardChecks(found.Overflow, found.Health.Word, found.Health.Level, found.Health.RowMarked,
		found.VisibleColumns, found.Summary, found.Readout, found.Window, found.FailuresTotal, found.GroupOpen)...)
	// Each chart is drawn with measured values, not just timestamps: every
	// rate and the concurrency at each of at least 5 samples, the depths
	// read at least once (on opening the overview; then every 30 s), the
	// latency of at least one interval with a batch.
	least := map[string]map[string]int{
		"rates":       {"received": 5, "delivered": 5, "filtered": 5, "failed": 5, "deadLettered": 5},
		"depths":      {"queue": 1, "dlq": 1},
		"concurrency": {"concurrency": 5, "inFlight": 5},
		"latency":     {"p50Ms": 1, "p99Ms": 1},
	}
	charts := map[string]bool{}
	for _, c := range found.Charts {
		charts[c.Chart] = true
		ok := c.Canvas > 0 && c.Points >= 5 && len(least[c.Chart]) > 0
		for series, n := range least[c.Chart] {
			ok = ok && c.Nonnull[series] >= n
		}
		checks = append(checks, struct {
			what string
			ok   bool
		}{fmt.Sprintf("the %s chart is drawn with measured values (at least %v)", c.Chart, least[c.Chart]), ok})
	}
	checks = append(checks, struct {
		what string
		ok   bool
	}{"the four charts are there", len(charts) == len(least)})
	// Every bad message failed at the target twice (maxReceiveCount 2):
	// one kind, counted 6 times, its ids normalised, its example linked.
	groupsOK := len(found.Groups) == 1 && found.Groups[0].Count == 2*len(bad) && found.Groups[0].Stage == "target" &&
		found.Groups[0].Count == found.FailuresTotal && strings.Contains(found.Groups[0].Error, "batchItemFailures") &&
		strings.Contains(found.Groups[0].Link, "/pipes/orders/failures/")
	checks = append(checks, struct {
		what string
		ok   bool
	}{"the failures are one group of 6 at the target", groupsOK && found.ErrorWrap})
	flowOK := len(found.Flow) >= 5 && found.Flow[0].Step == "source" && found.Flow[0].In > 0
	for _, f := range found.Flow {
		if f.Step == "target" && f.Stopped != float64(2*len(bad)) {
			flowOK = false
		}
		if f.Step == "dead-letter" && f.In != float64(len(bad)) {
			flowOK = false
		}
	}
	checks = append(checks, struct {
		what string
		ok   bool
	}{"the flow counts 6 stopped at the target and 3 dead-lettered", flowOK})
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: no (%+v)", c.what, found)
		}
	}
	waitUntil(t, 30*time.Second, "the redriven messages delivered", func() bool {
		for _, b := range bad {
			if target.got(b) != 1 {
				return false
			}
		}
		return true
	})
	if visible, inflight := sqstest.Count(t, client, dlqURL); visible+inflight != 0 {
		t.Errorf("the DLQ still holds %d visible, %d in flight", visible, inflight)
	}
	for _, f := range []string{"overview.png", "overview-phone.png", "failure.png", "confirm.png", "detail.png",
		"detail-top.png", "detail-phone.png", "flow.png", "charts.png", "failures-grouped.png"} {
		if st, err := os.Stat(filepath.Join(artifacts, f)); err != nil || st.Size() == 0 {
			t.Errorf("screenshot %s: %v", f, err)
		}
	}
	if dst := os.Getenv("PIPES_UPDATE_SCREENSHOT"); dst != "" {
		// The README shows the overview and the top of the detail view.
		copyFile(t, filepath.Join(artifacts, "detail-top.png"), dst)
		copyFile(t, filepath.Join(artifacts, "overview.png"), strings.TrimSuffix(dst, ".png")+"-overview.png")
	}
	// The pages and the API never served the target's key.
	for _, path := range []string{"/", "/pipes/orders", "/api/pipes", "/api/pipes/orders", "/api/pipes/orders/failures"} {
		res, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if strings.Contains(string(body), "target-key-never-shown") {
			t.Errorf("%s serves the target's key", path)
		}
	}
	if strings.Contains(p.stderr.String(), "target-key-never-shown") || strings.Contains(p.stderr.String(), token) {
		t.Error("the log shows a secret")
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.wait(); err != nil {
		t.Fatalf("runner exit: %v\n%s", err, p.stderr)
	}
}

// longPipeName is the status page browser test's second pipe: 40
// characters, that the overview shows unbroken.
const longPipeName = "customer-notifications-eu-west-1-replica"

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// dashboardChecks are the browser test's checks of the overview that fits
// and of the detail view's charts and failure groups.
func dashboardChecks(overflow map[string]struct {
	Scroll, Spill float64
	BrokenNames   []string
}, word, level string, rowMarked bool, columns []string, summary map[string]string, readout, window string,
	failuresTotal int, groupOpen bool) []struct {
	what string
	ok   bool
} {
	type check = struct {
		what string
		ok   bool
	}
	var out []check
	for _, where := range []string{"overview 1280", "overview 390", "detail 1280", "detail 390", "failure 1280", "confirm 1280"} {
		o, ok := overflow[where]
		out = append(out, check{where + ": no sideways scroll, no table past the page's margin, no name broken", ok && o.Scroll <= 0 && o.Spill <= 1 && len(o.BrokenNames) == 0})
	}
	want := []string{"Pipe", "State", "Throughput", "Failures", "Queue depth", "DLQ depth", "Oldest message"}
	out = append(out,
		check{"every column of the overview is in view at 1280 px", slices.Equal(columns, want)},
		check{"the failing pipe says so, in red, its row marked", strings.Contains(word, "failing") && level == "bad" && rowMarked},
		check{"the summary counts the failures and both pipes, both unhealthy", summary["totals.failed"] == fmt.Sprint(failuresTotal) &&
			summary["pipes"] == "2" && summary["unhealthy"] == "2"},
		check{"the hover readout names the series with units", strings.Contains(readout, "received") && strings.Contains(readout, "msg/s")},
		check{"the charts say their window", strings.Contains(window, "sampl") || strings.Contains(window, "15 minutes")},
		check{"a group's full error opens", groupOpen},
	)
	return out
}
