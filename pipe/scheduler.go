package pipe

// scheduler counts the work a pipe has under way — batches at the target,
// receives and the messages they asked for — and decides how many
// receives may be under way and how many messages they may ask for. It
// has no lock: the pipe's guards it, since the room of the receives also
// counts what the batcher and the circuit breaker hold.
type scheduler struct {
	conc      int // batches that may be in flight (the controller's)
	batchSize int
	inflight  int // batches at the target
	receiving int // receives under way
	reserved  int // messages asked for by receives under way
	pollers   int // receives that may be under way: grows on full receives, shrinks on empty ones
}

// want is how many receives may be under way. It starts at one and
// doubles with every full receive (a backlog), up to one per free batch
// slot; a receive that comes back short keeps it, an empty one halves it.
// So an idle pipe long-polls with a single receive (3 calls a minute) and
// one message arriving does not wake a hundred pollers.
func (s *scheduler) want() int { return max(1, min(s.pollers, s.conc)) }

// canReceive reports whether another receive may start.
func (s *scheduler) canReceive() bool { return s.receiving < s.want() }

// room is how many more messages may be received: those that can start
// in a free batch slot, less pending (waiting in the batcher) and held
// (outage messages the pipe holds).
func (s *scheduler) room(pending, held int) int {
	return (s.conc-s.inflight)*s.batchSize - pending - s.reserved - held
}

// probeRoom is how many messages a probe's receive may ask for.
func (s *scheduler) probeRoom() int { return s.batchSize - s.reserved }

// startReceive notes a receive of n messages under way.
func (s *scheduler) startReceive(n int) {
	s.receiving++
	s.reserved += n
}

// receiveDone notes the return of a receive that asked for n.
func (s *scheduler) receiveDone(n int) {
	s.receiving--
	s.reserved -= n
}

// received adapts the pollers to a receive that got got of asked.
func (s *scheduler) received(got, asked int) {
	switch {
	case got == 0:
		s.pollers = max(1, s.pollers/2)
	case got >= asked:
		s.pollers = min(max(1, s.pollers)*2, s.conc)
	}
}

// slotFree reports whether a batch may start.
func (s *scheduler) slotFree() bool { return s.inflight < s.conc }

// idle reports whether nothing is under way — no batch, no receive —
// and pending, the messages waiting for a batch, is 0.
func (s *scheduler) idle(pending int) bool {
	return s.inflight == 0 && s.receiving == 0 && pending == 0
}
