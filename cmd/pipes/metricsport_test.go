package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// holdDefaultMetricsAddr makes sure 127.0.0.1:9464 is taken while the test
// runs: it listens there, or finds it held already (by another test binary,
// another pipes, an OpenTelemetry exporter), which is as good.
func holdDefaultMetricsAddr(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", defaultMetricsAddr)
	switch {
	case err == nil:
		t.Cleanup(func() { ln.Close() })
	case !errors.Is(err, syscall.EADDRINUSE):
		t.Fatalf("taking %s: %v", defaultMetricsAddr, err)
	}
}

var servingOn = regexp.MustCompile(`in_use=127\.0\.0\.1:9464 addr=(127\.0\.0\.1:\d+)`)

// The default metrics address in use (another pipes, an OpenTelemetry
// Prometheus exporter): a drain, and a run without --metrics-addr, warn
// and serve on a free port, which the log line names. An address given
// with --metrics-addr still fails when busy (TestABusyMetricsPortSaysHowToChangeIt).
//
// Relies on: nothing but the loopback interface.
func TestABusyDefaultMetricsPortTakesAFreeOne(t *testing.T) {
	holdDefaultMetricsAddr(t)
	t.Run("a drain", func(t *testing.T) {
		code, _, stderr := runCLI(t, "run", "--drain", "-f", "../../examples/quickstart/pipeline.yaml")
		m := servingOn.FindStringSubmatch(stderr)
		if code != 0 || m == nil || !strings.Contains(stderr, "level=WARN") || !strings.Contains(stderr, "default metrics address is in use") {
			t.Errorf("exit %d, stderr:\n%s", code, stderr)
		}
	})
	t.Run("a run serves /healthz on the free port", func(t *testing.T) {
		file := writeFile(t, "pipe.yaml", "name: idle\nsource:\n  type: memory\n  wait_time: 1s\ntarget:\n  type: stdout\n")
		ctx, cancel := context.WithCancel(context.Background())
		stderr := &syncBuffer{}
		done := make(chan int, 1)
		go func() { done <- run(ctx, []string{"run", "-f", file}, strings.NewReader(""), &syncBuffer{}, stderr) }()
		var addr string
		waitUntil(t, 30*time.Second, "the free port in the log", func() bool {
			if m := servingOn.FindStringSubmatch(stderr.String()); m != nil {
				addr = m[1]
			}
			return addr != ""
		})
		res, err := http.Get("http://" + addr + "/healthz")
		if err != nil || res.StatusCode != http.StatusOK {
			t.Errorf("GET /healthz on %s: %v %v", addr, res, err)
		} else {
			res.Body.Close()
		}
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("exit %d, stderr:\n%s", code, stderr)
		}
	})
}
