// Package enrich holds pipes' enrichment stages. Each implements
// pipe.Enricher: it gets the events that passed the filter and returns what
// the target gets, keeping each event's source message so that outcomes map
// back to it.
package enrich

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/pipesproject/pipes/filter"
	"github.com/pipesproject/pipes/pipe"
)

// JQ is the `jq` enrichment: a jq program run on each record (body decoded
// when it is JSON, as filters see it). One output becomes the event's new
// payload; several outputs make several events of the same message (all
// must succeed for the message to be deleted); no output drops the record,
// which is then deleted like a filtered one. A program error fails that
// record only. The program has no access to the environment or files. It is
// safe for concurrent use.
type JQ struct {
	prog *filter.JQ
}

var _ pipe.Enricher = (*JQ)(nil)

// NewJQ compiles a jq enrichment program.
func NewJQ(program string) (*JQ, error) {
	prog, err := filter.CompileJQ(program)
	if err != nil {
		return nil, err
	}
	return &JQ{prog: prog}, nil
}

// Enrich runs the program on every event.
func (j *JQ) Enrich(ctx context.Context, events []*pipe.Event) ([]*pipe.Event, pipe.Result, error) {
	out := make([]*pipe.Event, 0, len(events))
	var res pipe.Result
	for _, ev := range events {
		values, err := j.prog.Run(ctx, ev)
		if err != nil {
			res.Failures = append(res.Failures, pipe.ItemFailure{ID: ev.ID(), Err: err})
			continue
		}
		payloads := make([][]byte, 0, len(values))
		for _, v := range values {
			b, err := json.Marshal(v)
			if err != nil {
				payloads = nil
				res.Failures = append(res.Failures, pipe.ItemFailure{ID: ev.ID(), Err: fmt.Errorf("encoding the jq output for message %s: %w", ev.ID(), err)})
				break
			}
			payloads = append(payloads, b)
		}
		body, isJSON := ev.Body()
		for _, b := range payloads {
			next := &pipe.Event{Message: ev.Message, RecordJSON: b}
			next.SetBody(body, isJSON) // share the decoded body
			out = append(out, next)
		}
	}
	return out, res, nil
}
