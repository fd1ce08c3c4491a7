package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/internal/sqstest"
)

// bodies is an HTTP target that keeps the bodies it got, by path.
type bodies struct {
	mu  sync.Mutex
	got map[string][]string
}

func newBodies(t *testing.T) (*bodies, string) {
	b := &bodies{got: map[string][]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		b.mu.Lock()
		b.got[r.URL.Path] = append(b.got[r.URL.Path], strings.TrimSpace(string(data)))
		b.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return b, srv.URL
}

func (b *bodies) has(path, body string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, g := range b.got[path] {
		if strings.ReplaceAll(g, " ", "") == body {
			return true
		}
	}
	return false
}

// reloadFile writes a two-pipe file: a and b read their queues and send
// {"v":V,"n":...} to /a and /b; va and vb are the versions in their input
// templates, extra goes into pipe a's source.
func reloadFile(t *testing.T, file, endpoint, qa, qb, target string, va, vb int, header, extra string) {
	t.Helper()
	pipeDef := func(name, queue string, v int, more string) string {
		return fmt.Sprintf(`  - name: %s
    source:
      type: sqs
      queue_url: %s
      endpoint: %s
      region: us-east-1
      wait_time: 1s
%s    target:
      type: http
      url: %s/%s
      batch: false
      input_template: '{"v": %d, "n": <$.body.n>}'
`, name, queue, endpoint, more, target, name, v)
	}
	content := header + "pipes:\n" + pipeDef("a", qa, va, extra) + pipeDef("b", qb, vb, "")
	if err := os.WriteFile(file+".tmp", []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(file+".tmp", file); err != nil {
		t.Fatal(err)
	}
}

// A file changed under a running process (local-aws-sqs: send, long-poll
// receive, delete): SIGHUP drains and restarts the changed pipe with its
// new definition and leaves the unchanged one running (a comment added
// above it moves it, but does not change it); a file that does not
// validate is refused with the error logged, and the old pipes keep
// working. --watch does the same without a signal.
func TestReloadRestartsChangedPipesOnlyAndRefusesInvalidFiles(t *testing.T) {
	t.Parallel() // the runner is a child with the fake AWS environment (startRunner)
	endpoint := sqstest.Endpoint(t)
	client := sqstest.Client(t)
	qa, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{})
	qb, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{})
	got, target := newBodies(t)
	file := filepath.Join(t.TempDir(), "pipes.yaml")
	reloadFile(t, file, endpoint, qa, qb, target, 1, 1, "", "")
	p := startRunner(t, file, "--log-level", "info")
	waitUntil(t, 20*time.Second, "both pipes to start", func() bool {
		return strings.Count(p.stderr.String(), `msg="pipe started"`) == 2
	})
	send := func(n int) {
		sqstest.SendBodies(t, client, qa, fmt.Sprintf(`{"n":%d}`, n))
		sqstest.SendBodies(t, client, qb, fmt.Sprintf(`{"n":%d}`, n))
	}
	expect := func(n, va, vb int) {
		t.Helper()
		waitUntil(t, 20*time.Second, fmt.Sprintf("n %d with a v%d and b v%d", n, va, vb), func() bool {
			return got.has("/a", fmt.Sprintf(`{"v":%d,"n":%d}`, va, n)) && got.has("/b", fmt.Sprintf(`{"v":%d,"n":%d}`, vb, n))
		})
	}
	send(1)
	expect(1, 1, 1)

	reloadFile(t, file, endpoint, qa, qb, target, 2, 1, "# a comment moves every pipe down a line\n", "")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the reload", func() bool {
		return strings.Contains(p.stderr.String(), `msg="pipeline files reloaded" changed=1 added=0 removed=0 unchanged=1`)
	})
	send(2)
	expect(2, 2, 1)
	logs := p.stderr.String()
	if n := strings.Count(logs, `msg="pipe started" pipe=a `); n != 2 {
		t.Errorf("pipe a started %d times, want 2 (once again after the reload)", n)
	}
	if n := strings.Count(logs, `msg="pipe started" pipe=b `); n != 1 {
		t.Errorf("pipe b started %d times, want once: it did not change", n)
	}
	if !strings.Contains(logs, `msg="pipe changed: draining it, then starting it again with the new definition" pipe=a`) {
		t.Errorf("no drain of pipe a logged:\n%s", logs)
	}

	reloadFile(t, file, endpoint, qa, qb, target, 3, 3, "", "      batch_size: many\n")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the refusal", func() bool {
		return strings.Contains(p.stderr.String(), "reload refused: the pipeline files do not validate")
	})
	if logs := p.stderr.String(); !strings.Contains(logs, "source.batch_size: must be a whole number") {
		t.Errorf("the refusal does not say what is wrong:\n%s", logs)
	}
	send(3)
	expect(3, 2, 1)
	stopRunner(t, p)

	// --watch: the same without a signal.
	reloadFile(t, file, endpoint, qa, qb, target, 4, 1, "", "")
	w := startRunner(t, file, "--watch")
	waitUntil(t, 20*time.Second, "both pipes to start", func() bool {
		return strings.Count(w.stderr.String(), `msg="pipe started"`) == 2
	})
	reloadFile(t, file, endpoint, qa, qb, target, 4, 5, "", "")
	waitUntil(t, 30*time.Second, "the --watch reload", func() bool {
		return strings.Contains(w.stderr.String(), `msg="pipeline files reloaded" changed=1 added=0 removed=0 unchanged=1`)
	})
	send(4)
	expect(4, 4, 5)
	stopRunner(t, w)
}

func TestSamePipeSkipsPositionsOnly(t *testing.T) {
	load := func(doc string) config.Pipe {
		t.Helper()
		ps, err := config.Loader{}.Parse("p.yaml", []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		return ps[0]
	}
	base := "name: a\nsource: {type: memory}\nfilter:\n  patterns: ['{\"a\": [1]}']\n  jq: |\n    .a == 1\ntarget: {type: stdout, headers: {X: y}}\n"
	for _, tc := range []struct {
		name, doc string
		same      bool
	}{
		{"moved by a comment", "# c\n\n" + base, true},
		{"another pattern", strings.Replace(base, "[1]", "[2]", 1), false},
		{"another jq program", strings.Replace(base, ".a == 1", ".a == 2", 1), false},
		{"another header", strings.Replace(base, "X: y", "X: z", 1), false},
		{"a key added", base + "logging: {level: info}\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := samePipe(load(base), load(tc.doc)); got != tc.same {
				t.Errorf("samePipe = %v, want %v", got, tc.same)
			}
		})
	}
}

func TestABusyMetricsPortSaysHowToChangeIt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, _, stderr := runCLI(t, "run", "--drain", "--metrics-addr", ln.Addr().String(), "-f", "../../examples/quickstart/pipeline.yaml")
	if code != 1 || !strings.Contains(stderr, "in use") || !strings.Contains(stderr, `--metrics-addr ""`) || !strings.Contains(stderr, "--metrics-addr HOST:PORT") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
}

// configMapVolume lays out a folder as the kubelet mounts a ConfigMap
// (without subPath): each key is a symlink KEY -> ..data/KEY, and ..data
// a symlink to a timestamped folder holding the files.
type configMapVolume struct {
	t   *testing.T
	dir string
	gen int
	cur string // the timestamped folder ..data points to
}

func newConfigMapVolume(t *testing.T, files map[string]string) *configMapVolume {
	v := &configMapVolume{t: t, dir: t.TempDir()}
	v.update(files)
	for key := range files {
		if err := os.Symlink(filepath.Join("..data", key), filepath.Join(v.dir, key)); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

// update writes the files into a new timestamped folder, points ..data at
// it with one rename (the kubelet's atomic swap: a symlink ..data_tmp
// renamed over ..data), and removes the old folder, as the kubelet does.
func (v *configMapVolume) update(files map[string]string) {
	t := v.t
	v.gen++
	ts := fmt.Sprintf("..2026_04_01_12_00_%02d.%09d", v.gen, 123456789)
	if err := os.Mkdir(filepath.Join(v.dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	for key, content := range files {
		if err := os.WriteFile(filepath.Join(v.dir, ts, key), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if v.cur != "" {
		if err := os.RemoveAll(filepath.Join(v.dir, v.cur)); err != nil {
			t.Fatal(err)
		}
	}
	v.cur = ts
}

// A ConfigMap volume's update under `pipes run --watch`, mimicked as the
// kubelet makes it (the files' symlinks stay, ..data is swapped by one
// rename): the changed pipe is drained and started again, whether -f names
// the mounted file or the mounted folder.
func TestWatchReloadsAConfigMapVolumeOnItsAtomicSwap(t *testing.T) {
	pipeline := func(v int) string {
		return fmt.Sprintf("name: orders\nsource:\n  type: memory\ntarget:\n  type: stdout\n  input_template: '{\"v\": %d}'\n", v)
	}
	for _, tt := range []struct{ name, f string }{
		{"-f the mounted file", "pipeline.yaml"},
		{"-f the mounted folder", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			vol := newConfigMapVolume(t, map[string]string{"pipeline.yaml": pipeline(1)})
			p := startRunner(t, filepath.Join(vol.dir, tt.f), "--watch", "--log-level", "info")
			vol.update(map[string]string{"pipeline.yaml": pipeline(2)})
			waitUntil(t, 30*time.Second, "the --watch reload after the ..data swap", func() bool {
				return strings.Contains(p.stderr.String(), `msg="pipeline files reloaded" changed=1 added=0 removed=0 unchanged=0`)
			})
			if n := strings.Count(p.stderr.String(), `msg="pipe started" pipe=orders`); n != 2 {
				t.Errorf("pipe orders started %d times, want 2 (again after the swap):\n%s", n, p.stderr)
			}
			stopRunner(t, p)
		})
	}
}
