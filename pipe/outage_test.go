package pipe_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/source/memory"
)

// flakySource fails every receive while down, as a source whose connection
// is lost fails all its receives under way at once.
type flakySource struct {
	*memory.Queue
	down  atomic.Bool
	fails atomic.Int64
}

func (f *flakySource) Receive(ctx context.Context, max int) ([]*source.Message, error) {
	if f.down.Load() {
		f.fails.Add(1)
		time.Sleep(50 * time.Millisecond)
		return nil, errors.New("the connection was lost; reconnecting")
	}
	return f.Queue.Receive(ctx, max)
}

// Five pollers fail together in a source outage: that is one failed round,
// not five, so a 2.5 s outage does not grow the receive backoff to its 20 s
// cap (it used to count each poller's failure: 5 at once made the next wait
// 1.6–3.2 s, the next round 10–20 s). The pipe polls again within seconds
// of the source's return, and is not ready meanwhile.
func TestConcurrentReceiveFailuresCountAsOneRound(t *testing.T) {
	b := memory.NewBroker()
	q := newQueue(t, b, "orders", memory.Options{})
	send(t, q, bodies(3000, `{"n":%d}`)...)
	src := &flakySource{Queue: q}
	rec := &recorder{}
	p := startPipe(t, pipe.Options{Source: src, Target: rec, BatchSize: 10, InitialConcurrency: 5, MaxConcurrency: 5})
	seen := func() int {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.seen)
	}
	waitUntil(t, func() bool { return seen() >= 200 }) // full receives: the pollers grew
	src.down.Store(true)
	time.Sleep(2500 * time.Millisecond)
	if p.Ready() {
		t.Errorf("ready after 2.5 s of failed receives")
	}
	before := seen()
	src.down.Store(false)
	back := time.Now()
	for seen() == before {
		if time.Since(back) > 5*time.Second {
			t.Fatalf("no delivery 5 s after the source came back (last error %v)", p.LastError())
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("polling again %v after the source came back; %d receives failed", time.Since(back).Round(time.Millisecond), src.fails.Load())
}
