package enrich_test

import (
	"context"
	"strings"
	"testing"

	"github.com/pipesproject/pipes/enrich"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

func event(id, body string) *pipe.Event {
	ev, _ := pipe.NewEvent(&source.Message{MessageID: id, Body: body, Attributes: map[string]string{"ApproximateReceiveCount": "1"}})
	return ev
}

func TestJQEnrichment(t *testing.T) {
	tests := []struct {
		name        string
		program     string
		body        string
		wantPayload []string
		wantFailed  bool
	}{
		{name: "one output replaces the payload", program: `{id: .messageId, total: (.body.price * .body.qty)}`,
			body: `{"price":2.5,"qty":4}`, wantPayload: []string{`{"id":"m1","total":10}`}},
		{name: "no output drops the record", program: `select(.body.keep == true)`, body: `{"keep":false}`},
		{name: "several outputs fan out, all of the same message", program: `.body.items[]`,
			body: `{"items":[1,"two",{"three":3}]}`, wantPayload: []string{`1`, `"two"`, `{"three":3}`}},
		{name: "a plain text body is a string to jq", program: `.body | strings | ascii_upcase`, body: `hello`, wantPayload: []string{`"HELLO"`}},
		{name: "a run-time error fails that record only", program: `.body.n + "x"`, body: `{"n":1}`, wantFailed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, err := enrich.NewJQ(tt.program)
			if err != nil {
				t.Fatal(err)
			}
			other := event("m2", `{"price":1,"qty":1,"keep":true,"items":[],"n":"a"}`)
			out, res, err := j.Enrich(context.Background(), []*pipe.Event{event("m1", tt.body), other})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ev := range out {
				if ev.ID() == "m1" {
					got = append(got, string(ev.RecordJSON))
				}
			}
			if strings.Join(got, "|") != strings.Join(tt.wantPayload, "|") {
				t.Errorf("payloads of m1 = %v, want %v", got, tt.wantPayload)
			}
			failed := false
			for _, f := range res.Failures {
				if f.ID == "m1" {
					failed = true
				}
				if f.ID == "m2" && !tt.wantFailed {
					t.Errorf("the other record failed too: %v", f.Err)
				}
			}
			if failed != tt.wantFailed {
				t.Errorf("m1 failed = %v, want %v (%v)", failed, tt.wantFailed, res.Failures)
			}
		})
	}
}

func TestJQEnrichmentRejectsBadProgramsAtLoad(t *testing.T) {
	if _, err := enrich.NewJQ(`.body |||`); err == nil {
		t.Fatal("a syntax error was accepted")
	}
}
