package batching

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

func TestSplitKeepsCallsWithinTheCountAndTheByteLimit(t *testing.T) {
	tests := []struct {
		name            string
		sizes           []int
		maxCount, bytes int
		want            string
	}{
		{"no entries make no calls", nil, 3, 10, "[]"},
		{"entries past the count start a new call", []int{1, 1, 1, 1}, 3, 10, "[[1 1 1] [1]]"},
		{"entries past the byte limit start a new call", []int{6, 4, 1}, 3, 10, "[[6 4] [1]]"},
		{"an entry larger than the limit goes alone", []int{1, 30, 1}, 3, 10, "[[1] [30] [1]]"},
		{"a first entry larger than the limit goes alone", []int{30, 1}, 3, 10, "[[30] [1]]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Split(tt.sizes, tt.maxCount, tt.bytes, func(n int) int { return n })
			if got == nil {
				got = [][]int{}
			}
			if fmt.Sprint(got) != tt.want {
				t.Errorf("Split = %v, want %s", got, tt.want)
			}
		})
	}
}

func FuzzSplit(f *testing.F) {
	f.Add([]byte{1, 2, 3}, uint8(2), uint8(4))
	f.Add([]byte{200, 1}, uint8(10), uint8(100))
	f.Add([]byte{}, uint8(1), uint8(1))
	f.Fuzz(func(t *testing.T, sizes []byte, maxCount, maxBytes uint8) {
		if maxCount == 0 {
			return
		}
		es := make([]int, len(sizes))
		for i, s := range sizes {
			es[i] = int(s)
		}
		n := 0
		for _, c := range Split(es, int(maxCount), int(maxBytes), func(n int) int { return n }) {
			total := 0
			for _, e := range c {
				total += e
			}
			if len(c) == 0 || len(c) > int(maxCount) || len(c) > 1 && total > int(maxBytes) {
				t.Fatalf("call %v breaks the limits %d entries, %d bytes", c, maxCount, maxBytes)
			}
			n += len(c)
		}
		if n != len(es) {
			t.Fatalf("calls hold %d entries of %d", n, len(es))
		}
	})
}

func BenchmarkSplitAThousandEntries(b *testing.B) {
	es := make([]int, 1000)
	for i := range es {
		es[i] = 1 + i%3000
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = Split(es, 10, 256<<10, func(n int) int { return n })
	}
}

var errCall = errors.New("call failed")

func TestRunStopsAnOrderedBatchAtTheFirstFailedCall(t *testing.T) {
	tests := []struct {
		name        string
		maxParallel int
		ordered     bool
		fail        int // the chunk whose call fails, -1 for none
		wantSent    string
		wantSkipped string
	}{
		{"an ordered batch stops after a failed call", 1, true, 1, "[[0] [1]]", "[2 3]"},
		{"an unordered batch one at a time goes on", 1, false, 1, "[[0] [1] [2] [3]]", "[]"},
		{"a clean ordered batch sends everything", 1, true, -1, "[[0] [1] [2] [3]]", "[]"},
		{"a parallel batch sends everything", 3, false, 1, "[[0] [1] [2] [3]]", "[]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			sent := make([][]int, 0)
			skipped := make([]int, 0)
			c := Calls[int]{MaxParallel: tt.maxParallel, Ordered: tt.ordered}
			c.Send = func(_ context.Context, chunk []int, _ []error) Outcome {
				mu.Lock()
				defer mu.Unlock()
				sent = append(sent, chunk)
				if chunk[0] == tt.fail {
					return Outcome{CallErr: errCall}
				}
				return Outcome{Sent: true}
			}
			c.Skip = func(rest []int, _ []error) { skipped = append(skipped, rest...) }
			out := c.Run(t.Context(), [][]int{{0}, {1}, {2}, {3}}, nil)
			if tt.maxParallel > 1 {
				// Order of parallel calls is not fixed: compare as a set.
				seen := map[int]bool{}
				for _, s := range sent {
					seen[s[0]] = true
				}
				sent = [][]int{}
				for i := range 4 {
					if seen[i] {
						sent = append(sent, []int{i})
					}
				}
			}
			if fmt.Sprint(sent) != tt.wantSent || fmt.Sprint(skipped) != tt.wantSkipped {
				t.Errorf("sent %v, skipped %v; want %s, %s", sent, skipped, tt.wantSent, tt.wantSkipped)
			}
			if len(out) != 4 {
				t.Fatalf("Run gave %d outcomes for 4 chunks", len(out))
			}
			if tt.fail >= 0 && out[tt.fail].CallErr != errCall {
				t.Errorf("outcome of the failed chunk is %+v", out[tt.fail])
			}
		})
	}
}

func TestOneByOneMergesOutcomesAndKeepsTheFirstCallError(t *testing.T) {
	errOther := errors.New("other")
	tests := []struct {
		name        string
		ordered     bool
		outcomes    map[int]Outcome
		want        Outcome
		wantSkipped string
	}{
		{"all sent is clean", false, map[int]Outcome{}, Outcome{Sent: true}, "[]"},
		{"one refused entry fails alone", false, map[int]Outcome{1: {EntryFailed: true}}, Outcome{Sent: true, EntryFailed: true}, "[]"},
		{"the first call error is kept", false, map[int]Outcome{0: {CallErr: errCall}, 2: {CallErr: errOther}}, Outcome{Sent: true, CallErr: errCall}, "[]"},
		{"an ordered chunk stops at the first failure", true, map[int]Outcome{1: {CallErr: errCall}}, Outcome{Sent: true, CallErr: errCall}, "[2]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			skipped := make([]int, 0)
			c := Calls[int]{Ordered: tt.ordered, MaxParallel: 1}
			c.Send = func(_ context.Context, chunk []int, _ []error) Outcome {
				if o, ok := tt.outcomes[chunk[0]]; ok {
					return o
				}
				return Outcome{Sent: true}
			}
			c.Skip = func(rest []int, _ []error) { skipped = append(skipped, rest...) }
			got := c.OneByOne(t.Context(), []int{0, 1, 2}, nil)
			if got != tt.want || fmt.Sprint(skipped) != tt.wantSkipped {
				t.Errorf("OneByOne = %+v, skipped %v; want %+v, %s", got, skipped, tt.want, tt.wantSkipped)
			}
		})
	}
}

func TestBatchErrorFailsTheWholeBatchOnlyWhenNothingWentThrough(t *testing.T) {
	throttled := pipe.Throttled(errors.New("slow down"))
	tests := []struct {
		name       string
		out        []Outcome
		prepFailed bool
		want       error
	}{
		{"no calls give no error", nil, false, nil},
		{"every call failed: the batch fails", []Outcome{{CallErr: errCall}, {CallErr: errCall}}, false, errCall},
		{"a throttled call is preferred", []Outcome{{CallErr: errCall}, {CallErr: throttled}}, false, throttled},
		{"a sent call makes failures per item", []Outcome{{CallErr: errCall}, {Sent: true}}, false, nil},
		{"a refused entry makes failures per item", []Outcome{{CallErr: errCall}, {EntryFailed: true}}, false, nil},
		{"an entry that could not be built makes failures per item", []Outcome{{CallErr: errCall}}, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := BatchError(tt.out, tt.prepFailed); got != tt.want {
				t.Errorf("BatchError = %v, want %v", got, tt.want)
			}
		})
	}
}

type answer struct{ id, code string }

func TestByIDMapsAnswersToEntriesAndFailsTheUnmentioned(t *testing.T) {
	tests := []struct {
		name        string
		succeeded   []string
		failed      []answer
		want        Outcome
		wantRefused string
		wantUnknown string
		wantMissing string
	}{
		{"all succeeded", []string{"a", "b", "c"}, nil, Outcome{Sent: true}, "[]", "[]", "[]"},
		{"a refused entry is reported with its failure", []string{"a", "c"}, []answer{{"b", "X"}}, Outcome{Sent: true, EntryFailed: true}, "[b:X]", "[]", "[]"},
		{"an unknown id is reported and ignored", []string{"a", "b", "c"}, []answer{{"z", "X"}}, Outcome{Sent: true}, "[]", "[z]", "[]"},
		{"an entry in neither list is missing", []string{"a"}, []answer{{"b", "X"}}, Outcome{Sent: true, EntryFailed: true}, "[b:X]", "[]", "[c]"},
		{"nothing answered fails everything", nil, nil, Outcome{EntryFailed: true}, "[]", "[]", "[a b c]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			refused, unknown, missing := []string{}, []string{}, []string{}
			got := ByID([]string{"a", "b", "c"}, func(e string) string { return e },
				tt.succeeded, func(s string) string { return s },
				tt.failed, func(f answer) string { return f.id },
				func(e string, f answer) { refused = append(refused, e+":"+f.code) },
				func(id string) { unknown = append(unknown, id) },
				func(e string) { missing = append(missing, e) })
			if got != tt.want || fmt.Sprint(refused) != tt.wantRefused || fmt.Sprint(unknown) != tt.wantUnknown || fmt.Sprint(missing) != tt.wantMissing {
				t.Errorf("ByID = %+v, refused %v, unknown %v, missing %v; want %+v, %s, %s, %s",
					got, refused, unknown, missing, tt.want, tt.wantRefused, tt.wantUnknown, tt.wantMissing)
			}
		})
	}
}

func events(ids ...string) []*pipe.Event {
	evs := make([]*pipe.Event, len(ids))
	for i, id := range ids {
		evs[i] = &pipe.Event{Message: &source.Message{MessageID: id}}
	}
	return evs
}

func TestBuildRecordsTheEventsThatCouldNotBeBuilt(t *testing.T) {
	evs := events("a", "b", "c")
	errs := make([]error, len(evs))
	got := Build(evs, errs, func(i int, ev *pipe.Event) (string, error) {
		if ev.ID() == "b" {
			return "", errCall
		}
		return ev.ID(), nil
	})
	if fmt.Sprint(got) != "[a c]" || errs[0] != nil || errs[1] != errCall || errs[2] != nil {
		t.Errorf("Build = %v, errs %v", got, errs)
	}
}

func TestResultGivesOneFailurePerMessage(t *testing.T) {
	tests := []struct {
		name string
		ids  []string
		errs []error
		want string
	}{
		{"no errors give no failures", []string{"a", "b"}, []error{nil, nil}, "[]"},
		{"each failed event is a failure", []string{"a", "b", "c"}, []error{errCall, nil, errCall}, "[a c]"},
		{"a message failed twice is one failure", []string{"a", "a"}, []error{errCall, errCall}, "[a]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Result(events(tt.ids...), tt.errs)
			ids := []string{}
			for _, f := range r.Failures {
				ids = append(ids, f.ID)
				if f.Err == nil {
					t.Errorf("failure %s has no error", f.ID)
				}
			}
			if fmt.Sprint(ids) != tt.want {
				t.Errorf("Result failures = %v, want %s", ids, tt.want)
			}
		})
	}
}

func TestJSONArrayKeepsJSONPayloadsAndQuotesTheOthers(t *testing.T) {
	tests := []struct {
		name     string
		payloads []string
		want     string
	}{
		{"no events make an empty array", nil, `[]`},
		{"JSON payloads go as they are", []string{`{"a":1}`, `[2]`, `"s"`}, `[{"a":1},[2],"s"]`},
		{"other payloads go as strings", []string{`plain`, ``, "\xff"}, `["plain","","\ufffd"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs := make([]*pipe.Event, len(tt.payloads))
			for i, p := range tt.payloads {
				evs[i] = &pipe.Event{Message: &source.Message{MessageID: fmt.Sprint(i)}, RecordJSON: []byte(p)}
			}
			if got := string(JSONArray(evs)); got != tt.want {
				t.Errorf("JSONArray = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestJSONArrayTrustsOnlyThePayloadVouchedFor(t *testing.T) {
	rec, err := pipe.NewEvent(&source.Message{MessageID: "r", Body: "<b>"})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := rec.Message.JSON()
	vouched := &pipe.Event{Message: &source.Message{MessageID: "v"}, RecordJSON: []byte(`{"a":1}`)}
	vouched.VouchJSON(vouched.RecordJSON)
	replaced := &pipe.Event{Message: &source.Message{MessageID: "x"}}
	replaced.VouchJSON([]byte(`{"a":1}`))
	replaced.RecordJSON = []byte(`not json`)
	shortened := &pipe.Event{Message: &source.Message{MessageID: "s"}, RecordJSON: []byte(`[1,2]`)}
	shortened.VouchJSON(shortened.RecordJSON)
	shortened.RecordJSON = shortened.RecordJSON[:3]
	for _, ev := range []*pipe.Event{rec, vouched} {
		if !ev.PayloadIsJSON() {
			t.Errorf("event %s: PayloadIsJSON is false, want true", ev.ID())
		}
	}
	got := string(JSONArray([]*pipe.Event{rec, vouched, replaced, shortened}))
	if w := `[` + string(want) + `,{"a":1},"not json","[1,"]`; got != w {
		t.Errorf("JSONArray = %s, want %s", got, w)
	}
}

func BenchmarkJSONArrayOfTenPayloads(b *testing.B) {
	evs := make([]*pipe.Event, 10)
	for i := range evs {
		evs[i] = &pipe.Event{Message: &source.Message{MessageID: fmt.Sprint(i)}, RecordJSON: []byte(`{"order":12345,"items":[1,2,3]}`)}
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = JSONArray(evs)
	}
}

func TestDeliverFailsItemsOrTheWholeBatch(t *testing.T) {
	errBuild := errors.New("cannot build")
	tests := []struct {
		name         string
		ids          []string
		unbuildable  string // the id whose entry cannot be built
		callErr      error  // every call's error
		wantErr      error
		wantFailures string
	}{
		{"an empty batch makes no call", nil, "", errCall, nil, "[]"},
		{"sent events make no failures", []string{"a", "b", "c"}, "", nil, nil, "[]"},
		{"every call failed: the batch fails", []string{"a", "b", "c"}, "", errCall, errCall, "[]"},
		{"an unbuildable event makes failures per item", []string{"a", "b", "c"}, "b", errCall, nil, "[a b c]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			c := Calls[int]{
				Build: func(i int, ev *pipe.Event) (int, error) {
					if ev.ID() == tt.unbuildable {
						return 0, errBuild
					}
					return i, nil
				},
				Split:       SplitBy(2, 100, func(int) int { return 1 }),
				MaxParallel: 1,
				Send: func(_ context.Context, chunk []int, errs []error) Outcome {
					calls++
					if tt.callErr != nil {
						for _, i := range chunk {
							errs[i] = tt.callErr
						}
						return Outcome{CallErr: tt.callErr}
					}
					return Outcome{Sent: true}
				},
			}
			res, err := c.Deliver(t.Context(), events(tt.ids...))
			ids := []string{}
			for _, f := range res.Failures {
				ids = append(ids, f.ID)
			}
			if err != tt.wantErr || fmt.Sprint(ids) != tt.wantFailures {
				t.Errorf("Deliver = %v, %v; want %s, %v", ids, err, tt.wantFailures, tt.wantErr)
			}
			if len(tt.ids) == 0 && calls != 0 {
				t.Errorf("an empty batch made %d calls", calls)
			}
		})
	}
}

// BenchmarkJSONArrayOfTenRecords is a batch of ten records as the pipe
// hands them on with no template: each payload is the record's own JSON.
func BenchmarkJSONArrayOfTenRecords(b *testing.B) {
	evs := make([]*pipe.Event, 10)
	for i := range evs {
		ev, err := pipe.NewEvent(&source.Message{
			MessageID: fmt.Sprint(i), ReceiptHandle: strings.Repeat("r", 150), Body: `{"data":"` + strings.Repeat("x", 1024-11) + `"}`,
			Attributes:  map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": "1545082649183"},
			EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-2:123456789012:q", AWSRegion: "us-east-2",
		})
		if err != nil {
			b.Fatal(err)
		}
		evs[i] = ev
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = JSONArray(evs)
	}
}
