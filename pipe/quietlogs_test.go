package pipe_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/source/memory"
)

// capture is a slog handler that keeps every record, at every level.
type capture struct {
	mu      *sync.Mutex
	records *[]captured
	attrs   []slog.Attr
}

// captured is one log record: its level, message and attributes (groups
// flattened with dots).
type captured struct {
	level slog.Level
	msg   string
	attrs map[string]slog.Value
}

func newCapture() *capture { return &capture{mu: &sync.Mutex{}, records: &[]captured{}} }

func (c *capture) Enabled(context.Context, slog.Level) bool { return true }

func (c *capture) Handle(_ context.Context, r slog.Record) error {
	rec := captured{level: r.Level, msg: r.Message, attrs: map[string]slog.Value{}}
	var add func(prefix string, a slog.Attr)
	add = func(prefix string, a slog.Attr) {
		v := a.Value.Resolve()
		if v.Kind() == slog.KindGroup {
			for _, g := range v.Group() {
				add(prefix+a.Key+".", g)
			}
			return
		}
		rec.attrs[prefix+a.Key] = v
	}
	for _, a := range c.attrs {
		add("", a)
	}
	r.Attrs(func(a slog.Attr) bool { add("", a); return true })
	c.mu.Lock()
	*c.records = append(*c.records, rec)
	c.mu.Unlock()
	return nil
}

func (c *capture) WithAttrs(as []slog.Attr) slog.Handler {
	return &capture{mu: c.mu, records: c.records, attrs: append(append([]slog.Attr{}, c.attrs...), as...)}
}

func (c *capture) WithGroup(string) slog.Handler { return c }

// find returns the records with message msg.
func (c *capture) find(msg string) []captured {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []captured
	for _, r := range *c.records {
		if r.msg == msg {
			out = append(out, r)
		}
	}
	return out
}

// atOrAbove returns the records at level l or above whose message
// contains part.
func (c *capture) atOrAbove(l slog.Level, part string) []captured {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []captured
	for _, r := range *c.records {
		if r.level >= l && strings.Contains(r.msg, part) {
			out = append(out, r)
		}
	}
	return out
}

// failOnce fails every message the first time it is delivered: as a whole
// batch (err) or item by item (the bodies holding "bad").
func failOnce(whole bool) pipe.Target {
	return pipe.TargetFunc(func(_ context.Context, events []*pipe.Event) (pipe.Result, error) {
		if whole {
			if events[0].Message.ReceiveCount() == 1 {
				return pipe.Result{}, pipe.Permanent(errors.New("answered 400 Bad Request"))
			}
			return pipe.Result{}, nil
		}
		var res pipe.Result
		for _, ev := range events {
			if strings.Contains(ev.Message.Body, "bad") && ev.Message.ReceiveCount() == 1 {
				res.Failures = append(res.Failures, pipe.ItemFailure{ID: ev.ID(), Err: errors.New("rejected by the target")})
			}
		}
		return res, nil
	})
}

func TestAFailedBatchLogsOneLineAndEachMessageAtDebug(t *testing.T) {
	tests := []struct {
		name      string
		bodies    int
		bad       int
		whole     bool
		wantType  string
		wantStage string
		wantErr   string
	}{
		{"a batch the target fails whole", 8, 8, true, "ExecutionFailed", "target", "answered 400 Bad Request"},
		{"a batch the target fails in part", 10, 3, false, "ExecutionPartiallyFailed", "target", "rejected by the target"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// 1 s, not less: under load a heartbeat that comes after a shorter
			// lease ended logs "extending visibility failed", a line about a
			// failure this test does not look for.
			q := newQueue(t, memory.NewBroker(), "quiet", memory.Options{VisibilityTimeout: time.Second})
			var bodies []string
			for i := range tt.bodies {
				kind := "good"
				if i < tt.bad {
					kind = "bad"
				}
				bodies = append(bodies, fmt.Sprintf(`{"n":%d,"kind":%q}`, i, kind))
			}
			send(t, q, bodies...)
			c := newCapture()
			runDrain(t, pipe.Options{Name: "quiet", Source: drainable{q}, Target: failOnce(tt.whole), Logger: slog.New(c),
				BatchSize: 10, InitialConcurrency: 1, MaxConcurrency: 2})

			var lines []captured
			for _, r := range c.atOrAbove(slog.LevelInfo, "failed") {
				if !strings.Contains(r.msg, "redrive policy") { // the advice, TestTheQueueAdviceIsGivenOnlyWhereItIsTrue
					lines = append(lines, r)
				}
			}
			if len(lines) != 1 || lines[0].msg != "batch failed" || lines[0].level != slog.LevelError {
				t.Fatalf("at info and above, lines about failures: %+v; want one `batch failed` at error", lines)
			}
			l := lines[0].attrs
			ids := l["message_ids"].Any().([]string)
			wantIDs := min(tt.bad, 5)
			if l["failed"].Int64() != int64(tt.bad) || l["messages"].Int64() != int64(tt.bodies) || len(ids) != wantIDs {
				t.Errorf("batch failed: failed %v of %v, ids %v; want %d of %d and the first %d ids", l["failed"], l["messages"], ids, tt.bad, tt.bodies, wantIDs)
			}
			if l["messageType"].String() != tt.wantType || l["stage"].String() != tt.wantStage || l["error"].String() != tt.wantErr || l["pipesError.message"].String() != tt.wantErr {
				t.Errorf("batch failed: %v", l)
			}
			per := c.find("message failed")
			if len(per) != tt.bad {
				t.Errorf("%d `message failed` lines, want one per failed message (%d)", len(per), tt.bad)
			}
			for _, r := range per {
				if r.level != slog.LevelDebug {
					t.Errorf("`message failed` at %v, want debug", r.level)
				}
			}
			seen := map[string]bool{}
			for _, r := range per {
				seen[r.attrs["message_id"].String()] = true
			}
			for _, id := range ids {
				if !seen[id] {
					t.Errorf("batch failed names %s, which has no `message failed` line", id)
				}
			}
		})
	}
}

// leased is a memory queue that passes for a remote one with leases (as
// an SQS queue): the pipe's AWS advice applies to it.
type leased struct{ drainable }

func (l leased) Open(ctx context.Context) (source.Info, error) {
	info, err := l.drainable.Open(ctx)
	info.InProcess = false
	return info, err
}

// ownAdvice is a memory queue that passes for a RabbitMQ one: it says
// OwnAdvice.
type ownAdvice struct{ drainable }

func (o ownAdvice) Open(ctx context.Context) (source.Info, error) {
	info, err := o.drainable.Open(ctx)
	info.InProcess, info.OwnAdvice = false, true
	return info, err
}

func TestTheQueueAdviceIsGivenOnlyWhereItIsTrue(t *testing.T) {
	const noRedrive, visibility = "no redrive policy", "visibility timeout is shorter"
	tests := []struct {
		name     string
		source   func(*memory.Queue) source.Source
		fail     bool
		want     []string
		wantNot  []string
		wantOnce bool
	}{
		{"an in-process queue that nothing fails into: neither warning", func(q *memory.Queue) source.Source { return drainable{q} }, false,
			nil, []string{noRedrive, visibility}, false},
		{"an in-process queue with a failure: the redrive warning, once, and no visibility warning", func(q *memory.Queue) source.Source { return drainable{q} }, true,
			[]string{noRedrive}, []string{visibility}, true},
		{"a queue with leases: both warnings at start, as for SQS", func(q *memory.Queue) source.Source { return leased{drainable{q}} }, false,
			[]string{noRedrive, visibility}, nil, true},
		{"a source with advice of its own (RabbitMQ): neither", func(q *memory.Queue) source.Source { return ownAdvice{drainable{q}} }, true,
			nil, []string{noRedrive, visibility}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newQueue(t, memory.NewBroker(), "outbox", memory.Options{VisibilityTimeout: 30 * time.Second})
			send(t, q, `{"kind":"good"}`, `{"kind":"good"}`)
			if tt.fail {
				send(t, q, `{"kind":"bad"}`, `{"kind":"bad"}`)
			}
			c := newCapture()
			runDrain(t, pipe.Options{Name: "outbox", Source: tt.source(q), Target: failOnce(false), Logger: slog.New(c),
				TargetTimeout: 10 * time.Second, RetryBackoff: &pipe.Backoff{Base: time.Second, Factor: 1, Max: time.Second}, InitialConcurrency: 1, MaxConcurrency: 2})
			for _, w := range tt.want {
				got := c.atOrAbove(slog.LevelWarn, w)
				if len(got) == 0 || (tt.wantOnce && len(got) != 1) {
					t.Errorf("%d warnings about %q, want one", len(got), w)
				}
			}
			for _, w := range tt.wantNot {
				if got := c.atOrAbove(slog.LevelDebug, w); len(got) > 0 {
					t.Errorf("a warning about %q: %+v", w, got)
				}
			}
		})
	}
}
