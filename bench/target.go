package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// target is the in-process HTTP target: it counts the items of each JSON
// array it is posted, answers 200 after an optional delay, and wakes
// waiters when a count is reached. Safe for concurrent use.
type target struct {
	url     string
	srv     *http.Server
	items   atomic.Int64
	arrived atomic.Int64 // items whose request was read, before the delay
	batches atomic.Int64
	bad     atomic.Int64
	delay   atomic.Int64 // nanoseconds
}

// startTarget serves the target on a free loopback port.
func startTarget() (*target, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the target: %w", err)
	}
	t := &target{url: "http://" + ln.Addr().String() + "/"}
	t.srv = &http.Server{Handler: t, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = t.srv.Serve(ln) }()
	return t, nil
}

func (t *target) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if d := time.Duration(t.delay.Load()); d > 0 {
		t.arrived.Add(int64(countItems(body)))
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
	}
	var items []json.RawMessage
	if err := json.Unmarshal(body, &items); err != nil {
		t.bad.Add(1)
		items = []json.RawMessage{body} // one event per request
	}
	t.batches.Add(1)
	t.items.Add(int64(len(items)))
	w.WriteHeader(http.StatusOK)
}

// countItems is the number of items of a JSON array body (1 when it is
// not one).
func countItems(body []byte) int {
	var items []json.RawMessage
	if json.Unmarshal(body, &items) != nil {
		return 1
	}
	return len(items)
}

// reset zeroes the counters and sets the answer delay.
func (t *target) reset(delay time.Duration) {
	t.items.Store(0)
	t.arrived.Store(0)
	t.batches.Store(0)
	t.bad.Store(0)
	t.delay.Store(int64(delay))
}

// waitItems waits until n items arrived, ctx ends, timeout passes or
// stopped closes; it returns whether n was reached.
func (t *target) waitItems(ctx context.Context, n int64, timeout time.Duration, stopped <-chan struct{}) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for t.items.Load() < n {
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		case <-stopped:
			return t.items.Load() >= n
		case <-tick.C:
		}
	}
	return true
}

// close stops the target server.
func (t *target) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = t.srv.Shutdown(ctx)
}
