// Package stdout is the `stdout` target of pipes: it writes events as JSON
// lines, for trying a pipe out and for debugging. With FailOn it can also
// fail chosen items, to show the retry and dead-letter lifecycle.
package stdout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/pipesproject/pipes/pipe"
)

// errFailOn is the reason of items failed by Config.FailOn, and
// errFailMatch of those Config.FailOnMatch passes.
var (
	errFailOn    = errors.New("body contains fail_on text")
	errFailMatch = errors.New("record matches fail_on")
)

// Config configures a stdout target.
type Config struct {
	// Writer receives the lines; default os.Stdout.
	Writer io.Writer
	// Batch writes one line per batch, a JSON array of the payloads; false
	// writes one line per event.
	Batch bool
	// FailOn, when not empty, fails every item whose message body contains
	// it: those items are reported failed and not written. A debugging aid.
	FailOn string
	// FailOnMatch, when set, fails every item it passes instead (fail_on's
	// path form, `$.body.poison == true`, is an EventBridge pattern here);
	// an error of its fails that item. FailOn is then not looked for.
	FailOnMatch pipe.Filter
}

// Target writes events to a writer as JSON lines. It is safe for concurrent
// use: a line is always written by one Write call, under a lock, so lines of
// concurrent batches never interleave, and the lines of one batch are
// written together.
type Target struct {
	mu        sync.Mutex // serialises writes to w
	w         io.Writer
	batch     bool
	failOn    string
	failMatch pipe.Filter
}

var _ pipe.Target = (*Target)(nil)

// New returns a stdout target.
func New(cfg Config) *Target {
	w := cfg.Writer
	if w == nil {
		w = os.Stdout
	}
	return &Target{w: w, batch: cfg.Batch, failOn: cfg.FailOn, failMatch: cfg.FailOnMatch}
}

// Deliver writes the events' payloads, each as JSON: a payload that is valid
// JSON is written compacted onto one line, any other as a JSON string. Items
// whose body contains FailOn (or that FailOnMatch passes) are not written
// and are reported failed. It
// blocks while another batch is being written. A write error fails the
// whole batch (some of its lines may have been written).
func (t *Target) Deliver(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
	if err := ctx.Err(); err != nil {
		return pipe.Result{}, fmt.Errorf("writing %d events: %w", len(events), err)
	}
	var result pipe.Result
	var buf bytes.Buffer
	size := 3
	for _, ev := range events {
		size += len(ev.RecordJSON) + 1
	}
	buf.Grow(size)
	ends := make([]int, 0, len(events)) // where each line ends in buf
	written := 0
	for _, ev := range events {
		if err := t.fails(ctx, ev); err != nil {
			result.Failures = append(result.Failures, pipe.ItemFailure{ID: ev.ID(), Err: err})
			continue
		}
		switch {
		case !t.batch:
			appendJSON(&buf, ev.RecordJSON)
			buf.WriteByte('\n')
			ends = append(ends, buf.Len())
		case written == 0:
			buf.WriteByte('[')
			appendJSON(&buf, ev.RecordJSON)
		default:
			buf.WriteByte(',')
			appendJSON(&buf, ev.RecordJSON)
		}
		written++
	}
	if t.batch && written > 0 {
		buf.WriteString("]\n")
		ends = append(ends, buf.Len())
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	b := buf.Bytes()
	start := 0
	for _, end := range ends {
		if _, err := t.w.Write(b[start:end]); err != nil {
			return pipe.Result{}, fmt.Errorf("writing %d events: %w", len(events), err)
		}
		start = end
	}
	return result, nil
}

// fails is why ev is failed by fail_on; nil when it is not.
func (t *Target) fails(ctx context.Context, ev *pipe.Event) error {
	if t.failMatch != nil {
		ok, err := t.failMatch.Match(ctx, ev)
		switch {
		case err != nil:
			return fmt.Errorf("matching fail_on: %w", err)
		case ok:
			return errFailMatch
		}
		return nil
	}
	if t.failOn != "" && strings.Contains(ev.Message.Body, t.failOn) {
		return errFailOn
	}
	return nil
}

// appendJSON writes p to buf as one line of JSON: compacted when p is valid
// JSON, else as a JSON string.
func appendJSON(buf *bytes.Buffer, p []byte) {
	n := buf.Len()
	if err := json.Compact(buf, p); err == nil {
		return
	}
	buf.Truncate(n)
	s, err := json.Marshal(string(p))
	if err != nil { // a string always encodes
		panic(fmt.Sprintf("encoding a payload as a JSON string: %v", err))
	}
	buf.Write(s)
}
