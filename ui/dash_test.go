package ui_test

import (
	"context"
	"errors"
	"html"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source/memory"
	"github.com/pipesproject/pipes/ui"
)

// TestTheDashboardCountsFailuresFlowAndSeries runs a pipe on a memory
// queue whose target fails one message until the queue dead-letters it
// (maxReceiveCount 2), and reads the dashboard's API: the failures are
// one group of 2 at the target, the flow says where they stopped, the
// pipe is marked failing, the summary adds up and the series have points.
func TestTheDashboardCountsFailuresFlowAndSeries(t *testing.T) {
	f := newFixture(t, "")
	var d ui.DetailView
	eventually(t, "the bad message dead-lettered", func() bool {
		getJSON(t, f.http.URL+"/api/pipes/orders", &d)
		return d.Totals.DeadLettered == 1 && d.Totals.Delivered == 2
	})
	if len(d.Groups) != 1 || d.Groups[0].Count != 2 || d.Groups[0].Stage != "target" || !d.Groups[0].ExampleKept ||
		d.Groups[0].ExampleSeq != 2 || d.Groups[0].First.After(d.Groups[0].Last) {
		t.Errorf("groups = %+v, want one of 2 at the target", d.Groups)
	}
	if d.Health.Level != "bad" || !strings.Contains(d.Health.Word, "failing") || !strings.Contains(d.Health.Word, "DLQ growing") || d.Health.Since == nil {
		t.Errorf("health = %+v, want failing and DLQ growing", d.Health)
	}
	steps := map[string]ui.Step{}
	for _, s := range d.Flow.Steps {
		steps[s.Name] = s
	}
	if s := steps["target"]; s.In != 4 || s.Stopped != 2 || s.Stop {
		t.Errorf("the target step = %+v, want 4 in, 2 stopped", s)
	}
	if s := steps["filter"]; s.Configured || s.In != 4 {
		t.Errorf("the filter step = %+v, want none configured, 4 through", s)
	}
	if s := steps["dead-letter"]; s.In != 1 {
		t.Errorf("the dead-letter step = %+v, want 1", s)
	}
	if s := steps["delivered"]; s.In != 2 {
		t.Errorf("the delivered step = %+v, want 2", s)
	}

	var all struct {
		Summary ui.Summary
		Pipes   []ui.PipeView
	}
	getJSON(t, f.http.URL+"/api/pipes", &all)
	if all.Summary.Pipes != 1 || all.Summary.Unhealthy != 1 || all.Summary.Totals.Failed != 2 || all.Summary.Totals.Delivered != 2 {
		t.Errorf("summary = %+v", all.Summary)
	}

	var s struct {
		SampleSeconds, HistorySeconds, Now float64
		T, Received, Failed, DLQ, P50Ms    []*float64
		Concurrency                        []*float64
	}
	eventually(t, "a few samples", func() bool {
		getJSON(t, f.http.URL+"/api/pipes/orders/series", &s)
		return len(s.T) >= 5
	})
	if s.SampleSeconds != 0.1 || s.HistorySeconds != 900 || len(s.Received) != len(s.T) || len(s.P50Ms) != len(s.T) {
		t.Fatalf("series = %+v", s)
	}
	for i, c := range s.Concurrency {
		if c == nil || *c < 1 {
			t.Fatalf("concurrency[%d] = %v, want a number", i, c)
		}
	}
	for i := 1; i < len(s.T); i++ {
		if *s.T[i] <= *s.T[i-1] {
			t.Fatalf("times not increasing: %v", s.T)
		}
	}

	page := fetch(t, f.http.URL+"/pipes/orders")
	for _, want := range []string{`data-chart="rates"`, `data-step="target"`, `data-groups=`, `<details><summary>`,
		`/static/vendor/uPlot.iife.min.js`, `pipes_target_duration_seconds_bucket{pipe="orders"}`} {
		if !strings.Contains(html.UnescapeString(page), want) {
			t.Errorf("the detail page lacks %s", want)
		}
	}
	overview := fetch(t, f.http.URL+"/")
	for _, want := range []string{`data-summary`, `data-level="bad"`, `failing`} {
		if !strings.Contains(overview, want) {
			t.Errorf("the overview lacks %s", want)
		}
	}
}

// TestTheFlowSaysWhereMessagesStop runs a pipe on a memory queue whose
// target refuses every message (a partial answer failing each item), with
// a dead-letter queue: the flow marks the target as where messages stop,
// and no other step.
func TestTheFlowSaysWhereMessagesStop(t *testing.T) {
	b := memory.NewBroker()
	q, err := b.Queue("orders", memory.Options{WaitTime: 50 * time.Millisecond, VisibilityTimeout: 100 * time.Millisecond,
		MaxReceiveCount: 2, DeadLetterQueue: "orders-dlq"})
	if err != nil {
		t.Fatal(err)
	}
	refuseAll := pipe.TargetFunc(func(_ context.Context, events []*pipe.Event) (pipe.Result, error) {
		var res pipe.Result
		for _, ev := range events {
			res.Failures = append(res.Failures, pipe.ItemFailure{ID: ev.ID(), Err: errors.New("target refused it")})
		}
		return res, nil
	})
	p, err := pipe.New(pipe.Options{Name: "orders", Source: q, Target: refuseAll})
	if err != nil {
		t.Fatal(err)
	}
	rec := ui.NewRecorder(100*time.Millisecond, nil)
	p.SetObserver(rec)
	spec := config.Pipe{Name: "orders", Source: config.Source{Type: "memory", QueueName: "orders",
		RedrivePolicy: &config.RedrivePolicy{MaxReceiveCount: 2, DeadLetterQueue: "orders-dlq"}}}
	depths, _ := ui.Queues(spec, b, nil)
	srv, err := ui.New(ui.Config{Addr: "127.0.0.1:0", SampleEvery: 100 * time.Millisecond,
		Pipes: []ui.Pipe{{Control: p, Recorder: rec, Settings: ui.Settings(spec), Depths: depths}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for _, body := range []string{`{"n":1}`, `{"n":2}`, `{"n":3}`} {
		if _, err := q.Send(context.Background(), memory.SendInput{Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	var d ui.DetailView
	eventually(t, "the 3 messages dead-lettered", func() bool {
		getJSON(t, hs.URL+"/api/pipes/orders", &d)
		return d.Totals.DeadLettered == 3
	})
	steps := map[string]ui.Step{}
	for _, s := range d.Flow.Steps {
		steps[s.Name] = s
		if s.Stop != (s.Name == "target") {
			t.Errorf("step %s: stop %v (want messages to stop at the target only)", s.Name, s.Stop)
		}
	}
	if s := steps["target"]; s.In != 6 || s.Stopped != 6 || s.Why == "" {
		t.Errorf("the target step = %+v, want 6 in (3 messages, 2 receives each), 6 stopped, and why", s)
	}
	if s := steps["delivered"]; s.In != 0 {
		t.Errorf("the delivered step = %+v, want 0", s)
	}
	if s := steps["dead-letter"]; s.In != 3 {
		t.Errorf("the dead-letter step = %+v, want 3", s)
	}
	if d.Health.Level != "bad" || !strings.Contains(d.Health.Word, "failing") {
		t.Errorf("health %+v, want bad: failing", d.Health)
	}
	page := fetch(t, hs.URL+"/pipes/orders")
	if !strings.Contains(page, `stop" data-step="target"`) {
		t.Errorf("the detail page does not mark the target's step as where messages stop:\n%s", page)
	}
}
