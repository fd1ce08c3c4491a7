package pipe

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

// Status is a snapshot of a pipe's scheduling state, for status pages.
type Status struct {
	// Started: the source is open and the pipe polls (or did).
	Started bool
	// Stopping: the pipe was told to stop and lets its batches finish.
	Stopping bool
	// Paused: polling is paused (Pause).
	Paused bool
	// Ready is what Ready reports.
	Ready bool
	// CircuitOpen: the target keeps failing and polling is held.
	CircuitOpen bool
	// Concurrency is the batches the pipe may have in flight now;
	// MaxConcurrency its ceiling.
	Concurrency, MaxConcurrency int
	// InFlight is the batches at the target now.
	InFlight int
	// Receiving is the receives under way.
	Receiving int
	// Err is what LastError reports.
	Err error
}

// Status returns the pipe's state now. Safe for concurrent use; it takes
// the pipe's lock briefly.
func (p *Pipe) Status() Status {
	err, ready := p.LastError(), p.Ready()
	p.mu.Lock()
	defer p.mu.Unlock()
	return Status{
		Started: p.started, Stopping: p.stopping, Paused: p.paused,
		Ready:       ready,
		CircuitOpen: p.circuit.open,
		Concurrency: p.sched.conc, MaxConcurrency: p.opt.MaxConcurrency,
		InFlight: p.sched.inflight, Receiving: p.sched.receiving, Err: err,
	}
}
