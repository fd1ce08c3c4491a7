package ui

import (
	"time"
)

// PipeView is one pipe in /api/pipes (and the overview's row).
type PipeView struct {
	// Name is the pipe's name.
	Name string `json:"name"`
	// State is running, paused, draining (told to stop, finishing its
	// batches), starting, circuit open (the target keeps failing: polling
	// is held, but the pipe is ready, as /readyz and /status count it:
	// /status's target_failing) or not ready (its receives keep failing:
	// /status's source_failing).
	State string `json:"state"`
	// Reason says why a pipe is not ready or its circuit open (the
	// source's or the target's last error, secrets taken out).
	Reason string `json:"reason,omitempty"`
	// Health is how it is doing, in a word and a level (dash.go).
	Health Health `json:"health"`
	// Circuit is the circuit breaker: closed, or open while the target
	// keeps failing and polling is held.
	Circuit string `json:"circuit"`
	// Concurrency is the batches the pipe may have in flight now and its
	// ceiling (max_concurrency); InFlight the batches at the target.
	Concurrency Concurrency `json:"concurrency"`
	// Rates are messages per second over the last sample interval.
	Rates Counts `json:"rates"`
	// Totals are the counts since the process started.
	Totals Counts `json:"totals"`
	// Sparklines are the rates of the last 15 minutes, one per sample,
	// oldest first; SampleSeconds is the interval.
	Sparklines    Series  `json:"sparklines"`
	SampleSeconds float64 `json:"sampleSeconds"`
	// OldestMessageAgeSeconds is the age, at receive, of the oldest
	// message received in the last interval that received any (from
	// SentTimestamp; null before any).
	OldestMessageAgeSeconds *float64 `json:"oldestMessageAgeSeconds"`
	// Depths are the queue's and the dead-letter queue's counts as last
	// read (null before the first read), read at DepthsCheckedAt;
	// DepthsError says why the last read failed.
	Depths          *Depths    `json:"depths"`
	DepthsCheckedAt *time.Time `json:"depthsCheckedAt"`
	DepthsError     string     `json:"depthsError,omitempty"`
	// Redrive is the last redrive started from the page (null: none).
	Redrive *redriveJob `json:"redrive"`
	// Actions says which actions the pipe has.
	Actions Actions `json:"actions"`
}

// Concurrency is a pipe's concurrency now.
type Concurrency struct {
	Current  int `json:"current"`
	Limit    int `json:"limit"`
	InFlight int `json:"inFlight"`
}

// Actions are the actions a pipe offers; TokenSet is false when the server
// has no token (then every action is refused).
type Actions struct {
	Redrive bool `json:"redrive"`
	// DLQBrowser: the dead-letter queue can be listed and redriven by
	// selection (/pipes/NAME/dlq); Tail: the live tail is on
	// (/pipes/NAME/tail).
	DLQBrowser bool `json:"dlqBrowser"`
	Tail       bool `json:"tail"`
	Pause      bool `json:"pause"`
	Resume     bool `json:"resume"`
	TokenSet   bool `json:"tokenSet"`
}

// Scaling is a pipe's current scaling decision.
type Scaling struct {
	// Concurrency is where it stands; Reason why.
	Concurrency int    `json:"concurrency"`
	Reason      string `json:"reason"`
	// From, To and At describe the last change (absent before any).
	From int        `json:"from,omitempty"`
	To   int        `json:"to,omitempty"`
	At   *time.Time `json:"at,omitempty"`
}

// DetailView is /api/pipes/NAME: the row and the detail view.
type DetailView struct {
	PipeView
	// Scaling is the current scaling decision and its reason.
	Scaling Scaling `json:"scaling"`
	// Settings is the configuration with secrets masked.
	Settings []Setting `json:"settings"`
	// ExecutionData tells whether failures carry payload samples.
	ExecutionData bool `json:"executionData"`
	// Failures are the last failures, newest first (at most 50);
	// FailuresTotal counts all since start.
	Failures      []Failure `json:"failures"`
	FailuresTotal int64     `json:"failuresTotal"`
	// Groups are all failures since start by kind (stage and normalised
	// error), the largest first.
	Groups []Group `json:"groups"`
	// Flow is the path of its messages with the counts of each stage.
	Flow Flow `json:"flow"`
	// Prometheus are the queries of its metrics for longer history,
	// linked to Config.PrometheusURL's expression browser when set.
	Prometheus []PromQuery `json:"prometheus"`
}

// view builds p's row.
func (s *Server) view(p *pipeState) (PipeView, stats) {
	st := p.Control.Status()
	rs := p.Recorder.stats()
	v := PipeView{
		Name: p.name, Circuit: "closed",
		Concurrency:   Concurrency{Current: st.Concurrency, Limit: st.MaxConcurrency, InFlight: st.InFlight},
		Rates:         rs.rates,
		Totals:        rs.totals,
		Sparklines:    rs.series,
		SampleSeconds: s.cfg.SampleEvery.Seconds(),
		Actions: Actions{Redrive: p.Redriver != nil, DLQBrowser: browserOf(p) != nil, Tail: p.tail() != nil, Pause: !st.Paused && !st.Stopping, Resume: st.Paused,
			TokenSet: s.cfg.Token != ""},
	}
	if st.CircuitOpen {
		v.Circuit = "open"
	}
	v.State = StateOf(st).String()
	if st.Err != nil && !st.Ready {
		v.Reason = p.Scrub(st.Err.Error())
	}
	if !rs.ageAt.IsZero() {
		a := rs.oldestAge.Seconds()
		v.OldestMessageAgeSeconds = &a
	}
	p.mu.Lock()
	if p.depths != nil {
		d := *p.depths
		v.Depths = &d
		at := p.depthsAt
		v.DepthsCheckedAt = &at
	}
	v.DepthsError = p.depthsErr
	if p.job != nil {
		j := *p.job
		v.Redrive = &j
	}
	p.mu.Unlock()
	v.Health = healthOf(v, p.Recorder, rs, s.cfg.SampleEvery, time.Now())
	return v, rs
}

// detail builds p's detail view.
func (s *Server) detail(p *pipeState) DetailView {
	v, rs := s.view(p)
	d := DetailView{PipeView: v, Settings: p.Settings, ExecutionData: p.ExecutionData,
		Failures: p.Recorder.Failures(), FailuresTotal: rs.failures, Groups: groupsOf(p), Flow: flowOf(p, v, time.Now()),
		Prometheus: promQueries(s.prom, p.name)}
	d.Scaling = Scaling{Concurrency: v.Concurrency.Current}
	switch {
	case v.Circuit == "open":
		d.Scaling.Reason = "circuit open: the target keeps failing; polling is held and one probe batch is sent at growing intervals"
	case v.State == "paused":
		d.Scaling.Reason = "polling paused from the status page"
	case rs.scaling != nil:
		d.Scaling.Reason = rs.scaling.Reason
	default:
		d.Scaling.Reason = "no change since start (initial_concurrency)"
	}
	if sc := rs.scaling; sc != nil {
		at := sc.At
		d.Scaling.From, d.Scaling.To, d.Scaling.At = sc.From, sc.To, &at
	}
	return d
}
