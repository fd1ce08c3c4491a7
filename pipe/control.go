package pipe

import "github.com/pipesproject/pipes/internal/core"

// Pause stops the pipe's polling: no receive starts until Resume; the
// receives under way return and their messages, like every batch in
// flight, are processed and settled as usual. A paused pipe holds no
// message back: what is not received stays in the queue. Safe for
// concurrent use; it does not block.
func (p *Pipe) Pause() {
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
	p.log.Info("polling paused")
}

// Resume starts polling again after Pause. Safe for concurrent use; it
// does not block.
func (p *Pipe) Resume() {
	p.mu.Lock()
	was := p.paused
	p.paused = false
	p.mu.Unlock()
	if was {
		p.log.Info("polling resumed")
	}
	p.signal()
}

// Status returns the pipe's state now. Safe for concurrent use; it takes
// the pipe's lock briefly.
func (p *Pipe) Status() core.Status {
	err, ready := p.LastError(), p.Ready()
	p.mu.Lock()
	defer p.mu.Unlock()
	return core.Status{
		Started: p.started, Stopping: p.stopping, Paused: p.paused,
		Ready:       ready,
		CircuitOpen: p.circuit.open,
		Concurrency: p.sched.conc, MaxConcurrency: p.opt.MaxConcurrency,
		InFlight: p.sched.inflight, Receiving: p.sched.receiving, Err: err,
	}
}
