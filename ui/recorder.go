package ui

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/pipesproject/pipes/internal/core"
)

// Bounds of what a Recorder keeps: its memory does not grow with time or
// traffic.
const (
	// MaxFailures is how many of a pipe's last failures are kept.
	MaxFailures = 50
	// History is how far back the sparklines go.
	History = 15 * time.Minute
)

// Recorder is a the Observer of Pipe.SetObserver that keeps what the status page shows of one
// pipe: running totals (atomics, no lock on the pipe's path), the last
// MaxFailures failures, the last scaling decision, and a ring of samples of
// the totals taken every few seconds, 15 minutes of them. Safe for
// concurrent use; none of its methods block on I/O.
type Recorder struct {
	received, delivered, filtered, failed, dead atomic.Int64
	// byStage counts the failures by stage (stageIndex).
	byStage [numStages]atomic.Int64
	// maxAge is the age, in milliseconds, of the oldest message received
	// since the last sample (-1: none received).
	maxAge atomic.Int64

	scrub func(string) string
	every time.Duration
	start time.Time            // when it was made: the flow view's rates since start
	tail  atomic.Pointer[tail] // the live tail (EnableTail); nil: off

	mu       sync.Mutex
	failures []Failure // ring of MaxFailures, next at failures[next%MaxFailures]
	next     int64     // sequence number of the next failure
	scaling  *core.ScalingDecision
	samples  []sample // ring, len at most cap(samples)
	first    int      // index of the oldest sample
	lastAge  time.Duration
	ageAt    time.Time
	groups   groups // the failures by kind (groups.go)
	// buckets are the batch latency histogram's cumulative bucket counts
	// at the last sample (series.go).
	buckets   []uint64
	lastCount uint64
	// state is the pipe's state at the last sample and stateSince the
	// sample it was first seen at, since when it has held: the health's
	// since for a pipe whose trouble is its state (circuit open, not
	// ready, …).
	state      State
	stateSince time.Time
}

var (
	_ core.Observer = (*Recorder)(nil)
	_ core.Tap      = (*Recorder)(nil)
)

// EnableTail turns on the pipe's live tail (tail.go). It is safe to call
// while the pipe runs, and more than once.
func (r *Recorder) EnableTail() {
	if r.tail.Load() == nil {
		r.tail.CompareAndSwap(nil, newTail(r.scrub))
	}
}

// Tapping implements pipe.Tap: whether the live tail has viewers.
func (r *Recorder) Tapping() bool {
	t := r.tail.Load()
	return t != nil && t.tapping()
}

// Tapped implements pipe.Tap.
func (r *Recorder) Tapped(e core.TapEvent) {
	if t := r.tail.Load(); t != nil {
		t.tapped(e)
	}
}

// sample is the totals at one moment.
type sample struct {
	at                                          time.Time
	received, delivered, filtered, failed, dead int64
	gauges                                      // series.go
}

// Failure is one failed message as the page shows it.
type Failure struct {
	// Seq numbers the pipe's failures from 1, in order.
	Seq int64 `json:"seq"`
	// MessageID is the message's id in its source.
	MessageID string `json:"messageId"`
	// Stage is where it failed: filter, enrichment, transform, target,
	// fifo or runtime.
	Stage string `json:"stage"`
	// Error is why, with the pipe's secrets taken out.
	Error string `json:"error"`
	// Attempts is how many times the message was delivered.
	Attempts int `json:"attempts"`
	// At is when it failed.
	At time.Time `json:"at"`
	// Sample is the start of the body (at most 512 bytes), only when the
	// pipe's logging includes execution data.
	Sample string `json:"sample,omitempty"`
	// Attributes are the names of the message's attributes or headers;
	// their values are never shown.
	Attributes []string `json:"attributes,omitempty"`
}

// NewRecorder returns a recorder sampled every `every` (so that History
// fits in History/every samples); scrub, when set, takes secrets out of
// error texts before they are kept.
func NewRecorder(every time.Duration, scrub func(string) string) *Recorder {
	if every <= 0 {
		every = 5 * time.Second
	}
	if scrub == nil {
		scrub = func(s string) string { return s }
	}
	n := int(History/every) + 1
	r := &Recorder{scrub: scrub, every: every, start: time.Now(), samples: make([]sample, 0, n)}
	r.maxAge.Store(-1)
	return r
}

// Received implements the Observer of Pipe.SetObserver.
func (r *Recorder) Received(n int, oldest time.Time) {
	r.received.Add(int64(n))
	if oldest.IsZero() {
		return
	}
	age := time.Since(oldest).Milliseconds()
	for {
		cur := r.maxAge.Load()
		if age <= cur || r.maxAge.CompareAndSwap(cur, age) {
			return
		}
	}
}

// Settled implements the Observer of Pipe.SetObserver.
func (r *Recorder) Settled(delivered, filtered int) {
	r.delivered.Add(int64(delivered))
	r.filtered.Add(int64(filtered))
}

// Failed implements the Observer of Pipe.SetObserver.
func (r *Recorder) Failed(f core.Failure) {
	r.failed.Add(1)
	r.byStage[stageIndex(f.Stage)].Add(1)
	msg := "failed"
	if f.Err != nil {
		msg = f.Err.Error()
	}
	kept := Failure{MessageID: f.MessageID, Stage: f.Stage, Error: r.scrub(msg), Attempts: f.Attempts,
		At: f.At, Sample: r.scrub(f.Sample), Attributes: f.Attributes}
	norm := NormalizeError(kept.Error)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	kept.Seq = r.next
	r.groups.add(kept, norm)
	if len(r.failures) < MaxFailures {
		r.failures = append(r.failures, kept)
		return
	}
	r.failures[(r.next-1)%MaxFailures] = kept
}

// DeadLettered implements the Observer of Pipe.SetObserver.
func (r *Recorder) DeadLettered(n int) { r.dead.Add(int64(n)) }

// Scaled implements the Observer of Pipe.SetObserver.
func (r *Recorder) Scaled(d core.ScalingDecision) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.scaling = &d
}

// Sample records the totals now; the page's rates and sparklines come from
// the samples. The server calls it every `every`.
func (r *Recorder) Sample(now time.Time) { r.sample(now, unknownGauges(), nil) }

// sample records the totals now with the gauges read with them; hist,
// when set, reads the batch latency histogram (series.go).
func (r *Recorder) sample(now time.Time, g gauges, hist latencyHistogram) {
	s := sample{at: now, received: r.received.Load(), delivered: r.delivered.Load(),
		filtered: r.filtered.Load(), failed: r.failed.Load(), dead: r.dead.Load(), gauges: g}
	age := r.maxAge.Swap(-1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if hist != nil {
		s.p50, s.p99 = r.latency(hist)
	}
	if age >= 0 {
		r.lastAge, r.ageAt = time.Duration(age)*time.Millisecond, now
	}
	if len(r.samples) < cap(r.samples) {
		r.samples = append(r.samples, s)
		return
	}
	r.samples[r.first] = s
	r.first = (r.first + 1) % len(r.samples)
}

// noteState records the pipe's state at the sample taken now.
func (r *Recorder) noteState(now time.Time, st State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stateSince.IsZero() || st != r.state {
		r.state, r.stateSince = st, now
	}
}

// stateHeldSince is since when the pipe has been in the state named st
// (State.String), as far as the samples tell; zero when the last sample
// saw another state (or none was taken).
func (r *Recorder) stateHeldSince(st string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stateSince.IsZero() || r.state.String() != st {
		return time.Time{}
	}
	return r.stateSince
}

// lastFailureOf is the newest kept failure of the message id, if any.
// Its error has the pipe's secrets taken out already.
func (r *Recorder) lastFailureOf(id string) (Failure, bool) {
	if id == "" {
		return Failure{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for seq := r.next; seq > r.next-int64(len(r.failures)); seq-- {
		if f := r.failures[(seq-1)%MaxFailures]; f.MessageID == id {
			return f, true
		}
	}
	return Failure{}, false
}

// Failures returns the kept failures, newest first.
func (r *Recorder) Failures() []Failure {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Failure, 0, len(r.failures))
	for seq := r.next; seq > r.next-int64(len(r.failures)); seq-- {
		out = append(out, r.failures[(seq-1)%MaxFailures])
	}
	return out
}

// Failure returns the kept failure numbered seq.
func (r *Recorder) Failure(seq int64) (Failure, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if seq < 1 || seq > r.next || seq <= r.next-int64(len(r.failures)) {
		return Failure{}, false
	}
	return r.failures[(seq-1)%MaxFailures], true
}

// Counts are a pipe's message counts: totals since start, or rates in
// messages per second.
type Counts struct {
	Received     float64 `json:"received"`
	Filtered     float64 `json:"filtered"`
	Delivered    float64 `json:"delivered"`
	Failed       float64 `json:"failed"`
	DeadLettered float64 `json:"deadLettered"`
}

// Series are the per-second rates of each count, one per sample interval,
// oldest first.
type Series struct {
	Received     []float64 `json:"received"`
	Filtered     []float64 `json:"filtered"`
	Delivered    []float64 `json:"delivered"`
	Failed       []float64 `json:"failed"`
	DeadLettered []float64 `json:"deadLettered"`
}

// stats is what a Recorder tells the page.
type stats struct {
	totals Counts
	rates  Counts // over the last sample interval
	series Series
	// oldestAge is the age of the oldest message received in the last
	// interval that received any, seen at ageAt (zero: none yet).
	oldestAge time.Duration
	ageAt     time.Time
	scaling   *core.ScalingDecision
	failures  int64
}

func (r *Recorder) stats() stats {
	empty := func() []float64 { return make([]float64, 0, int(History/r.every)) }
	st := stats{series: Series{Received: empty(), Filtered: empty(), Delivered: empty(), Failed: empty(), DeadLettered: empty()}, totals: Counts{
		Received: float64(r.received.Load()), Delivered: float64(r.delivered.Load()),
		Filtered: float64(r.filtered.Load()), Failed: float64(r.failed.Load()), DeadLettered: float64(r.dead.Load()),
	}}
	r.mu.Lock()
	defer r.mu.Unlock()
	st.oldestAge, st.ageAt, st.failures = r.lastAge, r.ageAt, r.next
	if r.scaling != nil {
		d := *r.scaling
		st.scaling = &d
	}
	n := len(r.samples)
	for i := 1; i < n; i++ {
		a, b := r.samples[(r.first+i-1)%n], r.samples[(r.first+i)%n]
		secs := b.at.Sub(a.at).Seconds()
		if secs <= 0 {
			continue
		}
		rate := func(x, y int64) float64 { return float64(y-x) / secs }
		st.series.Received = append(st.series.Received, rate(a.received, b.received))
		st.series.Filtered = append(st.series.Filtered, rate(a.filtered, b.filtered))
		st.series.Delivered = append(st.series.Delivered, rate(a.delivered, b.delivered))
		st.series.Failed = append(st.series.Failed, rate(a.failed, b.failed))
		st.series.DeadLettered = append(st.series.DeadLettered, rate(a.dead, b.dead))
	}
	if k := len(st.series.Received); k > 0 {
		st.rates = Counts{Received: st.series.Received[k-1], Filtered: st.series.Filtered[k-1],
			Delivered: st.series.Delivered[k-1], Failed: st.series.Failed[k-1], DeadLettered: st.series.DeadLettered[k-1]}
	}
	return st
}

// recent returns the failures and the dead letters of the last window:
// the totals now less those of the last sample taken before the window
// (none: since start).
func (r *Recorder) recent(now time.Time, window time.Duration) (failed, dead float64) {
	f, d := r.failed.Load(), r.dead.Load()
	r.mu.Lock()
	defer r.mu.Unlock()
	var base sample
	for i := range r.samples {
		s := r.samples[(r.first+i)%len(r.samples)]
		if s.at.After(now.Add(-window)) {
			break
		}
		base = s
	}
	return float64(f - base.failed), float64(d - base.dead)
}
