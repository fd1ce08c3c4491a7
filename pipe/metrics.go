package pipe

import (
	"maps"
	"sync"
	"sync/atomic"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics holds the Prometheus series of every pipe in a process, labelled
// by pipe name. Create it once with NewMetrics and share it; it is safe for
// concurrent use. Names follow Pipes' CloudWatch metrics where one exists.
type Metrics struct {
	Received         *prometheus.CounterVec
	Filtered         *prometheus.CounterVec
	Delivered        *prometheus.CounterVec
	Failed           *prometheus.CounterVec
	Deleted          *prometheus.CounterVec
	DeleteFailures   *prometheus.CounterVec
	Released         *prometheus.CounterVec
	DeadLettered     *prometheus.CounterVec
	TargetRetries    *prometheus.CounterVec
	EmptyReceives    *prometheus.CounterVec
	Extended         *prometheus.CounterVec
	Batches          *prometheus.CounterVec
	Concurrency      *prometheus.GaugeVec
	InFlight         *prometheus.GaugeVec
	InFlightBytes    *prometheus.GaugeVec
	APICalls         *prometheus.CounterVec
	TargetDuration   *prometheus.HistogramVec
	MessageAge       *prometheus.HistogramVec
	PossibleDupes    *prometheus.CounterVec
	ExecutionFailed  *prometheus.CounterVec
	ExecutionPartial *prometheus.CounterVec
	DoubleSettles    *prometheus.CounterVec
	CircuitOpen      *prometheus.GaugeVec
	// PayloadDeletes counts the S3 payload objects deleted after their
	// message (`delete_payloads`), by result: ok or failed.
	PayloadDeletes *prometheus.CounterVec

	// calls are the APICalls counters CountCall resolved, by pipe and
	// operation: a map replaced whole (under callsMu) when one is added,
	// so that counting a call takes no lock.
	calls   atomic.Pointer[map[callKey]prometheus.Counter]
	callsMu sync.Mutex
}

// callKey names one APICalls series.
type callKey struct{ pipe, operation string }

// NewMetrics creates the series and registers them with reg (a
// prometheus.NewRegistry() in a process; nil registers nothing, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	pipeLabel := []string{"pipe"}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "pipes", Name: name, Help: help}, append(pipeLabel, labels...))
	}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "pipes", Name: name, Help: help}, pipeLabel)
	}
	m := &Metrics{
		Received:         counter("messages_received_total", "Messages received from the source."),
		Filtered:         counter("messages_filtered_total", "Messages that did not pass the filter (deleted)."),
		Delivered:        counter("messages_delivered_total", "Messages the target took successfully."),
		Failed:           counter("messages_failed_total", "Messages that failed and were left to the queue's visibility timeout.", "stage"),
		Deleted:          counter("messages_deleted_total", "Messages deleted from the source."),
		DeleteFailures:   counter("delete_failures_total", "Messages whose delete failed after retries (they will be delivered again)."),
		Released:         counter("messages_released_total", "Messages given back to the queue with a visibility change (shutdown, retry backoff)."),
		DeadLettered:     counter("messages_dead_lettered_total", "Messages sent to the pipe's dead-letter target (then deleted from the source), dead-lettered by the broker, or whose last receive allowed by the queue's redrive policy failed (on their way to its DLQ)."),
		TargetRetries:    counter("target_retries_total", "Events delivered again by the target's retry policy, inside the runner."),
		EmptyReceives:    counter("empty_receives_total", "Receives that returned no message."),
		Extended:         counter("visibility_extended_total", "Messages whose visibility was extended by the heartbeat."),
		Batches:          counter("batches_total", "Batches handed to the target (Pipes' Invocations)."),
		Concurrency:      gauge("concurrency", "Concurrent batches the pipe may have in flight now (Pipes' Concurrency)."),
		InFlight:         gauge("inflight_messages", "Messages received and not yet settled: buffered, at the target, or awaiting their delete."),
		InFlightBytes:    gauge("inflight_bytes", "Bytes of the messages received and not yet settled."),
		APICalls:         counter("aws_api_calls_total", "Calls to AWS APIs, by service operation.", "operation"),
		PossibleDupes:    counter("possible_duplicates_total", "Messages settled after their receipt handle went stale: they may have been delivered twice."),
		ExecutionFailed:  counter("execution_failed_total", "Batches that failed whole (Pipes' ExecutionFailed)."),
		ExecutionPartial: counter("execution_partially_failed_total", "Batches that failed in part (Pipes' ExecutionPartiallyFailed)."),
		DoubleSettles:    counter("double_settles_total", "Settling verbs refused because the delivery was settled already (a batch that outlived the shutdown timeout)."),
		CircuitOpen:      gauge("circuit_open", "1 while the pipe holds polling because the target keeps failing (circuit breaker open), else 0."),
		TargetDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "pipes", Name: "target_duration_seconds", Help: "Time the target took per batch (Pipes' TargetStageDuration).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, pipeLabel),
		MessageAge: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "pipes", Name: "message_age_seconds", Help: "Age of messages when received, from SentTimestamp.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 12),
		}, pipeLabel),
	}
	m.PayloadDeletes = counter("payload_deletes_total", "S3 payload objects deleted after their message was (delete_payloads), by result: ok, or failed (the object is left behind).", "result")
	if reg != nil {
		reg.MustRegister(m.PayloadDeletes)
		reg.MustRegister(m.Received, m.Filtered, m.Delivered, m.Failed, m.Deleted, m.DeleteFailures,
			m.Released, m.DeadLettered, m.TargetRetries, m.EmptyReceives, m.Extended, m.Batches, m.Concurrency, m.InFlight, m.InFlightBytes,
			m.APICalls, m.TargetDuration, m.MessageAge, m.PossibleDupes, m.ExecutionFailed, m.ExecutionPartial,
			m.DoubleSettles, m.CircuitOpen)
	}
	return m
}

// pipeMetrics are one pipe's series, resolved once.
type pipeMetrics struct {
	received, filtered, delivered, deleted, deleteFailures, released prometheus.Counter
	deadLettered                                                     prometheus.Counter
	emptyReceives, extended, batches, possibleDupes                  prometheus.Counter
	execFailed, execPartial, doubleSettles                           prometheus.Counter
	failedFilter, failedTarget, failedTransform, failedOther         prometheus.Counter
	failedEnrichment                                                 prometheus.Counter
	concurrency, inflight, inflightBytes, circuitOpen                prometheus.Gauge
	targetDuration, messageAge                                       prometheus.Observer
	m                                                                *Metrics
	obs                                                              core.Observer // SetObserver; nil: none
	tap                                                              core.Tap      // obs as a Tap; nil: none
	name                                                             string
}

func (m *Metrics) forPipe(name string) *pipeMetrics {
	return &pipeMetrics{
		m: m, name: name,
		received: m.Received.WithLabelValues(name), filtered: m.Filtered.WithLabelValues(name),
		delivered: m.Delivered.WithLabelValues(name), deleted: m.Deleted.WithLabelValues(name),
		deleteFailures: m.DeleteFailures.WithLabelValues(name), released: m.Released.WithLabelValues(name),
		deadLettered:  m.DeadLettered.WithLabelValues(name),
		emptyReceives: m.EmptyReceives.WithLabelValues(name), extended: m.Extended.WithLabelValues(name),
		batches: m.Batches.WithLabelValues(name), possibleDupes: m.PossibleDupes.WithLabelValues(name),
		execFailed: m.ExecutionFailed.WithLabelValues(name), execPartial: m.ExecutionPartial.WithLabelValues(name),
		doubleSettles: m.DoubleSettles.WithLabelValues(name), circuitOpen: m.CircuitOpen.WithLabelValues(name),
		failedFilter: m.Failed.WithLabelValues(name, "filter"), failedTarget: m.Failed.WithLabelValues(name, "target"),
		failedTransform: m.Failed.WithLabelValues(name, "transform"), failedEnrichment: m.Failed.WithLabelValues(name, "enrichment"), failedOther: m.Failed.WithLabelValues(name, "runtime"),
		concurrency: m.Concurrency.WithLabelValues(name), inflight: m.InFlight.WithLabelValues(name),
		inflightBytes:  m.InFlightBytes.WithLabelValues(name),
		targetDuration: m.TargetDuration.WithLabelValues(name), messageAge: m.MessageAge.WithLabelValues(name),
	}
}

// CountCall counts one AWS API call of a pipe by operation; sources and
// targets get it as their call hook. It is safe for concurrent use and
// does not block once the series is known: each (pipe, operation) series
// is resolved once and kept.
func (m *Metrics) CountCall(pipeName, operation string) {
	key := callKey{pipeName, operation}
	if calls := m.calls.Load(); calls != nil {
		if c, ok := (*calls)[key]; ok {
			c.Inc()
			return
		}
	}
	m.callCounter(key).Inc()
}

// callCounter resolves the APICalls series of key and adds it to the
// kept ones.
func (m *Metrics) callCounter(key callKey) prometheus.Counter {
	m.callsMu.Lock()
	defer m.callsMu.Unlock()
	old := m.calls.Load()
	if old != nil {
		if c, ok := (*old)[key]; ok {
			return c
		}
	}
	c := m.APICalls.WithLabelValues(key.pipe, key.operation)
	calls := map[callKey]prometheus.Counter{}
	if old != nil {
		calls = maps.Clone(*old)
	}
	calls[key] = c
	m.calls.Store(&calls)
	return c
}
