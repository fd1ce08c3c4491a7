package pipe

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// workerIdle is how long a worker of a pipe's pool waits for a job before
// it ends: a pipe that went quiet after a burst does not keep a thousand
// grown stacks.
const workerIdle = 30 * time.Second

// workers is a pipe's pool of long-lived goroutines that run its receives
// and its batches. A new goroutine for every receive and every batch grows
// its stack again through the SDK's deep call chains each time (8% of the
// CPU of a drain); a worker keeps its stack from one job to the next.
//
// The pool grows as jobs come (a job never waits for a worker: one is
// started when none is idle) and shrinks to the size the scaler sets: a
// worker beyond it ends when its job is done, an idle one after
// workerIdle. The pool's owner waits for the jobs with wait and for the
// workers with close. A job that panics ends its worker; the first panic
// is raised again by wait, as the goroutine groups the pool replaces did.
// Safe for concurrent use.
type workers struct {
	jobs chan func() // unbuffered: a send succeeds only when a worker is idle
	quit chan struct{}

	jobsWG    sync.WaitGroup // jobs submitted and not finished
	workersWG sync.WaitGroup // live workers
	idle      atomic.Int32   // workers waiting for a job

	live  atomic.Int32 // workers started and not ended
	limit atomic.Int32 // the size the scaler wants; 0: no limit

	mu       sync.Mutex
	closed   bool
	panicked any
}

func newWorkers(limit int) *workers {
	w := &workers{jobs: make(chan func()), quit: make(chan struct{})}
	w.limit.Store(int32(limit))
	return w
}

// setLimit sets the size the pool shrinks to: workers beyond it end as
// their jobs finish. It does not block.
func (w *workers) setLimit(n int) { w.limit.Store(int32(n)) }

// size is the number of live workers.
func (w *workers) size() int { return int(w.live.Load()) }

// run hands job to an idle worker, or starts one for it. It does not
// block. It must not be called after close.
func (w *workers) run(job func()) {
	w.jobsWG.Add(1)
	select {
	case w.jobs <- job:
		return
	default:
	}
	w.live.Add(1)
	w.workersWG.Add(1)
	go w.loop(job)
}

// loop runs job, then the jobs handed to it, until the pool is closed, the
// worker is beyond the pool's size or it has been idle for workerIdle.
func (w *workers) loop(job func()) {
	defer w.workersWG.Done()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		if !w.do(job) {
			w.leave()
			return
		}
		if w.beyondLimit() {
			return
		}
		if job = w.next(idle); job == nil {
			w.leave()
			return
		}
	}
}

// next waits for the worker's next job; nil means the pool is closed or
// the worker was idle for workerIdle. (Its own frame: loop's stays small
// under the jobs, which may wait long in a parked goroutine, issue 20.)
func (w *workers) next(idle *time.Timer) func() {
	idle.Reset(workerIdle)
	w.idle.Add(1)
	select {
	case job := <-w.jobs:
		w.idle.Add(-1)
		return job
	case <-w.quit:
	case <-idle.C:
	}
	w.idle.Add(-1)
	// The job channel may have been handed a job just as this worker
	// gave up: take it rather than leave it waiting.
	select {
	case job := <-w.jobs:
		return job
	default:
	}
	return nil
}

func (w *workers) leave() { w.live.Add(-1) }

// beyondLimit ends the calling worker's count and reports true when the
// pool is larger than its limit; it takes no lock (a thousand batches
// ending at once at a stop do not queue on one).
func (w *workers) beyondLimit() bool {
	for {
		l, n := w.limit.Load(), w.live.Load()
		if l <= 0 || n <= l {
			return false
		}
		if w.live.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// do runs one job and reports whether it returned without panicking.
func (w *workers) do(job func()) (ok bool) {
	defer w.jobsWG.Done()
	defer func() {
		if r := recover(); r != nil {
			w.mu.Lock()
			if w.panicked == nil {
				w.panicked = r
			}
			w.mu.Unlock()
		}
	}()
	job()
	return true
}

// wait blocks until every job submitted has finished, then raises the
// first panic of a job, if any. No job may be submitted while it waits
// with none under way.
func (w *workers) wait() {
	w.jobsWG.Wait()
	w.mu.Lock()
	p := w.panicked
	w.mu.Unlock()
	if p != nil {
		panic(fmt.Sprintf("a job of the pipe's workers panicked: %v", p))
	}
}

// close ends the idle workers and, with waitFor, blocks until every worker
// has ended (those running a job end when it returns). It is called once,
// after the last run.
func (w *workers) close(waitFor bool) {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.quit)
	}
	w.mu.Unlock()
	if waitFor {
		w.workersWG.Wait()
	}
}
