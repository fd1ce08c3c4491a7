package stdout_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"github.com/pipesproject/pipes/internal/syncbuf"
	"testing"
	"time"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/target/stdout"
	"github.com/pipesproject/pipes/target/targettest"
)

// lockedBuffer is a log or output destination the test reads while the code under test writes it.
type lockedBuffer = syncbuf.Buffer

// payloadsOf reads what the target wrote back into payloads: a line that
// is a JSON string was a text payload, any other line a (compact) JSON
// payload. In batch mode each line is an array of such values.
func payloadsOf(t *testing.T, out string, batch bool) [][]byte {
	t.Helper()
	var got [][]byte
	one := func(raw []byte) {
		var s string
		if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
			got = append(got, []byte(s))
			return
		}
		got = append(got, bytes.Clone(raw))
	}
	sc := bufio.NewScanner(bytes.NewReader([]byte(out)))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if !batch {
			one(sc.Bytes())
			continue
		}
		var items []json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &items); err != nil {
			t.Fatalf("a batch line is not a JSON array: %v", err)
		}
		for _, it := range items {
			one(it)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading the output: %v", err)
	}
	return got
}

func TestContract(t *testing.T) {
	for _, batch := range []bool{false, true} {
		name := "one line per event"
		if batch {
			name = "one line per batch"
		}
		t.Run(name, func(t *testing.T) {
			targettest.Run(t, targettest.Harness{
				New: func(t *testing.T) (pipe.Target, targettest.Inspect) {
					out := &lockedBuffer{}
					tg := stdout.New(stdout.Config{Writer: out, Batch: batch})
					return tg, func(t *testing.T) [][]byte { return payloadsOf(t, out.String(), batch) }
				},
				Quiet: 20 * time.Millisecond, // writes are done when Deliver returns
			})
		})
	}
}
