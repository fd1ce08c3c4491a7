package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A target outage opens the circuit, which holds polling: the runner can
// still poll its source, so /readyz stays 200 (a rollout goes on during a
// downstream outage), while /status says why the pipe is held, with the
// pipe's secrets blanked out, and pipes_circuit_open is 1.
//
// Relies on: the memory source and an in-process HTTP server; no broker.
func TestReadyzStaysReadyWithTheCircuitOpenAndStatusSaysWhy(t *testing.T) {
	const secret = "s3cr3t-status-T0KEN"
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "overloaded, says "+r.Header.Get("Authorization"), http.StatusServiceUnavailable)
	}))
	defer down.Close()
	dir := t.TempDir()
	var events strings.Builder
	for i := range 6 {
		fmt.Fprintf(&events, "{\"body\":{\"n\":%d}}\n", i)
	}
	if err := os.WriteFile(filepath.Join(dir, "events.jsonl"), []byte(events.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "pipe.yaml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(`name: held
source: {type: memory, preload: events.jsonl, visibility_timeout: 1s, wait_time: 200ms, batch_size: 1}
target:
  type: http
  url: %s
  headers: {Authorization: "Bearer ${PIPES_TEST_STATUS_SECRET}"}
`, down.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PIPES_TEST_STATUS_SECRET", secret)
	addr := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"run", "--metrics-addr", addr, "-f", file}, strings.NewReader(""), &syncBuffer{}, stderr)
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("exit %d, stderr:\n%s", code, stderr)
		}
	}()
	type status struct {
		Ready bool         `json:"ready"`
		Pipes []pipeHealth `json:"pipes"`
	}
	var st status
	waitUntil(t, 30*time.Second, "the circuit open on /status", func() bool {
		res, err := http.Get("http://" + addr + "/status")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		st = status{}
		return res.StatusCode == http.StatusOK && json.NewDecoder(res.Body).Decode(&st) == nil &&
			len(st.Pipes) == 1 && st.Pipes[0].Circuit == "open"
	})
	h := st.Pipes[0]
	if !st.Ready || !h.Ready || h.Name != "held" || h.State != "target_failing" ||
		!strings.Contains(h.LastError, "circuit open") || !strings.Contains(h.LastError, "503") {
		t.Errorf("/status while the target is down: %+v", st)
	}
	if code, body := httpGet(t, "http://"+addr+"/readyz"); code != http.StatusOK || body != "ready\n" {
		t.Errorf("/readyz with the circuit open = %d %q, want 200 ready", code, body)
	}
	if _, metrics := httpGet(t, "http://"+addr+"/metrics"); !strings.Contains(metrics, `pipes_circuit_open{pipe="held"} 1`) {
		t.Errorf("/metrics lacks pipes_circuit_open 1")
	}
	_, raw := httpGet(t, "http://"+addr+"/status")
	if strings.Contains(raw, secret) || strings.Contains(stderr.String(), secret) {
		t.Errorf("the secret is shown:\n%s", raw)
	}
}
