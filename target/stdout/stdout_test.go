package stdout_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/target/stdout"
)

func event(id, body, payload string) *pipe.Event {
	return &pipe.Event{Message: &source.Message{MessageID: id, Body: body}, RecordJSON: []byte(payload)}
}

func lines(t *testing.T, out string) []string {
	t.Helper()
	if out != "" && !strings.HasSuffix(out, "\n") {
		t.Errorf("output %q does not end with a newline", out)
	}
	var ls []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if !json.Valid(sc.Bytes()) {
			t.Errorf("line %q is not valid JSON", sc.Text())
		}
		ls = append(ls, sc.Text())
	}
	return ls
}

func TestDeliverWritesLines(t *testing.T) {
	evs := []*pipe.Event{
		event("1", "a", `{"order": 1}`),
		event("2", "b", "{\n  \"pretty\": [1,\n 2]\n}\n"),
		event("3", "c", "plain text\nover two lines"),
		event("4", "d", ""),
		event("5", "e", `"a string"`),
	}
	tests := []struct {
		name  string
		batch bool
		want  []string
	}{
		{"one line per event", false, []string{
			`{"order":1}`, `{"pretty":[1,2]}`, `"plain text\nover two lines"`, `""`, `"a string"`,
		}},
		{"one line per batch", true, []string{
			`[{"order":1},{"pretty":[1,2]},"plain text\nover two lines","","a string"]`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			tg := stdout.New(stdout.Config{Writer: &out, Batch: tt.batch})
			r, err := tg.Deliver(context.Background(), evs)
			if err != nil || len(r.Failures) > 0 {
				t.Fatalf("Deliver = %v, %v; want success", r, err)
			}
			if got := lines(t, out.String()); !slices.Equal(got, tt.want) {
				t.Errorf("lines = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFailOn(t *testing.T) {
	evs := []*pipe.Event{
		event("1", `{"status":"ok"}`, `{"n":1}`),
		event("2", `{"status":"poison"}`, `{"n":2}`),
		event("3", `{"status":"ok"}`, `{"n":3}`),
	}
	tests := []struct {
		name   string
		batch  bool
		failOn string
		want   []string
		failed []string
	}{
		{"an item whose body contains fail_on fails and is not written", false, "poison", []string{`{"n":1}`, `{"n":3}`}, []string{"2"}},
		{"in batch mode the line holds the other items", true, "poison", []string{`[{"n":1},{"n":3}]`}, []string{"2"}},
		{"a batch whose items all fail writes nothing", true, "status", nil, []string{"1", "2", "3"}},
		{"an empty fail_on fails nothing", false, "", []string{`{"n":1}`, `{"n":2}`, `{"n":3}`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			tg := stdout.New(stdout.Config{Writer: &out, Batch: tt.batch, FailOn: tt.failOn})
			r, err := tg.Deliver(context.Background(), evs)
			if err != nil {
				t.Fatalf("Deliver: %v", err)
			}
			var failed []string
			for _, f := range r.Failures {
				failed = append(failed, f.ID)
				if f.Err == nil || f.Err.Error() != "body contains fail_on text" {
					t.Errorf("item %s failed with %v", f.ID, f.Err)
				}
			}
			if !slices.Equal(failed, tt.failed) {
				t.Errorf("failed = %v, want %v", failed, tt.failed)
			}
			if got := lines(t, out.String()); !slices.Equal(got, tt.want) {
				t.Errorf("lines = %q, want %q", got, tt.want)
			}
		})
	}
}

// writeRecorder records every Write call. It is deliberately not locked:
// the race detector reports the target if it writes concurrently.
type writeRecorder struct{ writes []string }

func (w *writeRecorder) Write(p []byte) (int, error) {
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

func TestConcurrentDeliverWritesWholeLines(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch %v", batch), func(t *testing.T) {
			w := &writeRecorder{}
			tg := stdout.New(stdout.Config{Writer: w, Batch: batch})
			const batches, size = 20, 10
			var wg sync.WaitGroup
			for b := range batches {
				wg.Go(func() {
					evs := make([]*pipe.Event, size)
					for i := range evs {
						id := fmt.Sprintf("%d-%d", b, i)
						evs[i] = event(id, id, `{"id":"`+id+`","pad":"`+strings.Repeat("x", 4000)+`"}`)
					}
					if _, err := tg.Deliver(context.Background(), evs); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			want := batches * size
			if batch {
				want = batches
			}
			if len(w.writes) != want {
				t.Errorf("%d writes, want %d", len(w.writes), want)
			}
			for _, line := range w.writes {
				if strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n") || !json.Valid([]byte(line)) {
					t.Fatalf("write %.80q… is not one whole JSON line", line)
				}
			}
		})
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteErrorFailsTheBatch(t *testing.T) {
	tg := stdout.New(stdout.Config{Writer: failingWriter{}})
	_, err := tg.Deliver(context.Background(), []*pipe.Event{event("1", "a", "{}")})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("error = %v, want the write error", err)
	}
}

func TestCancelledContextWritesNothing(t *testing.T) {
	var out bytes.Buffer
	tg := stdout.New(stdout.Config{Writer: &out})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tg.Deliver(ctx, []*pipe.Event{event("1", "a", "{}")}); !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want context.Canceled", err)
	}
	if out.Len() > 0 {
		t.Errorf("wrote %q", out.String())
	}
}

func BenchmarkDeliver(b *testing.B) {
	evs := make([]*pipe.Event, 10)
	for i := range evs {
		evs[i] = event(fmt.Sprint(i), "x", `{"data":"`+strings.Repeat("x", 1024-11)+`"}`)
	}
	for _, batch := range []bool{false, true} {
		b.Run(fmt.Sprintf("batch %v", batch), func(b *testing.B) {
			tg := stdout.New(stdout.Config{Writer: &discardWriter{}, Batch: batch})
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tg.Deliver(context.Background(), evs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

type discardWriter struct{}

func (*discardWriter) Write(p []byte) (int, error) { return len(p), nil }
