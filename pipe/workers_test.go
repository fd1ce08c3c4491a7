package pipe

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestWorkers(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, w *workers)
	}{
		{"jobs run one after another reuse the idle workers", func(t *testing.T, w *workers) {
			for range 100 {
				done := make(chan struct{})
				w.run(func() { close(done) })
				<-done
				// Every worker back to idle (counted just before it waits:
				// a job sent in between starts a new one, rarely).
				waitFor(t, "the workers to be idle", func() bool { return int(w.idle.Load()) == w.size() })
			}
			w.wait()
			if n := w.size(); n > 10 {
				t.Fatalf("%d workers after 100 jobs run one after another, want a few", n)
			}
		}},
		{"jobs at once each get a worker and none waits", func(t *testing.T, w *workers) {
			var started sync.WaitGroup
			release := make(chan struct{})
			started.Add(8)
			for range 8 {
				w.run(func() { started.Done(); <-release })
			}
			started.Wait() // would hang if a job waited for a worker
			if n := w.size(); n != 8 {
				t.Fatalf("%d workers for 8 blocked jobs, want 8", n)
			}
			close(release)
			w.wait()
		}},
		{"workers beyond the limit end when their jobs are done", func(t *testing.T, w *workers) {
			release := make(chan struct{})
			for range 6 {
				w.run(func() { <-release })
			}
			w.setLimit(2)
			close(release)
			w.wait()
			waitFor(t, "two workers", func() bool { return w.size() == 2 })
		}},
		{"wait raises a job's panic and the pool goes on", func(t *testing.T, w *workers) {
			w.run(func() { panic("boom") })
			var ran atomic.Bool
			defer func() {
				if r := recover(); r == nil {
					t.Fatal("wait did not raise the job's panic")
				}
				w.run(func() { ran.Store(true) })
				w.jobsWG.Wait()
				if !ran.Load() {
					t.Fatal("a job after the panic did not run")
				}
			}()
			w.wait()
		}},
		{"close ends the idle workers and waits for the busy ones", func(t *testing.T, w *workers) {
			var finished atomic.Bool
			for range 3 {
				w.run(func() {})
			}
			w.run(func() { time.Sleep(20 * time.Millisecond); finished.Store(true) })
			w.close(true)
			if !finished.Load() || w.size() != 0 {
				t.Fatalf("close returned with %d workers, busy job finished %v", w.size(), finished.Load())
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorkers(0)
			defer w.close(true)
			tt.run(t, w)
		})
	}
}
