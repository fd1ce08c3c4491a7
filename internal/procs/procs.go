// Package procs sizes the Go scheduler to the CPU a process uses: it sets
// GOMAXPROCS, between 1 and the runtime's own value (the machine's cores,
// or its cgroup's CPU limit), to a little more than the cores the process
// kept busy in the last seconds. It starts at one.
//
// An event pipe mostly waits on the network. Every goroutine woken by an
// answer may wake an idle processor's thread, which spins looking for
// work, finds none and sleeps again: at a few thousand messages a second,
// that spinning and the futex calls around it are a fifth of the CPU (see
// bench). With as many processors as the load needs, nothing spins idle;
// a load that needs more gets them within a second.
package procs

import (
	"context"
	"log/slog"
	"runtime"
	"time"
)

const (
	// Interval is how often the process's CPU is read.
	Interval = time.Second
	// upAt: a processor is added when the process used more than this
	// share of the processors it has over the last interval.
	upAt = 0.6
	// downAt: one is removed when the process would have used less than
	// this share of one processor fewer, for downAfter intervals in a row.
	downAt    = 0.35
	downAfter = 5
)

// Sizer decides GOMAXPROCS from the CPU used in each interval. It is not
// safe for concurrent use; Run owns one.
type Sizer struct {
	max  int // the runtime's own GOMAXPROCS: never more
	cur  int
	low  int // intervals in a row under the down threshold
	last time.Duration
}

// NewSizer starts at one processor, with up to max (the runtime's value):
// a pipe waits on the network most of its life, and one that starts under
// a CPU-heavy load has what it needs a second later.
func NewSizer(max int, cpuNow time.Duration) *Sizer {
	return &Sizer{max: max, cur: 1, last: cpuNow}
}

// Current is the number of processors the sizer last decided.
func (s *Sizer) Current() int { return s.cur }

// Next takes the process's CPU time at the end of an interval of length
// wall and returns the processors to use next.
func (s *Sizer) Next(cpuNow, wall time.Duration) int {
	used := float64(cpuNow-s.last) / float64(wall) // cores kept busy
	s.last = cpuNow
	switch {
	case wall <= 0:
	case used > upAt*float64(s.cur) && s.cur < s.max:
		// Busy: add room at once, as many processors as the load needs.
		s.cur = min(s.max, max(s.cur+1, int(used/upAt)+1))
		s.low = 0
	case s.cur > 1 && used < downAt*float64(s.cur-1):
		s.low++
		if s.low >= downAfter {
			s.cur--
			s.low = 0
		}
	default:
		s.low = 0
	}
	return s.cur
}

// Run sizes GOMAXPROCS every Interval until ctx is done, then gives the
// runtime its own value back. It does nothing (and returns at once) when
// the GOMAXPROCS environment variable is set (the user's choice), when the
// runtime has one processor only, or where the process's CPU time cannot
// be read. It blocks: run it in a goroutine the caller waits for.
func Run(ctx context.Context, getenv func(string) string, log *slog.Logger) {
	if getenv("GOMAXPROCS") != "" {
		return
	}
	max := runtime.GOMAXPROCS(0)
	cpu, ok := ProcessCPU()
	if max <= 1 || !ok {
		return
	}
	s := NewSizer(max, cpu)
	runtime.GOMAXPROCS(s.Current())
	defer runtime.GOMAXPROCS(max)
	tick := time.NewTicker(Interval)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			cpu, _ := ProcessCPU()
			n := s.Next(cpu, now.Sub(last))
			last = now
			if n != runtime.GOMAXPROCS(0) {
				runtime.GOMAXPROCS(n)
				log.Debug("the Go scheduler follows the load (GOMAXPROCS overrides it)", "gomaxprocs", n, "max", max)
			}
		}
	}
}
