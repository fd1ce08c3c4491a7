package ui

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/prometheus/client_golang/prometheus"
)

func TestNormalizeError(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"a text without ids stays", "reported in batchItemFailures", "reported in batchItemFailures"},
		{"a UUID becomes <id>", "message 7ad8e341-0842-4077-a7ac-e30ac15c6894 failed", "message <id> failed"},
		{"a hash becomes <id>", "object deadbeef01 is missing", "object <id> is missing"},
		{"numbers become N", "batchItemFailures[3] of 10 items", "batchItemFailures[N] of N items"},
		{"a number with its unit keeps the unit", "timed out after 1532ms (limit 5s)", "timed out after Nms (limit Ns)"},
		{"an address's numbers become N", "dial tcp 127.0.0.1:34567: connection refused", "dial tcp N.N.N.N:N: connection refused"},
		{"an HTTP status after HTTP stays", "HTTP 503 Service Unavailable", "HTTP 503 Service Unavailable"},
		{"an HTTP status after HTTP/1.1 stays", "answered HTTP/1.1 429 Too Many Requests", "answered HTTP/N.N 429 Too Many Requests"},
		{"an HTTP status after status stays", "status 400: bad request", "status 400: bad request"},
		{"a three-digit count is a number", "received 503 messages", "received N messages"},
		{"a status-looking number far from status is a number", "status 1234 503", "status N N"},
		{"a long id with letters and digits becomes <id>", "instance i-0abc123def not found", "instance i-<id> not found"},
		{"a part of a word that numbers becomes N", "order bad-12 and msg_1234", "order bad-N and msg_N"},
		{"short names with a digit stay", "s3 and v2 over utf8 and http2", "s3 and v2 over utf8 and http2"},
		{"a long mixed part becomes <id>", "key abc123xyz unknown", "key <id> unknown"},
		{"non-ASCII text passes", "échec: délai dépassé après 3 essais", "échec: délai dépassé après N essais"},
		{"a URL keeps its words", "POST https://api.example.com/v1/orders/8812 failed", "POST https://api.example.com/v1/orders/N failed"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NormalizeError(tt.in); got != tt.want {
				t.Errorf("NormalizeError(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestNormalizeErrorReadsAtMost4096Bytes(t *testing.T) {
	long := strings.Repeat("é", 3000) // 6000 bytes, 2 each
	got := NormalizeError(long)
	if len(got) > maxErrorText || !utf8.ValidString(got) {
		t.Fatalf("len %d, valid %v", len(got), utf8.ValidString(got))
	}
}

func FuzzNormalizeError(f *testing.F) {
	for _, s := range []string{"message 7ad8e341-0842-4077-a7ac-e30ac15c6894 failed", "HTTP/1.1 503", "status 1234 503",
		"after 250ms", "i-0abc123def", "bad-12_x9", "127.0.0.1:8080", "日本 42"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := NormalizeError(s)
		if len(n) > len(s) || len(n) > maxErrorText {
			t.Fatalf("%q grew to %q", s, n)
		}
		if again := NormalizeError(n); again != n {
			t.Fatalf("not idempotent: %q → %q → %q", s, n, again)
		}
		if utf8.ValidString(s) && !utf8.ValidString(n) {
			t.Fatalf("%q: invalid UTF-8 %q", s, n)
		}
		// No long id is left: what digits remain are in HTTP statuses and
		// short names (s3, utf8).
		for _, w := range strings.FieldsFunc(n, func(r rune) bool { return r > 127 || r == '-' || r == '_' || !isWordByte(byte(r)) }) {
			if hasDigit(w) && len(w) >= 6 {
				t.Fatalf("%q: a long part with digits is left: %q in %q", s, w, n)
			}
		}
	})
}

func TestFailuresAreGroupedByStageAndNormalisedError(t *testing.T) {
	r := NewRecorder(time.Second, nil)
	t0 := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	fail := func(id, stage, err string, at time.Duration) {
		r.Failed(core.Failure{MessageID: id, Stage: stage, Err: errors.New(err), At: t0.Add(at)})
	}
	fail("m1", "target", "message m1-0001 answered HTTP 503 after 120ms", 0)
	fail("m2", "target", "message m2-0002 answered HTTP 503 after 87ms", time.Second)
	fail("m3", "target", "message m3-0003 answered HTTP 400 after 3ms", 2*time.Second)
	fail("m4", "enrichment", "message m4-0004 answered HTTP 503 after 9ms", 3*time.Second)
	fail("m5", "target", "message m5-0005 answered HTTP 503 after 1ms", 4*time.Second)
	r.mu.Lock()
	got := r.groups.list()
	r.mu.Unlock()
	want := []struct {
		stage, text string
		count       int64
		first, last time.Duration
		example     string
	}{
		{"target", "message mN-N answered HTTP 503 after Nms", 3, 0, 4 * time.Second, "m5"},
		{"enrichment", "message mN-N answered HTTP 503 after Nms", 1, 3 * time.Second, 3 * time.Second, "m4"},
		{"target", "message mN-N answered HTTP 400 after Nms", 1, 2 * time.Second, 2 * time.Second, "m3"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d groups, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Stage != w.stage || g.Error != w.text || g.Count != w.count || !g.First.Equal(t0.Add(w.first)) ||
			!g.Last.Equal(t0.Add(w.last)) || g.ExampleID != w.example || !strings.Contains(g.Example, w.example+"-000") {
			t.Errorf("group %d = %+v, want %+v", i, g, w)
		}
	}
}

func TestGroupsPastMaxGroupsAreCountedTogether(t *testing.T) {
	r := NewRecorder(time.Second, nil)
	for i := range MaxGroups + 10 {
		r.Failed(core.Failure{MessageID: "m", Stage: "target", Err: errors.New("kind " + strings.Repeat("x", i)), At: time.Now()})
	}
	r.mu.Lock()
	got := r.groups.list()
	r.mu.Unlock()
	if len(got) != MaxGroups+1 {
		t.Fatalf("%d groups, want %d", len(got), MaxGroups+1)
	}
	if got[0].Error != otherErrors || got[0].Count != 10 {
		t.Fatalf("the first group is %+v, want %q counted 10", got[0], otherErrors)
	}
}

func TestQuantile(t *testing.T) {
	bounds := []float64{0.001, 0.002, 0.004, 0.008}
	tests := []struct {
		name       string
		cumulative []uint64
		total      uint64
		q, want    float64
	}{
		{"no observation", []uint64{0, 0, 0, 0}, 0, 0.5, math.NaN()},
		{"all in the first bucket: interpolated from 0", []uint64{10, 10, 10, 10}, 10, 0.5, 0.0005},
		{"the median in the third bucket", []uint64{2, 4, 8, 10}, 10, 0.5, 0.0025},
		{"the p99 in the last bucket", []uint64{2, 4, 8, 10}, 10, 0.99, 0.0078},
		{"past the last bound: the last bound", []uint64{0, 0, 0, 0}, 4, 0.5, 0.008},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := quantile(tt.q, bounds, tt.cumulative, tt.total)
			if math.IsNaN(tt.want) != math.IsNaN(got) || !math.IsNaN(got) && math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("quantile(%v) = %v, want %v", tt.q, got, tt.want)
			}
		})
	}
}

func TestStateOf(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name       string
		st         core.Status
		word, code string
	}{
		{"running", core.Status{Started: true, Ready: true}, "running", "running"},
		{"starting", core.Status{}, "starting", "starting"},
		{"a source that would not open", core.Status{Err: boom}, "not ready", "source_failing"},
		{"draining before anything", core.Status{Stopping: true, CircuitOpen: true}, "draining", "draining"},
		{"the circuit open", core.Status{Started: true, Ready: true, CircuitOpen: true, Paused: true}, "circuit open", "target_failing"},
		{"receives failing", core.Status{Started: true, Err: boom}, "not ready", "source_failing"},
		{"paused", core.Status{Started: true, Ready: true, Paused: true}, "paused", "paused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := StateOf(tt.st)
			if s.String() != tt.word || s.Code() != tt.code {
				t.Errorf("StateOf(%+v) = %q / %q, want %q / %q", tt.st, s, s.Code(), tt.word, tt.code)
			}
		})
	}
}

func TestTheLatencyOfEachIntervalComesFromTheHistogramsBuckets(t *testing.T) {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "d", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)})
	r := NewRecorder(time.Second, nil)
	t0 := time.Now()
	r.sample(t0, unknownGauges(), h)
	for range 99 {
		h.Observe(0.0015) // in (0.001, 0.002]
	}
	h.Observe(0.5) // in (0.256, 0.512]
	r.sample(t0.Add(time.Second), unknownGauges(), h)
	r.sample(t0.Add(2*time.Second), unknownGauges(), h) // no batch in this interval
	s := r.series(t0.Add(2 * time.Second))
	if len(s.P50Ms) != 2 {
		t.Fatalf("%d latencies, want 2", len(s.P50Ms))
	}
	if p50 := s.P50Ms[0]; p50 < 1 || p50 > 2 {
		t.Errorf("p50 = %v ms, want within (1, 2]", p50)
	}
	if p99 := s.P99Ms[0]; p99 < 1 || p99 > 2 {
		t.Errorf("p99 = %v ms, want within (1, 2]: 99 of 100 were", p99)
	}
	if !math.IsNaN(s.P50Ms[1]) || !math.IsNaN(s.P99Ms[1]) {
		t.Errorf("an interval without batches has latencies %v, %v, want none (null)", s.P50Ms[1], s.P99Ms[1])
	}
	b, err := s.P50Ms.MarshalJSON()
	if err != nil || !strings.HasSuffix(string(b), ",null]") {
		t.Errorf("the JSON is %s, %v: want null for the interval without batches", b, err)
	}
}

func TestTheRingStaysFixedSize(t *testing.T) {
	r := NewRecorder(time.Second, nil)
	t0 := time.Now()
	for i := range 3 * int(History/time.Second) {
		r.sample(t0.Add(time.Duration(i)*time.Second), unknownGauges(), nil)
	}
	if n, c := len(r.samples), cap(r.samples); n != c || c != int(History/time.Second)+1 {
		t.Fatalf("the ring holds %d of %d samples", n, c)
	}
	if got := len(r.series(t0).T); got != int(History/time.Second) {
		t.Fatalf("%d points, want %d", got, int(History/time.Second))
	}
}

func TestClip(t *testing.T) {
	words := strings.Repeat("word ", 60) // 300 bytes
	tests := []struct {
		name, in, want string
	}{
		{"a short text stays", "reported in batchItemFailures", "reported in batchItemFailures"},
		{"a long text is cut at a space", words, strings.Repeat("word ", 39) + "word …"},
		{"a long word is cut at a rune", strings.Repeat("é", 150), strings.Repeat("é", 100) + " …"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := clip(tt.in); got != tt.want || !utf8.ValidString(got) {
				t.Errorf("clip = %q, want %q", got, tt.want)
			}
		})
	}
}
