package pipe_test

import (
	"context"
	"testing"
	"time"

	"github.com/pipesproject/pipes/pipe"
)

// running is a pipe that Run runs in the background (startPipe).
type running struct {
	*pipe.Pipe
	cancel context.CancelFunc // cancels Run's ctx: the stop
	done   chan error
	ended  bool
}

// startPipe makes the pipe of opt and runs it in the background until
// stop, or until the test ends.
func startPipe(t *testing.T, opt pipe.Options) *running {
	t.Helper()
	p, err := pipe.New(opt)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Pipe: p, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- p.Run(ctx) }()
	t.Cleanup(func() {
		if r.ended {
			return
		}
		cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(time.Minute):
			t.Error("Run did not return within a minute of the end of the test")
		}
	})
	return r
}

// stop stops the pipe and waits for Run (wait).
func (r *running) stop(t *testing.T, within time.Duration, late string) {
	t.Helper()
	r.cancel()
	r.wait(t, within, late)
}

// wait waits for Run to return, and fails the test with late when it does
// not within within, or when it returns an error.
func (r *running) wait(t *testing.T, within time.Duration, late string) {
	t.Helper()
	select {
	case err := <-r.done:
		r.ended = true
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(within):
		t.Fatal(late)
	}
}
