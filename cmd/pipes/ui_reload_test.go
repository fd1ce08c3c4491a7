package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// memoryPipes writes a file of memory-source pipes, one per name, whose
// stdout targets use the given batch setting (a change of it is a change
// of the pipe).
func memoryPipes(t *testing.T, file string, batch string, names ...string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("pipes:\n")
	for _, n := range names {
		b.WriteString("  - name: " + n + "\n    source: {type: memory, queue_name: " + n + ", wait_time: 1s}\n    target: {type: stdout, batch: " + batch + "}\n")
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// No server needed: memory sources. The status page shows the pipes a
// reload starts, in place of their old definitions, and no longer shows
// a removed one.
func TestStatusPageFollowsAReload(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pipes.yaml")
	memoryPipes(t, file, "false", "a", "b")
	p := startRunner(t, file, "--ui", freePort(t), "--log-level", "info")
	var addr string
	waitUntil(t, 20*time.Second, "the status page", func() bool {
		m := regexp.MustCompile(`msg="serving the status page" addr=(\S+)`).FindStringSubmatch(p.stderr.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	})
	shown := func() []string {
		code, body := httpGet(t, "http://"+addr+"/api/pipes")
		if code != 200 {
			t.Fatalf("GET /api/pipes: %d %s", code, body)
		}
		var v struct {
			Pipes []struct {
				Name  string `json:"name"`
				State string `json:"state"`
			} `json:"pipes"`
		}
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatalf("decoding /api/pipes: %v\n%s", err, body)
		}
		var names []string
		for _, x := range v.Pipes {
			names = append(names, x.Name+":"+x.State)
		}
		return names
	}
	waitUntil(t, 20*time.Second, "both pipes running", func() bool {
		return slices.Equal(shown(), []string{"a:running", "b:running"})
	})

	memoryPipes(t, file, "true", "a", "c") // a changed, b removed, c added
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the reload", func() bool {
		return strings.Contains(p.stderr.String(), `msg="pipeline files reloaded" changed=1 added=1 removed=1 unchanged=0`)
	})
	waitUntil(t, 20*time.Second, "the page to show the reloaded pipes", func() bool {
		return slices.Equal(shown(), []string{"a:running", "c:running"})
	})
	stopRunner(t, p)
}
