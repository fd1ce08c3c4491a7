package httpcore

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestIdleConnectionsAreClosedWhenTheConcurrencyHalves holds eight
// requests at a real server at once (eight connections), then tells the
// client the concurrency fell: the server sees the idle connections close
// only once it has halved.
func TestIdleConnectionsAreClosedWhenTheConcurrencyHalves(t *testing.T) {
	const n = 8
	var closed atomic.Int32
	var arrived sync.WaitGroup
	arrived.Add(n)
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/hold" {
			arrived.Done()
			<-release
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := newClient(t, Config{URL: srv.URL + "/hold"})
	var done sync.WaitGroup
	for range n {
		done.Go(func() {
			if _, _, err := c.Do(context.Background(), &Request{Body: []byte("{}")}); err != nil {
				t.Error(err)
			}
		})
	}
	arrived.Wait()
	close(release)
	done.Wait() // eight idle keep-alive connections now

	steps := []struct {
		conc       int
		wantClosed int32
	}{
		{n, 0},     // the peak
		{n - 2, 0}, // not halved: kept
		{n / 2, n}, // halved: every idle connection closed
		{n / 2, n}, // the new peak: nothing more
	}
	for _, st := range steps {
		c.FollowConcurrency(st.conc)
		if st.wantClosed > 0 {
			deadline := time.Now().Add(10 * time.Second)
			for closed.Load() < st.wantClosed && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
		}
		if got := closed.Load(); got != st.wantClosed {
			t.Fatalf("after concurrency %d the server saw %d connections closed, want %d", st.conc, got, st.wantClosed)
		}
	}
}
