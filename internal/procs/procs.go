// Package procs sizes the Go scheduler to the work a process has waiting:
// it sets GOMAXPROCS, between 1 and the runtime's own value (the machine's
// cores, its CPU affinity or its cgroup's CPU limit, as Go computes them),
// to as many processors as keep runnable goroutines from queueing. It
// starts at one.
//
// An event pipe mostly waits on the network. Every goroutine woken by an
// answer may wake an idle processor's thread, which spins looking for
// work, finds none and sleeps again: at a few thousand messages a second,
// that spinning and the futex calls around it are a fifth of the CPU (see
// bench). With as many processors as the load needs, nothing spins idle.
//
// The evidence for more is work that waits, not CPU that was used: a
// process held back by a busy neighbour or a CPU quota uses little CPU
// exactly when it is behind. Every Interval the sizer reads how long
// goroutines waited runnable before they ran (runtime/metrics'
// /sched/latencies:seconds), how late its own ticker fired, and the CPU the
// process used; a burst from idle has its processors a fraction of a
// second after it starts. Goroutines waiting count only beyond what the
// processors' own queueing at the CPU used explains, and weak evidence
// only in two intervals in a row (a process the machine stalled for a
// moment would not have run them sooner on another processor). It gives
// one back only after a quiet spell, and
// waits longer each time a give-back had to be undone.
//
// At the runtime's own value the runtime keeps GOMAXPROCS (Go 1.25's
// automatic updates follow affinity and cgroup changes); below it, the
// sizer re-reads that value every CeilingEvery.
package procs

import (
	"context"
	"log/slog"
	"math"
	"runtime"
	"runtime/metrics"
	"time"
)

const (
	// Interval is how often the sizer samples the scheduler.
	Interval = 100 * time.Millisecond
	// CeilingEvery is how often the runtime's own GOMAXPROCS is re-read
	// while the sizer holds fewer processors (the runtime itself checks
	// its CPU limits once a second).
	CeilingEvery = time.Second

	// upWait: a processor is added when, on average over an interval,
	// more than this many goroutines were waiting runnable (the sum of
	// their scheduling latencies over the interval's length: Little's law).
	upWait = 0.5
	// queueAllowance: and more than this many times the goroutines that
	// queue on their own at the CPU the process uses (see queueing).
	queueAllowance = 3.0
	// upLate: or when the sizer's own ticker fired this much late while
	// goroutines waited.
	upLate = 20 * time.Millisecond
	// upBusy: or when the process used more than this share of the
	// processors it has (at 0.6 a pipe sharing two cores with its broker
	// took a second processor it did not use: bench rabbitjob at c16).
	upBusy = 0.75
	// upWaitNow: waiting beyond the queueing allowance but below this, on
	// a process whose CPU is known, counts only in two intervals in a row:
	// a process the machine stalled for a moment (its broker took both
	// cores) shows goroutines waiting and little CPU used for one
	// interval, and another processor would not have run them sooner.
	upWaitNow = 2.0
	// downWait, downBusy: one is given back when fewer than downWait
	// goroutines waited on average and the process would have used less
	// than downBusy of one processor fewer, for downAfter intervals in a
	// row (five seconds).
	downWait  = 0.05
	downBusy  = 0.35
	downAfter = int(5 * time.Second / Interval)
	// maxHold caps the quiet spell a give-back needs: it doubles each time
	// processors were added back soon after one was given back (regrowAt),
	// and goes back to downAfter once a give-back holds that long.
	maxHold  = int(80 * time.Second / Interval)
	regrowAt = int(10 * time.Second / Interval)
)

// Sample is what the sizer sees of one interval.
type Sample struct {
	// Ceiling is the runtime's own GOMAXPROCS: never more.
	Ceiling int
	// Waiting is the mean number of goroutines that were runnable but not
	// running during the interval.
	Waiting float64
	// Busy is the cores the process kept busy (its CPU time over the
	// interval's length); 0 where it cannot be read.
	Busy float64
	// Late is how much later than planned the sampling ticker fired.
	Late time.Duration
}

// Sizer decides GOMAXPROCS from one Sample per interval: a pure function
// of the samples it was given. It is not safe for concurrent use; Run owns
// one.
type Sizer struct {
	cur   int
	weak  bool // the last interval had weak evidence of work waiting (see upWaitNow)
	quiet int  // intervals in a row quiet enough to give one back
	hold  int  // quiet intervals a give-back needs now
	since int  // intervals since the last give-back (-1: none, or undone)
}

// NewSizer starts at one processor: a pipe waits on the network most of
// its life, and one that starts under load has more an Interval later.
func NewSizer() *Sizer {
	return &Sizer{cur: 1, hold: downAfter, since: -1}
}

// Current is the number of processors the sizer last decided.
func (s *Sizer) Current() int { return s.cur }

// Next takes the sample of the interval that ended and returns the
// processors to use next, between 1 and in.Ceiling.
func (s *Sizer) Next(in Sample) int {
	ceiling := max(1, in.Ceiling)
	s.cur = min(s.cur, ceiling)
	if s.since >= 0 {
		s.since++
		if s.since >= maxHold {
			// The last give-back held: the next one needs the short wait again.
			s.hold, s.since = downAfter, -1
		}
	}
	// A late ticker counts only when something waited too: an idle
	// process's timer is late when the machine is, and a processor more
	// would run nothing.
	late := in.Late > upLate && in.Waiting > downWait
	// Waiting counts only beyond what the processors' own queueing at
	// this CPU explains: goroutines woken at random queue behind the one
	// running even when the processors are half idle, and another
	// processor then only spins (bench rabbitjob at c16: 0.45-0.55 of one
	// processor busy, 0.3-0.7 waiting, 13% more CPU a message at two
	// processors, the same throughput).
	queued := in.Waiting > upWait && in.Waiting > queueAllowance*queueing(in.Busy, s.cur)
	weak := queued && in.Busy > 0 && in.Waiting < upWaitNow && !late
	if weak && !s.weak {
		queued = false // once: a stall, or work waiting? The next interval says.
	}
	s.weak = weak
	waiting := queued || late || in.Busy > upBusy*float64(s.cur)
	switch {
	case waiting && s.cur < ceiling:
		// Behind: as many as the queue and the CPU say, at once.
		want := s.cur + max(1, int(math.Round(in.Waiting)))
		if in.Busy > 0 {
			want = max(want, int(in.Busy/upBusy)+1)
		}
		if s.since >= 0 && s.since < regrowAt {
			s.hold = min(maxHold, 2*s.hold) // the last give-back was a mistake
		}
		s.cur, s.quiet, s.since = min(ceiling, want), 0, -1
	case waiting:
		s.quiet = 0
	case s.cur > 1 && in.Waiting < downWait && in.Busy < downBusy*float64(s.cur-1):
		s.quiet++
		if s.quiet >= s.hold {
			s.cur, s.quiet, s.since = s.cur-1, 0, 0
		}
	default:
		s.quiet = 0
	}
	return s.cur
}

// queueing is the mean number of goroutines waiting runnable that
// random wake-ups make on their own when the process keeps busy cores
// busy of its n processors: an M/M/1 queue's ρ²/(1−ρ) at utilisation
// ρ = busy/n (an upper bound for n servers at the same utilisation). 0
// when busy is unknown (0).
func queueing(busy float64, n int) float64 {
	rho := min(busy/float64(max(n, 1)), 0.95)
	if rho <= 0 {
		return 0
	}
	return rho * rho / (1 - rho)
}

// Run sizes GOMAXPROCS every Interval until ctx is done, then gives it
// back to the runtime (runtime.SetDefaultGOMAXPROCS: the runtime's own
// value, updated automatically again). It does nothing, and returns at
// once, when the GOMAXPROCS environment variable is set (the user's
// choice). It blocks: run it in a goroutine the caller waits for.
func Run(ctx context.Context, getenv func(string) string, log *slog.Logger) {
	if getenv("GOMAXPROCS") != "" {
		return
	}
	runtime.SetDefaultGOMAXPROCS()
	defer runtime.SetDefaultGOMAXPROCS()
	ceiling := runtime.GOMAXPROCS(0)
	auto := true // the runtime owns GOMAXPROCS (it is at the ceiling)
	read := time.Now()
	s := NewSizer()
	set := func(n int) {
		if n >= ceiling {
			if !auto {
				runtime.SetDefaultGOMAXPROCS()
				auto = true
			}
			return
		}
		if auto || n != runtime.GOMAXPROCS(0) {
			runtime.GOMAXPROCS(n)
			auto = false
		}
	}
	set(s.Current())
	w := newWaitMeter()
	tick := time.NewTicker(Interval)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		// The ticker's own time is when it was due; now is when this
		// goroutine got to run.
		now := time.Now()
		wall := now.Sub(last)
		last = now
		switch {
		case auto:
			ceiling = runtime.GOMAXPROCS(0)
		case now.Sub(read) >= CeilingEvery:
			// The only way to learn the runtime's value without freezing it:
			// hand it back, read it, and take it again at once (the runtime's
			// value holds for a few microseconds).
			runtime.SetDefaultGOMAXPROCS()
			ceiling, auto, read = runtime.GOMAXPROCS(0), true, now
			set(min(s.Current(), ceiling))
		}
		waiting, busy := w.read(wall)
		before := s.Current()
		n := s.Next(Sample{Ceiling: ceiling, Waiting: waiting, Busy: busy, Late: wall - Interval})
		set(n)
		if n != before {
			log.Debug("the Go scheduler follows the work waiting (GOMAXPROCS overrides it)",
				"gomaxprocs", n, "max", ceiling, "waiting", waiting, "busy", busy)
		}
	}
}

// waitMeter reads, per interval, the mean number of goroutines waiting
// runnable and the cores the process kept busy.
type waitMeter struct {
	samples []metrics.Sample
	prev    []uint64 // the latency histogram's counts at the last read
	cpu     time.Duration
	cpuOK   bool
}

const schedLatencies = "/sched/latencies:seconds"

func newWaitMeter() *waitMeter {
	w := &waitMeter{samples: []metrics.Sample{{Name: schedLatencies}}}
	w.read(0)
	return w
}

// read returns the goroutines waiting on average and the cores busy since
// the last read, wall ago.
func (w *waitMeter) read(wall time.Duration) (waiting, busy float64) {
	metrics.Read(w.samples)
	var waited float64 // seconds, summed over the goroutines that ran
	if v := w.samples[0].Value; v.Kind() == metrics.KindFloat64Histogram {
		h := v.Float64Histogram()
		if len(w.prev) != len(h.Counts) {
			w.prev = make([]uint64, len(h.Counts))
			copy(w.prev, h.Counts)
		}
		for i, c := range h.Counts {
			if d := c - w.prev[i]; d > 0 {
				waited += float64(d) * bucketMid(h.Buckets[i], h.Buckets[i+1])
			}
		}
		copy(w.prev, h.Counts)
	}
	cpu, ok := ProcessCPU()
	if ok && w.cpuOK && wall > 0 {
		busy = float64(cpu-w.cpu) / float64(wall)
	}
	w.cpu, w.cpuOK = cpu, ok
	if wall > 0 {
		waiting = waited / wall.Seconds()
	}
	return waiting, busy
}

// bucketMid is a latency bucket's representative value: its middle, or its
// finite bound when the other is infinite.
func bucketMid(lo, hi float64) float64 {
	switch {
	case math.IsInf(hi, 1):
		return max(lo, 0)
	case math.IsInf(lo, -1) || lo < 0:
		return max(hi, 0) / 2
	}
	return (lo + hi) / 2
}
