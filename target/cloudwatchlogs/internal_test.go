package cloudwatchlogs

import (
	"strconv"
	"strings"
	"testing"
	"time"
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
