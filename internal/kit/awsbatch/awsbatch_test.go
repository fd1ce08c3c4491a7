package awsbatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/internal/kit/awsclient"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

// events makes one event per body, with ids m0, m1, ….
func events(t *testing.T, bodies ...string) []*pipe.Event {
	t.Helper()
	var evs []*pipe.Event
	for i, b := range bodies {
		ev, err := pipe.NewEvent(&source.Message{MessageID: fmt.Sprintf("m%d", i), Body: b})
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// service is a batch API in the test process: entries are the bodies; a
// body names what the service does with it.
type service struct {
	mu    sync.Mutex
	calls [][]string
}

func (s *service) call(_ context.Context, reqs []string) (Reply, error) {
	s.mu.Lock()
	s.calls = append(s.calls, slices.Clone(reqs))
	s.mu.Unlock()
	for _, r := range reqs {
		switch {
		case r == "throttle-call":
			return Reply{}, &smithy.GenericAPIError{Code: "ThrottlingException", Message: "slow down"}
		case r == "invalid" && len(reqs) > 1:
			return Reply{}, &smithy.GenericAPIError{Code: "ValidationException", Message: "one entry is bad"}
		}
	}
	codes := EntryCodes{Throttle: map[string]bool{"Slow": true}, Retryable: map[string]bool{"Internal": true}, OthersPermanent: true}
	return ByPosition(len(reqs), reqs, func(_ int, r string) error {
		switch r {
		case "unanswered":
			return Unanswered
		case "slow":
			return codes.Refused("refused", "Slow", "slow down")
		case "internal":
			return codes.Refused("refused", "Internal", "try again")
		case "invalid", "bad":
			return codes.Refused("refused", "Bad", "no")
		}
		return nil
	}), nil
}

// newBatch makes a Batch of the test service.
func newBatch(s *service, limits Limits, ordered bool) *Batch[string] {
	return New(Spec[string]{
		Service: "Test", Resource: "res", ResourceKey: "resource",
		Describe: func(n int) string { return fmt.Sprintf("sending %d entries to res", n) },
		Limits:   limits,
		Build: func(_ int, ev *pipe.Event) (Entry[string], error) {
			if ev.Message.Body == "unbuildable" {
				return Entry[string]{}, pipe.Permanent(errors.New("cannot build"))
			}
			b := ev.Message.Body
			return Entry[string]{Req: b, Size: len(b)}, nil
		},
		Call:          s.call,
		Classifier:    awsclient.Classifier{PermanentCodes: awsclient.Codes("ValidationException")},
		EntrySpecific: awsclient.Codes("ValidationException"),
		MaxParallel:   2,
		Ordered:       ordered,
	})
}

// kinds describes each failure: its id and its class.
func kinds(res pipe.Result) string {
	var out []string
	for _, f := range res.Failures {
		kind := "retryable"
		switch {
		case core.IsThrottled(f.Err):
			kind = "throttled"
		case core.IsPermanent(f.Err):
			kind = "permanent"
		}
		out = append(out, f.ID+":"+kind)
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

func TestDeliverFailsJustTheEntriesTheServiceRefusesWithTheirClass(t *testing.T) {
	big := Limits{Entries: 10, Bytes: 1 << 20}
	tests := []struct {
		name     string
		limits   Limits
		ordered  bool
		bodies   []string
		failures string
		calls    int
		batchErr string // "" for none, else "throttled" or "permanent"
	}{
		{"every entry taken fails nothing", big, false, []string{"a", "b", "c"}, "", 1, ""},
		{"a refused entry fails alone with its class", big, false, []string{"a", "slow", "internal", "bad"}, "m1:throttled m2:retryable m3:permanent", 1, ""},
		{"an entry the answer does not mention fails, retryable", big, false, []string{"a", "unanswered"}, "m1:retryable", 1, ""},
		{"an entry that cannot be built fails alone, unsent", big, false, []string{"a", "unbuildable"}, "m1:permanent", 1, ""},
		{"an entry over the entry limit fails alone, permanently, unsent", Limits{Entries: 10, Bytes: 100, EntryBytes: 4}, false, []string{"a", "toolong"}, "m1:permanent", 1, ""},
		{"entries are cut into calls by count", Limits{Entries: 2, Bytes: 100}, false, []string{"a", "b", "c", "d", "e"}, "", 3, ""},
		{"entries are cut into calls by bytes", Limits{Entries: 10, Bytes: 5}, false, []string{"aa", "bb", "cc"}, "", 2, ""},
		{"a call refused for one entry is retried one entry per call", big, false, []string{"a", "invalid", "c"}, "m1:permanent", 4, ""},
		{"a batch whose every call is throttled is a throttled batch error", big, false, []string{"throttle-call", "b"}, "", 1, "throttled"},
		{"an ordered batch stops at its first failed call", Limits{Entries: 1, Bytes: 100}, true, []string{"a", "bad", "c", "d"}, "m1:permanent m2:retryable m3:retryable", 2, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &service{}
			res, err := newBatch(s, tt.limits, tt.ordered).Deliver(context.Background(), events(t, tt.bodies...))
			switch {
			case tt.batchErr == "" && err != nil:
				t.Fatalf("Deliver: %v", err)
			case tt.batchErr == "throttled" && !core.IsThrottled(err):
				t.Fatalf("Deliver error = %v, want a throttled one", err)
			}
			if got := kinds(res); got != tt.failures {
				t.Errorf("failures = %q, want %q", got, tt.failures)
			}
			if len(s.calls) != tt.calls {
				t.Errorf("calls = %v, want %d", s.calls, tt.calls)
			}
		})
	}
}

func TestAnEmptyBatchMakesNoCall(t *testing.T) {
	s := &service{}
	if _, err := newBatch(s, Limits{Entries: 10, Bytes: 10}, false).Deliver(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if len(s.calls) != 0 {
		t.Errorf("calls = %v, want none", s.calls)
	}
}

func TestByIDMatchesTheAnswersListsToTheCallsEntries(t *testing.T) {
	type answer struct{ id string }
	refused := func(a answer) error { return errors.New("refused " + a.id) }
	r := ByID([]string{"0", "1", "2"},
		[]answer{{"0"}}, func(a answer) string { return a.id },
		[]answer{{"2"}, {"9"}}, func(a answer) string { return a.id }, refused)
	if r.Errs[0] != nil || !errors.Is(r.Errs[1], Unanswered) || r.Errs[2] == nil || r.Errs[2].Error() != "refused 2" {
		t.Errorf("Errs = %v, want taken, unanswered, refused", r.Errs)
	}
	if !slices.Equal(r.Unknown, []string{"9"}) {
		t.Errorf("Unknown = %v, want [9]", r.Unknown)
	}
}

func TestEntryCodesClassifyRefusals(t *testing.T) {
	c := EntryCodes{Throttle: map[string]bool{"T": true}, Retryable: map[string]bool{"R": true}}
	tests := []struct {
		name                 string
		codes                EntryCodes
		code                 string
		throttled, permanent bool
	}{
		{"a throttle code is throttled", c, "T", true, false},
		{"a retryable code is retryable", c, "R", false, false},
		{"another code is retryable by default", c, "X", false, false},
		{"another code is permanent with OthersPermanent", EntryCodes{OthersPermanent: true}, "X", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.codes.Refused("refused", tt.code, "m")
			var ee *EntryError
			if core.IsThrottled(err) != tt.throttled || core.IsPermanent(err) != tt.permanent || !errors.As(err, &ee) || ee.ErrorCode() != tt.code {
				t.Errorf("Refused(%s) = %v: throttled %v permanent %v", tt.code, err, core.IsThrottled(err), core.IsPermanent(err))
			}
		})
	}
}
