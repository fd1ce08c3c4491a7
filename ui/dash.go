package ui

import (
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// recentWindow is how far back a pipe's failures and dead letters make it
// "failing" and its DLQ "growing".
const recentWindow = 5 * time.Minute

// Health is how a pipe is doing, in a word and a level, so that a pipe in
// trouble stands out by colour and by text.
type Health struct {
	// Level is ok, warn (its DLQ grows, it is paused, starting or
	// draining) or bad (failing, circuit open, not ready).
	Level string `json:"level"`
	// Word says it: healthy, failing, circuit open, not ready, DLQ
	// growing (a dead letter, or the DLQ's depth rising, in the last 5
	// minutes), paused, starting, draining (joined by ", " when several).
	Word string `json:"word"`
	// Since is when the trouble began, as far as the last 15 minutes
	// tell (null when healthy).
	Since *time.Time `json:"since"`
	// RecentFailed and RecentDeadLettered count the last 5 minutes.
	RecentFailed       float64 `json:"recentFailed"`
	RecentDeadLettered float64 `json:"recentDeadLettered"`
}

// healthOf decides a pipe's health from its row and its recorder.
func healthOf(v PipeView, r *Recorder, rs stats, every time.Duration, now time.Time) Health {
	failed, dead := r.recent(now, recentWindow)
	h := Health{Level: "ok", RecentFailed: failed, RecentDeadLettered: dead}
	var words []string
	bad := func(w string) { h.Level = "bad"; words = append(words, w) }
	warn := func(w string) {
		if h.Level == "ok" {
			h.Level = "warn"
		}
		words = append(words, w)
	}
	switch v.State {
	case "not ready", "circuit open":
		bad(v.State)
	case "paused", "starting", "draining":
		warn(v.State)
	}
	if h.RecentFailed > 0 && v.State != "circuit open" {
		bad("failing")
	}
	// The DLQ grows by pipes' own dead letters, or, seen in its depth,
	// by the broker's redrive policy or another producer.
	rising, risingAt := r.dlqRising(now, recentWindow)
	if h.RecentDeadLettered > 0 || rising {
		warn("DLQ growing")
	}
	if len(words) == 0 {
		h.Word = "healthy"
		return h
	}
	h.Word = strings.Join(words, ", ")
	if h.RecentFailed > 0 || h.RecentDeadLettered > 0 {
		h.Since = troubleSince(rs.series, every, now)
	}
	if rising && (h.Since == nil || risingAt.Before(*h.Since)) {
		at := risingAt.Truncate(time.Second)
		h.Since = &at
	}
	// A state that is trouble in itself (circuit open, not ready, paused,
	// starting, draining) dates from the sample that first saw it.
	if v.State != Running.String() {
		if at := r.stateHeldSince(v.State); !at.IsZero() && (h.Since == nil || at.Before(*h.Since)) {
			at = at.Truncate(time.Second)
			h.Since = &at
		}
	}
	return h
}

// dlqRising reports whether the dead-letter queue's depth, in the samples
// of the last window that read it, rose: the last reading is above the
// lowest one before it (a redrive that emptied it and new dead letters
// after count as rising; a steady or falling depth does not). at is the
// first sample after that lowest reading whose depth was above it. A pipe
// whose DLQ depth is not known never rises.
func (r *Recorder) dlqRising(now time.Time, window time.Duration) (rising bool, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	low, last := int64(-1), int64(-1)
	for i := range r.samples {
		s := r.samples[(r.first+i)%len(r.samples)]
		if !s.at.After(now.Add(-window)) || s.dlq < 0 {
			continue
		}
		switch {
		case low < 0 || s.dlq < low:
			low, at = s.dlq, time.Time{}
		case s.dlq > low && at.IsZero():
			at = s.at
		}
		last = s.dlq
	}
	return last > low && low >= 0, at
}

// troubleSince is when the failures or dead letters of the last samples
// began: the first failing sample after the last quiet stretch of
// recentWindow (nil when none failed).
func troubleSince(s Series, every time.Duration, now time.Time) *time.Time {
	k := len(s.Failed)
	quiet, first := 0, -1
	for i := k - 1; i >= 0; i-- {
		if s.Failed[i] > 0 || s.DeadLettered[i] > 0 {
			first, quiet = i, 0
			continue
		}
		quiet++
		if time.Duration(quiet)*every >= recentWindow && first >= 0 {
			break
		}
	}
	if first < 0 {
		return nil
	}
	at := now.Add(-time.Duration(k-1-first) * every).Add(-every).Truncate(time.Second)
	return &at
}

// Summary is the overview's top line: all pipes together.
type Summary struct {
	// Pipes counts the pipes, Unhealthy those whose health is bad.
	Pipes     int `json:"pipes"`
	Unhealthy int `json:"unhealthy"`
	// Totals and Rates sum the pipes' counts and rates.
	Totals Counts `json:"totals"`
	Rates  Counts `json:"rates"`
	// DLQ sums the dead-letter queues' visible messages of the pipes whose
	// depth is known (DLQKnown of them).
	DLQ      int `json:"dlq"`
	DLQKnown int `json:"dlqKnown"`
}

func summarize(views []PipeView) Summary {
	var s Summary
	add := func(a *Counts, b Counts) {
		a.Received += b.Received
		a.Filtered += b.Filtered
		a.Delivered += b.Delivered
		a.Failed += b.Failed
		a.DeadLettered += b.DeadLettered
	}
	for _, v := range views {
		s.Pipes++
		if v.Health.Level == "bad" {
			s.Unhealthy++
		}
		add(&s.Totals, v.Totals)
		add(&s.Rates, v.Rates)
		if v.Depths != nil && v.Depths.DLQ != nil {
			s.DLQ += v.Depths.DLQ.Visible
			s.DLQKnown++
		}
	}
	return s
}

// Flow is a pipe's path, source → filter → enrichment → target (→
// dead-letter), with what passed each edge since start.
type Flow struct {
	// Seconds is how long the counts have run (since the process started).
	Seconds float64 `json:"seconds"`
	// Steps are the stages in order, each with the edge that leaves it
	// towards the next and what stopped there.
	Steps []Step `json:"steps"`
	// InFlight are the received messages not settled yet (at a stage now,
	// or received again after a failure).
	InFlight float64 `json:"inFlight"`
}

// Step is one stage of a Flow.
type Step struct {
	// Name is the stage: source, filter, enrichment, target, delivered,
	// dead-letter.
	Name string `json:"name"`
	// Configured is false for a stage the pipe has not (messages pass it
	// untouched).
	Configured bool `json:"configured"`
	// In is what reached the stage since start, Rate the same a second.
	In   float64 `json:"in"`
	Rate float64 `json:"rate"`
	// Stopped is what stopped here (filtered out, failed), Why what that
	// is; Stop marks where messages stop: some arrived, none went on.
	Stopped float64 `json:"stopped"`
	Why     string  `json:"why,omitempty"`
	Stop    bool    `json:"stop"`
}

// flowOf builds p's flow from its totals and failures by stage.
func flowOf(p *pipeState, v PipeView, now time.Time) Flow {
	r := p.Recorder
	secs := max(now.Sub(r.start).Seconds(), 1)
	var failed [numStages]float64
	for i := range failed {
		failed[i] = float64(r.byStage[i].Load())
	}
	has := func(prefix string) bool {
		for _, s := range p.Settings {
			if strings.HasPrefix(s.Key, prefix+".") || s.Key == prefix {
				return true
			}
		}
		return false
	}
	t := v.Totals
	// What reached each stage, counted from where the settled messages
	// ended: a message that failed at the target passed the filter and
	// the enrichment.
	atTarget := t.Delivered + failed[stageTarget] + failed[stageTransform]
	atEnrichment := atTarget + failed[stageEnrichment]
	atFilter := atEnrichment + failed[stageFilter] + t.Filtered
	f := Flow{Seconds: secs, InFlight: max(0, t.Received-atFilter-failed[stageOther])}
	step := func(name string, configured bool, in, stopped float64, why string) {
		f.Steps = append(f.Steps, Step{Name: name, Configured: configured, In: in, Rate: in / secs, Stopped: stopped, Why: why})
	}
	step("source", true, t.Received, failed[stageOther], "failed in the runtime (fifo order, shutdown)")
	step("filter", has("filter"), atFilter, t.Filtered+failed[stageFilter],
		fmt.Sprintf("%.0f filtered out, %.0f failed", t.Filtered, failed[stageFilter]))
	step("enrichment", has("enrichment"), atEnrichment, failed[stageEnrichment], "failed")
	step("target", true, atTarget, failed[stageTarget]+failed[stageTransform], "failed (retried, or dead-lettered)")
	step("delivered", true, t.Delivered, 0, "")
	if t.DeadLettered > 0 || has("dead_letter") || (v.Depths != nil && v.Depths.DLQ != nil) {
		step("dead-letter", true, t.DeadLettered, 0, "")
	}
	for i := range f.Steps {
		s := &f.Steps[i]
		if s.Stopped == 0 {
			s.Why = ""
		}
		// Messages stop here: some came, none of them went on.
		next := 0.0
		if i+1 < len(f.Steps) && f.Steps[i+1].Name != "dead-letter" {
			next = f.Steps[i+1].In
		}
		s.Stop = s.Name != "delivered" && s.Name != "dead-letter" && s.In > 0 && next == 0
	}
	return f
}

// groupsOf returns p's failure groups, marking those whose example is
// still kept.
func groupsOf(p *pipeState) []Group {
	r := p.Recorder
	r.mu.Lock()
	gs := r.groups.list()
	oldest := r.next - int64(len(r.failures))
	r.mu.Unlock()
	for i := range gs {
		gs[i].ExampleKept = gs[i].ExampleSeq > oldest
	}
	return gs
}

// apiSeries serves /api/pipes/NAME/series, the charts' data.
func (s *Server) apiSeries(w http.ResponseWriter, r *http.Request) {
	p, ok := s.pipeOf(w, r)
	if !ok {
		return
	}
	s.touchDepths(p)
	s.writeJSON(w, http.StatusOK, p.Recorder.series(time.Now()))
}

// dashFuncs are the dashboard templates' helpers (besides funcs).
var dashFuncs = template.FuncMap{
	"secs": func(f float64) *float64 { return &f },
	"clip": clip,
}

// clipAt is how much of a group's error its summary line shows; the whole
// text opens below it.
const clipAt = 200

// clip shortens s to about clipAt bytes, at a word boundary, marking the
// cut with "…". dash.js clips the same.
func clip(s string) string {
	if len(s) <= clipAt {
		return s
	}
	cut := strings.LastIndexByte(s[:clipAt], ' ')
	if cut < clipAt/2 {
		cut = clipAt
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
	}
	return s[:cut] + " …"
}
