package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
)

// TestDLQBrowserAndTailInABrowser runs `pipes run --ui --ui-tail` on a
// pipe with a filter reading the local SQS server, whose target fails some
// items into a dead-letter queue, and drives the DLQ browser and the live
// tail in headless Chromium: the browser lists the dead-lettered messages
// and redrives a selected one (the DLQ depth drops by one), and the tail
// shows a record passing the filter. It runs on fauxqs, relying on its
// receive counts (maxReceiveCount 2 dead-letters a message after exactly
// two failed receives), its message ids staying the same from receive to
// receive, and its approximate counts (in-flight messages not counted as
// visible).
func TestDLQBrowserAndTailInABrowser(t *testing.T) {
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
filter:
  patterns:
    - body:
        kind: [order]
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
	const token, targetKey = "ui-token-for-the-ops-test", "Bearer target-key-never-shown"
	t.Setenv("PIPES_UI_TOKEN", token)
	t.Setenv("PIPES_TEST_TARGET_KEY", targetKey)
	bad := []string{`{"kind":"order","order":"bad-1"}`, `{"kind":"order","order":"bad-2"}`, `{"kind":"order","order":"bad-3"}`}
	sqstest.SendBodies(t, client, queueURL, bad...)

	p := startRunner(t, file, "--ui", "127.0.0.1:0", "--ui-tail")
	base := pageURL(t, p)
	waitUntil(t, 60*time.Second, "the 3 bad messages in the DLQ", func() bool {
		visible, _ := sqstest.Count(t, client, dlqURL)
		return visible == len(bad)
	})

	// Orders and other events keep coming while the browser watches.
	defer every(300*time.Millisecond, func(i int) {
		sqstest.SendBodies(t, client, queueURL, fmt.Sprintf(`{"kind":"order","order":"more-%d"}`, i), fmt.Sprintf(`{"kind":"other","n":%d}`, i))
	})()

	artifacts := artifactsDir(t)
	cmd := exec.Command(node, "../../test/browser/ops_pages.mjs")
	cmd.Env = append(os.Environ(), "PIPES_UI_URL="+base, "PIPES_PIPE=orders", fmt.Sprintf("PIPES_DLQ_COUNT=%d", len(bad)),
		"PIPES_ARTIFACTS="+artifacts, "PIPES_PLAYWRIGHT="+playwright, "PIPES_CHROMIUM="+chromiumPath)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("the browser script failed: %v\n%s\nrunner:\n%s", err, errb.String(), p.stderr)
	}
	t.Logf("browser: %s", out.String())
	var found struct {
		Listed                      int
		Reasons                     []string
		Previews                    []string
		DLQBefore                   string
		Overflow                    float64
		TailOverflow, PhoneOverflow float64
		Picked                      string
		Moved                       int
		DLQAfter                    string
		ListedAfter                 int
		PickedStill                 bool `json:"pickedStillListed"`
		Tail                        []struct{ Stage, Detail, Sample string }
		A11y                        struct {
			Problems      []string
			WorstContrast float64
		}
		CSPErrors []string
	}
	if err := json.Unmarshal(out.Bytes(), &found); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	tail := make([]string, len(found.Tail))
	for i, e := range found.Tail {
		tail[i] = strings.TrimSpace(e.Stage + " " + e.Detail)
	}
	checks := []struct {
		what string
		ok   bool
	}{
		{"the DLQ browser lists the 3 dead-lettered messages", found.Listed == len(bad)},
		// The queue's redrive policy moved them, keeping their ids: each
		// row says the last failure pipes saw of it (the partial answer).
		{"each says the last failure pipes saw of it, the partial answer", len(found.Reasons) == len(bad) && !slices.ContainsFunc(found.Reasons, func(r string) bool {
			return !strings.Contains(r, "the last failure pipes saw: at target: ")
		})},
		{"each has its body preview", len(found.Previews) == len(bad) && strings.Contains(strings.Join(found.Previews, " "), "bad-")},
		{"the DLQ depth was shown", strings.HasPrefix(found.DLQBefore, fmt.Sprint(len(bad))+" ")},
		{"the pages do not scroll sideways at 1280 px", found.Overflow <= 0 && found.TailOverflow <= 0},
		{"nor on a phone", found.PhoneOverflow <= 0},
		{"the redrive moved the one selected", found.Moved == 1},
		{"the DLQ depth dropped by one", strings.HasPrefix(found.DLQAfter, fmt.Sprint(len(bad)-1)+" ")},
		{"the list again holds the others, not the one moved", found.ListedAfter == len(bad)-1 && !found.PickedStill},
		{"the tail follows a record through the filter to the target", len(tail) >= 3 && tail[0] == "received" && tail[1] == "filter passed" && tail[2] == "target"},
		{"the tail's receive has the record's sample", len(found.Tail) > 0 && strings.Contains(found.Tail[0].Sample, `"kind":"order"`)},
		{"the tail's target sample is the record without its receipt handle", len(found.Tail) > 2 &&
			strings.Contains(found.Tail[2].Sample, `"messageId"`) && !strings.Contains(found.Tail[2].Sample, "receiptHandle")},
		{"no accessibility problem", len(found.A11y.Problems) == 0 && found.A11y.WorstContrast >= 4.5},
		{"no CSP violation or script error", len(found.CSPErrors) == 0},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: no (%+v)", c.what, found)
		}
	}
	if v, _ := sqstest.Count(t, client, dlqURL); v != len(bad)-1 {
		t.Errorf("the DLQ holds %d, want %d", v, len(bad)-1)
	}
	for _, f := range []string{"dlq.png", "dlq-phone.png", "dlq-redriven.png", "tail.png"} {
		if st, err := os.Stat(filepath.Join(artifacts, f)); err != nil || st.Size() == 0 {
			t.Errorf("screenshot %s: %v", f, err)
		}
	}
	if dst := os.Getenv("PIPES_UPDATE_SCREENSHOT"); dst != "" {
		// The README shows the DLQ browser and the live tail beside the
		// status page's pictures (TestStatusPageInABrowser).
		copyFile(t, filepath.Join(artifacts, "dlq.png"), strings.TrimSuffix(dst, ".png")+"-dlq.png")
		copyFile(t, filepath.Join(artifacts, "tail.png"), strings.TrimSuffix(dst, ".png")+"-tail.png")
	}
	// Neither the pages nor the tail's stream serve the target's key.
	for _, path := range []string{"/pipes/orders/dlq", "/api/pipes/orders/dlq", "/pipes/orders/tail"} {
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
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/pipes/orders/tail", nil)
	if res, err := http.DefaultClient.Do(req); err == nil {
		sc := bufio.NewScanner(res.Body)
		events := 0
		for sc.Scan() {
			if strings.Contains(sc.Text(), "target-key-never-shown") {
				t.Errorf("the tail streams the target's key: %s", sc.Text())
			}
			if strings.Contains(sc.Text(), "receiptHandle") {
				t.Errorf("the tail streams a receipt handle: %s", sc.Text())
			}
			if strings.HasPrefix(sc.Text(), "data: ") {
				events++
			}
		}
		res.Body.Close()
		if events > 40 {
			t.Errorf("%d tail events in 3 s, want at most 10 a second (and a burst of 10)", events)
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

// pageURL is the status page's URL, from the runner's log.
func pageURL(t *testing.T, p *proc) string {
	t.Helper()
	m := regexp.MustCompile(`msg="serving the status page" addr=(\S+)`).FindStringSubmatch(p.stderr.String())
	if m == nil {
		t.Fatalf("no status page address in the log:\n%s", p.stderr)
	}
	return "http://" + m[1]
}

// every calls fn(0), fn(1), … every d, in a goroutine, until the
// returned stop is called (which waits for it).
func every(d time.Duration, fn func(i int)) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-t.C:
				fn(i)
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
