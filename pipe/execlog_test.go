package pipe_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/syncbuf"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source/memory"
)

// syncBuf is the execution logs' destination, read while the pipe logs.
type syncBuf = syncbuf.Buffer

// lines are the JSON log lines written so far.

func lines(t *testing.T, s *syncBuf) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON log line: %s", l)
		}
		out = append(out, m)
	}
	return out
}

// unavailable is a target error that knows its HTTP status, as the http
// target's do.
type unavailable struct{}

func (unavailable) Error() string       { return "answered 503 Service Unavailable" }
func (unavailable) HTTPStatusCode() int { return 503 }

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestExecutionLogsCarryPipesLogSchemaFields runs a pipe on a memory queue
// at each of Pipes' levels and reads its JSON log lines: which lines each
// level writes, and that every execution line has executionId (a UUID,
// shared by the lines of one batch), messageType (the step), logLevel (the
// pipe's level) and, for failures, Pipes' error object; payloads only at
// trace with include_execution_data.
func TestExecutionLogsCarryPipesLogSchemaFields(t *testing.T) {
	tests := []struct {
		level   string
		payload bool
		want    []string // log messages expected, in any number
		wantNot []string
	}{
		{"off", false, nil, []string{"message failed", "batch done", "target invocation", "batch started"}},
		{"error", false, []string{"message failed"}, []string{"batch done", "target invocation", "batch started"}},
		{"info", false, []string{"message failed", "batch done"}, []string{"target invocation", "batch started"}},
		{"trace", false, []string{"message failed", "batch done", "target invocation", "batch started"}, nil},
		{"trace", true, []string{"message failed", "batch done", "target invocation", "batch started"}, nil},
	}
	for _, tt := range tests {
		name := tt.level
		if tt.payload {
			name += " with execution data"
		}
		t.Run(name, func(t *testing.T) {
			b := memory.NewBroker()
			q := newQueue(t, b, "logs", memory.Options{VisibilityTimeout: 100 * time.Millisecond})
			send(t, q, `{"n":1}`, `{"n":2,"bad":true}`, `{"skip":true}`)
			buf := &syncBuf{}
			log := slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
			target := pipe.TargetFunc(func(_ context.Context, events []*pipe.Event) (pipe.Result, error) {
				var res pipe.Result
				for _, ev := range events {
					if strings.Contains(ev.Message.Body, "bad") && ev.Message.ReceiveCount() == 1 {
						res.Failures = append(res.Failures, pipe.ItemFailure{ID: ev.ID(), Err: unavailable{}})
					}
				}
				return res, nil
			})
			filter := pipe.FilterFunc(func(_ context.Context, ev *pipe.Event) (bool, error) {
				return !strings.Contains(ev.Message.Body, "skip"), nil
			})
			runDrain(t, pipe.Options{Name: "logs", Source: drainable{q}, Target: target, Filter: filter,
				Logger: log, LogLevel: tt.level, IncludeExecutionData: tt.payload, InitialConcurrency: 1, MaxConcurrency: 2})

			seen := map[string]bool{}
			for _, l := range lines(t, buf) {
				msg, _ := l["msg"].(string)
				if _, ok := l["messageType"]; !ok {
					continue // a runner line, not an execution log
				}
				seen[msg] = true
				if id, _ := l["executionId"].(string); !uuidRE.MatchString(id) {
					t.Errorf("%s: executionId %q is not a UUID", msg, id)
				}
				if lv := l["logLevel"]; lv != strings.ToUpper(tt.level) {
					t.Errorf("%s: logLevel %v, want %s", msg, lv, strings.ToUpper(tt.level))
				}
				switch msg {
				case "message failed":
					e, ok := l["pipesError"].(map[string]any)
					if !ok || e["message"] != "answered 503 Service Unavailable" || e["httpStatusCode"] != float64(503) {
						t.Errorf("message failed: pipesError = %v, want Pipes' object with message and httpStatusCode 503", l["pipesError"])
					}
					if s, _ := l["error"].(string); s != "answered 503 Service Unavailable" {
						t.Errorf("message failed: error = %v, want the message as a string, as before", l["error"])
					}
					if l["messageType"] != "TargetInvocationFailed" || l["stage"] != "target" || l["message_id"] == "" {
						t.Errorf("message failed: %v", l)
					}
				case "batch done":
					if mt := l["messageType"]; mt != "ExecutionSucceeded" && mt != "ExecutionPartiallyFailed" {
						t.Errorf("batch done: messageType %v", mt)
					}
				case "target invocation":
					if l["messageType"] != "TargetInvocationStarted" {
						t.Errorf("target invocation: messageType %v", l["messageType"])
					}
					if _, has := l["payload"]; has != tt.payload {
						t.Errorf("target invocation: payload present %v, want %v", has, tt.payload)
					}
				case "batch started":
					if l["messageType"] != "ExecutionStarted" {
						t.Errorf("batch started: messageType %v", l["messageType"])
					}
				}
			}
			for _, m := range tt.want {
				if !seen[m] {
					t.Errorf("no %q line at level %s; saw %v", m, tt.level, seen)
				}
			}
			for _, m := range tt.wantNot {
				if seen[m] {
					t.Errorf("a %q line at level %s", m, tt.level)
				}
			}
			// The lines of the batch that failed share its execution id, and
			// the next batch has another.
			if tt.level == "trace" {
				ids := map[string]map[string]bool{} // executionId → messages
				for _, l := range lines(t, buf) {
					if id, ok := l["executionId"].(string); ok {
						if ids[id] == nil {
							ids[id] = map[string]bool{}
						}
						ids[id][l["msg"].(string)] = true
					}
				}
				if len(ids) < 2 {
					t.Errorf("execution ids %v: want one per batch (at least the first try and the retry)", ids)
				}
				for id, msgs := range ids {
					if !msgs["batch started"] || !msgs["batch done"] {
						t.Errorf("execution %s has lines %v, want its start and its end", id, msgs)
					}
				}
			}
		})
	}
}

// TestExecutionLogsShowAnErrorAsItsMessageInText: the text handler keeps
// the error's message as the error value (error="…").
func TestExecutionLogsShowAnErrorAsItsMessageInText(t *testing.T) {
	b := memory.NewBroker()
	q := newQueue(t, b, "text", memory.Options{VisibilityTimeout: 100 * time.Millisecond})
	send(t, q, "once")
	buf := &syncBuf{}
	log := slog.New(slog.NewTextHandler(buf, nil))
	var calls atomic.Int32
	target := pipe.TargetFunc(func(_ context.Context, events []*pipe.Event) (pipe.Result, error) {
		if calls.Add(1) == 1 { // an outage: held and sent again, no receive spent
			return pipe.Result{}, errors.New("connection refused")
		}
		return pipe.Result{}, nil
	})
	runDrain(t, pipe.Options{Name: "text", Source: drainable{q}, Target: target, Logger: log, LogLevel: "error"})
	out := buf.String()
	if !strings.Contains(out, `msg="batch failed"`) || !strings.Contains(out, `error="connection refused"`) || !strings.Contains(out, "messageType=ExecutionFailed") || !strings.Contains(out, "executionId=") {
		t.Errorf("text log:\n%s", out)
	}
}
