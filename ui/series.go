package ui

import (
	"math"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// LatencyHistogram is the Prometheus histogram of a pipe's batch latency
// (pipe.Metrics' TargetDuration for the pipe's label: a
// prometheus.Histogram implements it). The charts' p50 and p99 are read
// from its buckets at each sample: the quantiles of the batches of that
// interval.
type LatencyHistogram interface {
	Write(*dto.Metric) error
}

// gauges are what a sample reads besides the Recorder's counts.
type gauges struct {
	concurrency, inFlight int     // -1: unknown
	queue, dlq            int64   // visible messages; -1: not read in this interval
	p50, p99              float64 // seconds; NaN: no batch in this interval
}

func unknownGauges() gauges {
	return gauges{concurrency: -1, inFlight: -1, queue: -1, dlq: -1, p50: math.NaN(), p99: math.NaN()}
}

// latency reads hist and returns the p50 and p99 of the batches since
// the last read (NaN when there were none). r.mu is held.
func (r *Recorder) latency(hist latencyHistogram) (p50, p99 float64) {
	var m dto.Metric
	if err := hist.Write(&m); err != nil || m.Histogram == nil {
		return math.NaN(), math.NaN()
	}
	bs := m.Histogram.GetBucket()
	bounds := make([]float64, len(bs))
	delta := make([]uint64, len(bs))
	now := make([]uint64, len(bs))
	for i, b := range bs {
		bounds[i], now[i] = b.GetUpperBound(), b.GetCumulativeCount()
		delta[i] = now[i]
		if len(r.buckets) == len(bs) {
			delta[i] -= min(r.buckets[i], now[i])
		}
	}
	total := m.Histogram.GetSampleCount()
	if len(r.buckets) == len(bs) {
		total -= min(r.lastCount, total)
	}
	r.buckets, r.lastCount = now, m.Histogram.GetSampleCount()
	return quantile(0.5, bounds, delta, total), quantile(0.99, bounds, delta, total)
}

// latencyHistogram is LatencyHistogram inside the package.
type latencyHistogram = LatencyHistogram

// quantile is the q-quantile of a histogram of cumulative counts per
// upper bound (total counts the observations above the last bound too),
// interpolated linearly within its bucket as Prometheus's
// histogram_quantile does; past the last bound it is the last bound. NaN
// for an empty histogram.
func quantile(q float64, bounds []float64, cumulative []uint64, total uint64) float64 {
	if total == 0 || len(bounds) == 0 {
		return math.NaN()
	}
	rank := q * float64(total)
	lower, below := 0.0, 0.0
	for i, ub := range bounds {
		c := float64(cumulative[i])
		if c >= rank {
			if c == below {
				return ub
			}
			return lower + (ub-lower)*(rank-below)/(c-below)
		}
		lower, below = ub, c
	}
	return bounds[len(bounds)-1]
}

// The stages a failure is counted at in the flow view.
const (
	stageFilter = iota
	stageEnrichment
	stageTransform
	stageTarget
	stageOther // fifo, runtime
	numStages
)

func stageIndex(stage string) int {
	switch stage {
	case "filter":
		return stageFilter
	case "enrichment":
		return stageEnrichment
	case "transform":
		return stageTransform
	case "target":
		return stageTarget
	}
	return stageOther
}

// SeriesView is /api/pipes/NAME/series: the charts' data, one column per
// series, one row per sample of the last 15 minutes (uPlot's columnar
// form). A null is a value that was not measured: no batch in the
// interval (the latencies), no depth read in it (the depths: they are
// read at most every 30 s, while the page is open), a gap in the
// sampling.
type SeriesView struct {
	// SampleSeconds is the sampling interval; HistorySeconds the window;
	// Now the server's time (Unix seconds) when it answered.
	SampleSeconds  float64 `json:"sampleSeconds"`
	HistorySeconds float64 `json:"historySeconds"`
	Now            float64 `json:"now"`
	// T are the samples' times, Unix seconds, oldest first.
	T column `json:"t"`
	// The rates, messages per second over the interval ending at T.
	Received     column `json:"received"`
	Delivered    column `json:"delivered"`
	Filtered     column `json:"filtered"`
	Failed       column `json:"failed"`
	DeadLettered column `json:"deadLettered"`
	// Queue and DLQ are the visible messages of the queue and of the
	// dead-letter queue.
	Queue column `json:"queue"`
	DLQ   column `json:"dlq"`
	// Concurrency is the batches the pipe may have in flight, InFlight
	// those at the target, at T.
	Concurrency column `json:"concurrency"`
	InFlight    column `json:"inFlight"`
	// P50Ms and P99Ms are the batch latency quantiles of the interval, in
	// milliseconds (pipes_target_duration_seconds).
	P50Ms column `json:"p50Ms"`
	P99Ms column `json:"p99Ms"`
}

// column is a series of numbers in JSON, NaN written as null.
type column []float64

// MarshalJSON implements json.Marshaler.
func (c column) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+len(c)*6)
	b = append(b, '[')
	for i, v := range c {
		if i > 0 {
			b = append(b, ',')
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			b = append(b, "null"...)
			continue
		}
		b = strconv.AppendFloat(b, v, 'f', -1, 64)
	}
	return append(b, ']'), nil
}

// series builds the charts' data from the ring.
func (r *Recorder) series(now time.Time) SeriesView {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.samples)
	k := max(0, n-1)
	v := SeriesView{SampleSeconds: r.every.Seconds(), HistorySeconds: History.Seconds(),
		Now: float64(now.UnixMilli()) / 1000}
	cols := []*column{&v.T, &v.Received, &v.Delivered, &v.Filtered, &v.Failed, &v.DeadLettered,
		&v.Queue, &v.DLQ, &v.Concurrency, &v.InFlight, &v.P50Ms, &v.P99Ms}
	for _, c := range cols {
		*c = make(column, 0, k)
	}
	gauge := func(x int64) float64 {
		if x < 0 {
			return math.NaN()
		}
		return float64(x)
	}
	for i := 1; i < n; i++ {
		a, b := r.samples[(r.first+i-1)%n], r.samples[(r.first+i)%n]
		secs := b.at.Sub(a.at).Seconds()
		rate := func(x, y int64) float64 {
			// A gap in the sampling (a stopped process) is not a rate.
			if secs <= 0 || secs > 3*r.every.Seconds() {
				return math.NaN()
			}
			return float64(y-x) / secs
		}
		v.T = append(v.T, float64(b.at.UnixMilli())/1000)
		v.Received = append(v.Received, rate(a.received, b.received))
		v.Delivered = append(v.Delivered, rate(a.delivered, b.delivered))
		v.Filtered = append(v.Filtered, rate(a.filtered, b.filtered))
		v.Failed = append(v.Failed, rate(a.failed, b.failed))
		v.DeadLettered = append(v.DeadLettered, rate(a.dead, b.dead))
		v.Queue = append(v.Queue, gauge(b.queue))
		v.DLQ = append(v.DLQ, gauge(b.dlq))
		v.Concurrency = append(v.Concurrency, gauge(int64(b.concurrency)))
		v.InFlight = append(v.InFlight, gauge(int64(b.inFlight)))
		v.P50Ms = append(v.P50Ms, b.p50*1000)
		v.P99Ms = append(v.P99Ms, b.p99*1000)
	}
	return v
}

// sample samples p's Recorder with its gauges: concurrency, depths read
// since the last sample, batch latency.
func (p *pipeState) sample(now time.Time) {
	g := unknownGauges()
	st := p.Control.Status()
	g.concurrency, g.inFlight = st.Concurrency, st.InFlight
	p.Recorder.noteState(now, StateOf(st))
	p.mu.Lock()
	if p.depths != nil && p.depthsAt.After(p.sampledAt) {
		if q := p.depths.Queue; q != nil {
			g.queue = int64(q.Visible)
		}
		if d := p.depths.DLQ; d != nil {
			g.dlq = int64(d.Visible)
		}
	}
	p.sampledAt = now
	p.mu.Unlock()
	var hist latencyHistogram
	if p.Latency != nil {
		hist = p.Latency
	}
	p.Recorder.sample(now, g, hist)
}
