package enrich

import (
	"errors"
	"testing"

	"github.com/pipesproject/pipes/internal/kit/partial"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

func testEvents(ids ...string) []*pipe.Event {
	evs := make([]*pipe.Event, len(ids))
	for i, id := range ids {
		evs[i], _ = pipe.NewEvent(&source.Message{MessageID: id, Body: `{"k":1}`})
	}
	return evs
}

// FuzzReadAnswer checks that no answer panics, and that whatever is read
// only names messages of the batch, or fails as malformed.
func FuzzReadAnswer(f *testing.F) {
	for _, seed := range []string{``, `""`, `{}`, `[]`, `null`, `[1,2]`, `[1]`, `"x"`, `not json`,
		`[{"messageId":"a"},{"messageId":"b","v":[1]}]`, `[{"messageId":"zz"}]`, `[{"messageId":1}]`,
		`{"batchItemFailures":[{"itemIdentifier":"a"}],"items":[{"x":1}]}`, `{"batchItemFailures":null,"items":{}}`} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	f.Fuzz(func(t *testing.T, answer string, textOK bool) {
		events := testEvents("a", "b")
		if textOK {
			events = events[:1]
		}
		m, err := readAnswer(events, []byte(answer), textOK)
		if err != nil {
			if !errors.Is(err, partial.ErrMalformedAnswer) {
				t.Fatalf("error %v does not wrap ErrMalformedAnswer", err)
			}
			return
		}
		known := inBatch(events)
		for _, ev := range m.out {
			if ev == nil || ev.Message == nil || !known(ev.ID()) {
				t.Fatalf("output %v is not tied to a message of the batch", ev)
			}
		}
		for _, fl := range m.res.Failures {
			if !known(fl.ID) || fl.Err == nil {
				t.Fatalf("failure %+v names no message of the batch or has no reason", fl)
			}
		}
		if m.split && (len(m.out) > 0 || len(events) == 1) {
			t.Fatalf("a split answer carries outputs or comes from a batch of one")
		}
	})
}

func BenchmarkReadAnswerPositional(b *testing.B) {
	events := testEvents("a", "b", "c", "d", "e", "f", "g", "h", "i", "j")
	answer := []byte(`[{"x":1},{"x":2},{"x":3},{"x":4},{"x":5},{"x":6},{"x":7},{"x":8},{"x":9},{"x":10}]`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := readAnswer(events, answer, false); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadAnswerByMessageID(b *testing.B) {
	events := testEvents("a", "b", "c", "d", "e", "f", "g", "h", "i", "j")
	answer := []byte(`[{"messageId":"j"},{"messageId":"i"},{"messageId":"h"},{"messageId":"g"},{"messageId":"f"},` +
		`{"messageId":"e"},{"messageId":"d"},{"messageId":"c"},{"messageId":"b"},{"messageId":"a"}]`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := readAnswer(events, answer, false); err != nil {
			b.Fatal(err)
		}
	}
}
