package cloudwatchlogs

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/kit/batching"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

func TestSplitKeepsEachCallWithinPutLogEventsLimits(t *testing.T) {
	t.Parallel()
	hour := time.Hour.Milliseconds()
	for _, tc := range []struct {
		name    string
		entries func() []entry
		sizes   []int
	}{
		{"10,001 small events make calls of 10,000 and 1", func() []entry {
			es := make([]entry, MaxBatch+1)
			for i := range es {
				es[i] = entry{ev: i, stream: "s", ts: 1, msg: "x"}
			}
			return es
		}, []int{MaxBatch, 1}},
		{"the bytes count the 26 bytes of each event", func() []entry {
			// Two events fit exactly; the third goes to a call of its own.
			half := MaxBatchBytes/2 - EventOverhead
			return []entry{{stream: "s", msg: strings.Repeat("x", half)}, {stream: "s", msg: strings.Repeat("x", half)}, {stream: "s", msg: "x"}}
		}, []int{2, 1}},
		{"a call spans less than 24 hours", func() []entry {
			return []entry{{stream: "s", ts: 0, msg: "a"}, {stream: "s", ts: 24*hour - 1, msg: "b"}, {stream: "s", ts: 24 * hour, msg: "c"}}
		}, []int{2, 1}},
		{"each stream has calls of its own", func() []entry {
			return []entry{{stream: "a", msg: "1"}, {stream: "b", msg: "2"}, {stream: "a", msg: "3"}}
		}, []int{2, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			chunks := split(tc.entries())
			var sizes []int
			for _, c := range chunks {
				sizes = append(sizes, len(c))
				for i := 1; i < len(c); i++ {
					if c[i].ts < c[i-1].ts || c[i].stream != c[0].stream {
						t.Errorf("a call is out of order or mixes streams: %+v", c)
					}
				}
			}
			if fmtInts(sizes) != fmtInts(tc.sizes) {
				t.Errorf("call sizes = %v, want %v", sizes, tc.sizes)
			}
		})
	}
}

func fmtInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, " ")
}

// BenchmarkSplit measures cutting a batch of 10,000 events of two streams,
// out of timestamp order, into calls.
func BenchmarkSplit(b *testing.B) {
	base := make([]entry, 10000)
	for i := range base {
		base[i] = entry{ev: i, stream: "s" + strconv.Itoa(i%2), ts: int64((i * 7919) % 10000), msg: `{"messageId":"m","body":"hello"}`}
	}
	es := make([]entry, len(base))
	b.ReportAllocs()
	for b.Loop() {
		copy(es, base)
		if len(split(es)) == 0 {
			b.Fatal("no calls")
		}
	}
}

// FuzzSplit checks split's calls against PutLogEvents' rules for any
// batch: every entry in exactly one call, one stream a call, timestamps in
// order, at most MaxBatch events and MaxBatchBytes bytes (an entry alone
// may be as large as the limit allows), a span under 24 hours.
func FuzzSplit(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 200, 7, 7, 9})
	f.Add([]byte{255, 255, 255, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		var es []entry
		for i := 0; i+2 < len(data); i += 3 {
			es = append(es, entry{
				ev:     len(es),
				stream: "s" + strconv.Itoa(int(data[i]%3)),
				ts:     int64(data[i+1]) * int64(data[i+1]) * 3_600_000 / 200,
				msg:    strings.Repeat("x", 1+int(data[i+2])*4000),
			})
		}
		n := len(es)
		chunks := split(es)
		seen := 0
		for _, c := range chunks {
			seen += len(c)
			bytes := 0
			for i, e := range c {
				bytes += e.size()
				if e.stream != c[0].stream || i > 0 && e.ts < c[i-1].ts {
					t.Fatalf("a call mixes streams or is out of order: %v", c)
				}
			}
			if len(c) > MaxBatch || len(c) > 1 && bytes > MaxBatchBytes || c[len(c)-1].ts-c[0].ts >= MaxSpan.Milliseconds() {
				t.Fatalf("a call of %d events, %d bytes, spanning %d ms is over the limits", len(c), bytes, c[len(c)-1].ts-c[0].ts)
			}
		}
		if seen != n {
			t.Fatalf("the calls carry %d entries, want %d", seen, n)
		}
	})
}

// BenchmarkBuild measures building the log events of a batch of 100 SQS
// records with a templated stream and a dynamic timestamp, and cutting
// them into calls.
func BenchmarkBuild(b *testing.B) {
	tg, err := newTarget(Config{LogGroup: "/pipes/orders", LogStream: "orders-<$.body.kind>", Timestamp: "$.body.time"})
	if err != nil {
		b.Fatal(err)
	}
	evs := make([]*pipe.Event, 100)
	for i := range evs {
		ev, err := pipe.NewEvent(&source.Message{MessageID: "m" + strconv.Itoa(i), Body: `{"kind":"k` + strconv.Itoa(i%3) + `","time":` + strconv.Itoa(1_750_000_000_000+i) + `,"total":12.5}`})
		if err != nil {
			b.Fatal(err)
		}
		evs[i] = ev
	}
	errs := make([]error, len(evs))
	b.ReportAllocs()
	for b.Loop() {
		if chunks := split(batching.Build(evs, errs, tg.entry)); len(chunks) != 3 {
			b.Fatalf("%d calls, want 3", len(chunks))
		}
	}
}
