package ui

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/redrive"
)

func TestPreview(t *testing.T) {
	cases := []struct {
		name, body, want string
	}{
		{"JSON text is shown as it is", `{"order":"o-1"}`, `{"order":"o-1"}`},
		{"empty stays empty", "", ""},
		{"a long text is cut after 200 bytes", strings.Repeat("x", 250), strings.Repeat("x", 200) + "…"},
		{"a cut never splits a character", strings.Repeat("x", 199) + "€€", strings.Repeat("x", 199) + "…"},
		{"binary is shown in hex, as pipes dlq inspect does", "\xff\x00", "(binary) ff00"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := preview([]byte(tc.body)); got != tc.want {
				t.Errorf("preview(%q) = %q, want %q", tc.body, got, tc.want)
			}
		})
	}
}

// A message the queue's redrive policy moved carries no failure context:
// its row says the last failure pipes saw of that message id, if pipes
// kept one, and nothing is made up otherwise.
func TestADLQMessageMovedByTheQueueShowsTheLastFailurePipesSaw(t *testing.T) {
	rec := NewRecorder(time.Second, func(s string) string { return strings.ReplaceAll(s, "hunter2", "***") })
	at := time.Date(2026, 12, 3, 6, 50, 19, 0, time.UTC)
	rec.Failed(core.Failure{MessageID: "m1", Stage: "target", Err: errors.New("HTTP 503 from https://api/?key=hunter2"), At: at.Add(-time.Minute)})
	rec.Failed(core.Failure{MessageID: "m2", Stage: "enrichment", Err: errors.New("timeout"), At: at})
	rec.Failed(core.Failure{MessageID: "m1", Stage: "target", Err: errors.New("HTTP 500 from https://api/?key=hunter2"), At: at})
	s := &Server{}
	p := &pipeState{Pipe: Pipe{Recorder: rec, Scrub: func(s string) string { return s }}}
	for _, tt := range []struct {
		name string
		view redrive.View
		want DLQMessage
	}{
		{"the newest failure of the id", redrive.View{ID: "m1"}, DLQMessage{ID: "m1", LastFailure: "at target: HTTP 500 from https://api/?key=*** (06:50:19 UTC)"}},
		{"an id pipes kept no failure of", redrive.View{ID: "m9"}, DLQMessage{ID: "m9"}},
		{"pipes' own dead letter keeps its reason", redrive.View{ID: "m2", Context: []redrive.Field{{Name: pipe.DLQStage, Value: "enrichment"}, {Name: pipe.DLQErrorMessage, Value: "timeout"}}},
			DLQMessage{ID: "m2", Reason: "at enrichment: timeout"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := s.dlqMessage(p, tt.view, at)
			if got.ID != tt.want.ID || got.Reason != tt.want.Reason || got.LastFailure != tt.want.LastFailure {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
