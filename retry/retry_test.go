package retry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

func TestDelayFollowsTheNamedFunction(t *testing.T) {
	s := time.Second
	tests := []struct {
		name   string
		policy Policy
		want   []time.Duration // Delay(1), Delay(2), …
	}{
		{"linear steps evenly from min to max", Policy{MaxAttempts: 6, Backoff: Linear, MinDelay: s, MaxDelay: 5 * s},
			[]time.Duration{s, 2 * s, 3 * s, 4 * s, 5 * s, 5 * s}},
		{"exponential doubles its increments", Policy{MaxAttempts: 5, Backoff: Exponential, MinDelay: s, MaxDelay: 8 * s},
			[]time.Duration{s, 2 * s, 4 * s, 8 * s}},
		{"an empty backoff is exponential", Policy{MaxAttempts: 5, MinDelay: s, MaxDelay: 8 * s},
			[]time.Duration{s, 2 * s, 4 * s, 8 * s}},
		{"arithmetic grows its increments by one step each", Policy{MaxAttempts: 4, Backoff: Arithmetic, MaxDelay: 6 * s},
			[]time.Duration{0, 2 * s, 6 * s}},
		{"geometric keeps a constant ratio", Policy{MaxAttempts: 4, Backoff: Geometric, MinDelay: s, MaxDelay: 4 * s},
			[]time.Duration{s, 2 * s, 4 * s}},
		{"a single retry waits the min delay", Policy{MaxAttempts: 2, Backoff: Linear, MinDelay: 3 * s, MaxDelay: 9 * s},
			[]time.Duration{3 * s, 9 * s}},
		{"a max delay below the min delay caps everything", Policy{MaxAttempts: 3, Backoff: Linear, MinDelay: 5 * s, MaxDelay: 2 * s},
			[]time.Duration{2 * s, 2 * s}},
		{"a policy without retries answers the cap past its end", Policy{MaxAttempts: 1, MinDelay: s, MaxDelay: 2 * s},
			[]time.Duration{2 * s}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []time.Duration
			for a := 1; a <= len(tt.want); a++ {
				d := tt.policy.Delay(a)
				got = append(got, d.Round(time.Millisecond))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("delays = %v, want %v", got, tt.want)
			}
			if d := tt.policy.Delay(0); d != 0 {
				t.Errorf("Delay(0) = %v, want 0", d)
			}
		})
	}
}

func TestDelayWithJitterStaysBetweenHalfAndFull(t *testing.T) {
	p := Policy{MaxAttempts: 5, Backoff: Linear, MinDelay: time.Second, MaxDelay: 4 * time.Second, Jitter: true}
	plain := p
	plain.Jitter = false
	for a := 1; a <= 5; a++ {
		for range 50 {
			d, full := p.Delay(a), plain.Delay(a)
			if d < full/2 || d > full {
				t.Fatalf("Delay(%d) = %v, want in [%v, %v]", a, d, full/2, full)
			}
		}
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	err := Policy{MaxAttempts: 0, Backoff: "fibonacci", MinDelay: 2 * time.Second, MaxDelay: time.Second}.Validate()
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{"fibonacci", "max_attempts", "below min_delay"} {
		if !contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if err := (Policy{MaxAttempts: 3, Backoff: Geometric, MinDelay: time.Second, MaxDelay: time.Second}).Validate(); err != nil {
		t.Errorf("a good policy: %v", err)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func FuzzDelay(f *testing.F) {
	f.Add(5, uint8(0), int64(time.Second), int64(20*time.Second), 3, false)
	f.Add(100, uint8(3), int64(0), int64(time.Hour), 99, true)
	f.Add(2, uint8(2), int64(time.Minute), int64(time.Second), 1, false)
	f.Add(-3, uint8(1), int64(-5), int64(-1), -2, false)
	f.Fuzz(func(t *testing.T, attempts int, fn uint8, lo, hi int64, attempt int, jitter bool) {
		names := []string{Linear, Arithmetic, Geometric, Exponential, "", "other"}
		p := Policy{MaxAttempts: attempts % 200, Backoff: names[int(fn)%len(names)],
			MinDelay: time.Duration(lo), MaxDelay: time.Duration(hi), Jitter: jitter}
		d := p.Delay(attempt)
		if d < 0 {
			t.Fatalf("Delay(%d) = %v: negative", attempt, d)
		}
		if d > max(p.MaxDelay, 0) {
			t.Fatalf("Delay(%d) = %v: above MaxDelay %v", attempt, d, p.MaxDelay)
		}
		if jitter || attempt < 1 || attempt > 1000 {
			return
		}
		if next := p.Delay(attempt + 1); next < d {
			t.Fatalf("%s: Delay(%d) = %v > Delay(%d) = %v", p.Backoff, attempt, d, attempt+1, next)
		}
	})
}

// script is a target that answers each call by the next step.
type script struct {
	steps []func(events []*pipe.Event) (pipe.Result, error)
	calls [][]string
}

func (s *script) Deliver(_ context.Context, events []*pipe.Event) (pipe.Result, error) {
	ids := make([]string, len(events))
	for i, ev := range events {
		ids[i] = ev.ID()
	}
	s.calls = append(s.calls, ids)
	step := s.steps[min(len(s.calls), len(s.steps))-1]
	return step(events)
}

func ok(events []*pipe.Event) (pipe.Result, error) { return pipe.Result{}, nil }

func whole(err error) func([]*pipe.Event) (pipe.Result, error) {
	return func([]*pipe.Event) (pipe.Result, error) { return pipe.Result{}, err }
}

func items(err error, ids ...string) func([]*pipe.Event) (pipe.Result, error) {
	return func([]*pipe.Event) (pipe.Result, error) { return pipe.Fail(err, ids...), nil }
}

func batch(ids ...string) []*pipe.Event {
	return batchSent(time.Time{}, ids...)
}

func batchSent(sent time.Time, ids ...string) []*pipe.Event {
	evs := make([]*pipe.Event, len(ids))
	for i, id := range ids {
		m := &source.Message{MessageID: id, Attributes: map[string]string{}}
		if !sent.IsZero() {
			m.Attributes[source.AttrSentTimestamp] = strconv.FormatInt(sent.UnixMilli(), 10)
		}
		evs[i] = &pipe.Event{Message: m, RecordJSON: []byte(`{}`)}
	}
	return evs
}

// inGroup puts events in FIFO message group g.
func inGroup(g string, evs []*pipe.Event) []*pipe.Event {
	for _, ev := range evs {
		ev.Message.Attributes[source.AttrMessageGroupID] = g
	}
	return evs
}

// want describes one returned item failure.
type want struct {
	exhausted int // attempts, 0: not Exhausted
	permanent bool
	throttled bool
	blocked   bool // failed because an earlier message of its FIFO group did
}

// blocked is the failure of a FIFO message after a failed one.
var blocked = want{blocked: true}

var (
	errServer   = errors.New("answered 503")
	errClient   = pipe.Permanent(errors.New("answered 400"))
	errThrottle = pipe.Throttled(errors.New("answered 429"))
)

func TestWrapRetriesWhatCanSucceed(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	policy := Policy{MaxAttempts: 3, Backoff: Linear, MinDelay: time.Second, MaxDelay: 2 * time.Second}
	tests := []struct {
		name      string
		policy    Policy
		events    []*pipe.Event
		steps     []func([]*pipe.Event) (pipe.Result, error)
		cancelAt  int // cancel ctx during the n-th sleep (1-based), 0: never
		wantCalls [][]string
		wantSleep []time.Duration
		wantErr   error
		wantFails map[string]want
	}{
		{
			name: "a batch that succeeds is delivered once", policy: policy, events: batch("a", "b"),
			steps:     []func([]*pipe.Event) (pipe.Result, error){ok},
			wantCalls: [][]string{{"a", "b"}},
		},
		{
			name: "a whole-batch server error is retried whole until it succeeds", policy: policy, events: batch("a", "b"),
			steps:     []func([]*pipe.Event) (pipe.Result, error){whole(errServer), ok},
			wantCalls: [][]string{{"a", "b"}, {"a", "b"}}, wantSleep: []time.Duration{time.Second},
		},
		{
			name: "a permanent whole-batch error is returned at once, unchanged", policy: policy, events: batch("a", "b"),
			steps:     []func([]*pipe.Event) (pipe.Result, error){whole(errClient)},
			wantCalls: [][]string{{"a", "b"}}, wantErr: errClient,
		},
		{
			name: "only the failed items are retried, as a smaller batch", policy: policy, events: batch("a", "b", "c"),
			steps:     []func([]*pipe.Event) (pipe.Result, error){items(errServer, "b"), ok},
			wantCalls: [][]string{{"a", "b", "c"}, {"b"}}, wantSleep: []time.Duration{time.Second},
		},
		{
			name: "every event of a failed message goes again", policy: policy,
			events:    append(batch("a", "b"), batch("b")[0]),
			steps:     []func([]*pipe.Event) (pipe.Result, error){items(errServer, "b"), ok},
			wantCalls: [][]string{{"a", "b", "b"}, {"b", "b"}}, wantSleep: []time.Duration{time.Second},
		},
		{
			name: "permanent item failures are returned without a retry", policy: policy, events: batch("a", "b", "c"),
			steps: []func([]*pipe.Event) (pipe.Result, error){func(evs []*pipe.Event) (pipe.Result, error) {
				return pipe.Result{Failures: []pipe.ItemFailure{{ID: "a", Err: errClient}, {ID: "c", Err: errServer}}}, nil
			}, ok},
			wantCalls: [][]string{{"a", "b", "c"}, {"c"}}, wantSleep: []time.Duration{time.Second},
			wantFails: map[string]want{"a": {permanent: true}},
		},
		{
			name: "item failures left after the last attempt are exhausted", policy: policy, events: batch("a", "b"),
			steps:     []func([]*pipe.Event) (pipe.Result, error){items(errServer, "a", "b"), items(errServer, "b")},
			wantCalls: [][]string{{"a", "b"}, {"a", "b"}, {"b"}}, wantSleep: []time.Duration{time.Second, 2 * time.Second},
			wantFails: map[string]want{"b": {exhausted: 3}},
		},
		{
			name: "a batch failing whole every time comes back as exhausted item failures", policy: policy, events: batch("a", "b"),
			steps:     []func([]*pipe.Event) (pipe.Result, error){whole(errServer)},
			wantCalls: [][]string{{"a", "b"}, {"a", "b"}, {"a", "b"}}, wantSleep: []time.Duration{time.Second, 2 * time.Second},
			wantFails: map[string]want{"a": {exhausted: 3}, "b": {exhausted: 3}},
		},
		{
			name: "a permanent error on a retry fails the retried items only", policy: policy, events: batch("a", "b"),
			steps:     []func([]*pipe.Event) (pipe.Result, error){items(errServer, "b"), whole(errClient)},
			wantCalls: [][]string{{"a", "b"}, {"b"}}, wantSleep: []time.Duration{time.Second},
			wantFails: map[string]want{"b": {permanent: true}},
		},
		{
			name: "throttling on an earlier attempt stays visible on the final failure", policy: policy, events: batch("a"),
			steps:     []func([]*pipe.Event) (pipe.Result, error){whole(errThrottle), whole(errServer)},
			wantCalls: [][]string{{"a"}, {"a"}, {"a"}}, wantSleep: []time.Duration{time.Second, 2 * time.Second},
			wantFails: map[string]want{"a": {exhausted: 3, throttled: true}},
		},
		{
			name: "a throttled item that later succeeds is not a failure", policy: policy, events: batch("a", "b"),
			steps:     []func([]*pipe.Event) (pipe.Result, error){items(errThrottle, "a"), ok},
			wantCalls: [][]string{{"a", "b"}, {"a"}}, wantSleep: []time.Duration{time.Second},
		},
		{
			name:      "items older than max event age are not retried",
			policy:    Policy{MaxAttempts: 3, MinDelay: time.Second, MaxDelay: time.Second, MaxEventAge: time.Hour},
			events:    append(batchSent(now.Add(-2*time.Hour), "old"), batchSent(now.Add(-time.Minute), "new")...),
			steps:     []func([]*pipe.Event) (pipe.Result, error){whole(errServer), ok},
			wantCalls: [][]string{{"old", "new"}, {"new"}}, wantSleep: []time.Duration{time.Second},
			wantFails: map[string]want{"old": {exhausted: 1}},
		},
		{
			name: "a cancelled context stops retrying and returns the first whole-batch error", policy: policy, events: batch("a"),
			steps: []func([]*pipe.Event) (pipe.Result, error){whole(errServer)}, cancelAt: 1,
			wantCalls: [][]string{{"a"}}, wantSleep: []time.Duration{time.Second}, wantErr: errServer,
		},
		{
			name: "a cancelled context returns item failures unwrapped", policy: policy, events: batch("a", "b"),
			steps: []func([]*pipe.Event) (pipe.Result, error){items(errServer, "b")}, cancelAt: 1,
			wantCalls: [][]string{{"a", "b"}}, wantSleep: []time.Duration{time.Second},
			wantFails: map[string]want{"b": {}},
		},
		{
			name: "one attempt never retries but marks failures exhausted", policy: Policy{MaxAttempts: 1}, events: batch("a", "b"),
			steps:     []func([]*pipe.Event) (pipe.Result, error){items(errServer, "a")},
			wantCalls: [][]string{{"a", "b"}},
			wantFails: map[string]want{"a": {exhausted: 1}},
		},
		{
			name: "a failed FIFO message goes again with the later messages of its group, in order", policy: policy,
			events:    inGroup("g", batch("a", "b", "c")),
			steps:     []func([]*pipe.Event) (pipe.Result, error){items(errServer, "a"), ok},
			wantCalls: [][]string{{"a", "b", "c"}, {"a", "b", "c"}}, wantSleep: []time.Duration{time.Second},
		},
		{
			name: "a FIFO message that stays failed fails the later messages of its group, not as exhausted", policy: policy,
			events:    inGroup("g", batch("a", "b", "c")),
			steps:     []func([]*pipe.Event) (pipe.Result, error){items(errServer, "a")},
			wantCalls: [][]string{{"a", "b", "c"}, {"a", "b", "c"}, {"a", "b", "c"}}, wantSleep: []time.Duration{time.Second, 2 * time.Second},
			wantFails: map[string]want{"a": {exhausted: 3}, "b": blocked, "c": blocked},
		},
		{
			name: "a permanent FIFO failure fails the later messages of its group without a retry", policy: policy,
			events:    inGroup("g", batch("a", "b", "c")),
			steps:     []func([]*pipe.Event) (pipe.Result, error){items(errClient, "b")},
			wantCalls: [][]string{{"a", "b", "c"}},
			wantFails: map[string]want{"b": {permanent: true}, "c": blocked},
		},
		{
			name: "a later failure of the group on a retry takes what follows it along", policy: policy,
			events:    inGroup("g", batch("a", "b", "c")),
			steps:     []func([]*pipe.Event) (pipe.Result, error){items(errServer, "a"), items(errServer, "b"), ok},
			wantCalls: [][]string{{"a", "b", "c"}, {"a", "b", "c"}, {"b", "c"}}, wantSleep: []time.Duration{time.Second, 2 * time.Second},
		},
		{
			name: "other FIFO groups and standard events are retried apart", policy: policy,
			events: slices.Concat(inGroup("g", batch("a")), inGroup("h", batch("b")), inGroup("g", batch("c")), batch("d", "e")),
			steps: []func([]*pipe.Event) (pipe.Result, error){func([]*pipe.Event) (pipe.Result, error) {
				return pipe.Fail(errServer, "a", "d"), nil
			}, ok},
			wantCalls: [][]string{{"a", "b", "c", "d", "e"}, {"a", "c", "d"}}, wantSleep: []time.Duration{time.Second},
		},
		{
			name: "a FIFO batch failing whole every time exhausts only the first message of each group", policy: policy,
			events:    slices.Concat(inGroup("g", batch("a", "b")), inGroup("h", batch("c"))),
			steps:     []func([]*pipe.Event) (pipe.Result, error){whole(errServer)},
			wantCalls: [][]string{{"a", "b", "c"}, {"a", "b", "c"}, {"a", "b", "c"}}, wantSleep: []time.Duration{time.Second, 2 * time.Second},
			wantFails: map[string]want{"a": {exhausted: 3}, "b": blocked, "c": {exhausted: 3}},
		},
		{
			name:      "a FIFO message older than max event age fails the later messages of its group",
			policy:    Policy{MaxAttempts: 3, MinDelay: time.Second, MaxDelay: time.Second, MaxEventAge: time.Hour},
			events:    inGroup("g", append(batchSent(now.Add(-2*time.Hour), "old"), batchSent(now.Add(-time.Minute), "new")...)),
			steps:     []func([]*pipe.Event) (pipe.Result, error){items(errServer, "old")},
			wantCalls: [][]string{{"old", "new"}},
			wantFails: map[string]want{"old": {exhausted: 1}, "new": blocked},
		},
		{
			name: "a cancelled context fails the later messages of a failed FIFO message too", policy: policy,
			events: inGroup("g", batch("a", "b")),
			steps:  []func([]*pipe.Event) (pipe.Result, error){items(errServer, "a")}, cancelAt: 1,
			wantCalls: [][]string{{"a", "b"}}, wantSleep: []time.Duration{time.Second},
			wantFails: map[string]want{"a": {}, "b": blocked},
		},
		{
			name: "failures naming no event of the batch are passed through", policy: policy, events: batch("a"),
			steps:     []func([]*pipe.Event) (pipe.Result, error){items(errServer, "zz")},
			wantCalls: [][]string{{"a"}},
			wantFails: map[string]want{"zz": {}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var slept []time.Duration
			var retried int
			target := &script{steps: tt.steps}
			w := Wrap(target, tt.policy, Options{
				Now:     func() time.Time { return now },
				OnRetry: func(n int) { retried += n },
				Sleep: func(ctx context.Context, d time.Duration) error {
					slept = append(slept, d)
					if len(slept) == tt.cancelAt {
						cancel()
						return ctx.Err()
					}
					return nil
				},
			})
			res, err := w.Deliver(ctx, tt.events)
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("error = %v, want %v", err, tt.wantErr)
			}
			if !slices.EqualFunc(target.calls, tt.wantCalls, slices.Equal) {
				t.Errorf("calls = %v, want %v", target.calls, tt.wantCalls)
			}
			if !slices.Equal(slept, tt.wantSleep) {
				t.Errorf("slept %v, want %v", slept, tt.wantSleep)
			}
			got := map[string]want{}
			for _, f := range res.Failures {
				if _, dup := got[f.ID]; dup {
					t.Errorf("%s failed twice", f.ID)
				}
				if f.Err == nil {
					t.Errorf("%s failed without a reason", f.ID)
					continue
				}
				_, n := core.IsExhausted(f.Err)
				got[f.ID] = want{exhausted: n, permanent: core.IsPermanent(f.Err), throttled: core.IsThrottled(f.Err),
					blocked: errors.Is(f.Err, ErrEarlierInGroupFailed)}
			}
			if fmt.Sprint(got) != fmt.Sprint(orEmpty(tt.wantFails)) {
				t.Errorf("failures = %v, want %v", got, tt.wantFails)
			}
			wantRetried := 0
			for _, c := range tt.wantCalls[1:] {
				wantRetried += len(c)
			}
			if retried != wantRetried && tt.cancelAt == 0 {
				t.Errorf("OnRetry counted %d events, want %d", retried, wantRetried)
			}
		})
	}
}

func orEmpty(m map[string]want) map[string]want {
	if m == nil {
		return map[string]want{}
	}
	return m
}

func TestExhaustedWholeBatchKeepsTheCauseReadable(t *testing.T) {
	w := Wrap(&script{steps: []func([]*pipe.Event) (pipe.Result, error){whole(errServer)}},
		Policy{MaxAttempts: 2}, Options{Sleep: func(context.Context, time.Duration) error { return nil }})
	res, err := w.Deliver(context.Background(), batch("a"))
	if err != nil || len(res.Failures) != 1 {
		t.Fatalf("got %v, %v", res, err)
	}
	if !errors.Is(res.Failures[0].Err, errServer) {
		t.Errorf("the cause %v does not wrap the target's error", res.Failures[0].Err)
	}
}

func TestTheRealSleepStopsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	w := Wrap(&script{steps: []func([]*pipe.Event) (pipe.Result, error){whole(errServer)}},
		Policy{MaxAttempts: 3, MinDelay: time.Hour, MaxDelay: time.Hour}, Options{})
	start := time.Now()
	if _, err := w.Deliver(ctx, batch("a")); !errors.Is(err, errServer) {
		t.Errorf("Deliver = %v, want the first whole-batch error", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Deliver waited %v after its context ended", took)
	}
}

func BenchmarkWrapSucceeding(b *testing.B) {
	var inner pipe.TargetFunc = func(context.Context, []*pipe.Event) (pipe.Result, error) { return pipe.Result{}, nil }
	w := Wrap(inner, Policy{MaxAttempts: 3, MinDelay: time.Second, MaxDelay: 20 * time.Second, Jitter: true}, Options{})
	events := batch("a", "b", "c", "d", "e", "f", "g", "h", "i", "j")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := w.Deliver(ctx, events); err != nil {
			b.Fatal(err)
		}
	}
}

// appender is a target with pipe.PayloadAppender and
// pipe.ConcurrencyFollower.
type appender struct{ followed []int }

func (a *appender) Deliver(context.Context, []*pipe.Event) (pipe.Result, error) {
	return pipe.Result{}, nil
}
func (a *appender) AppendsPayloads()        {}
func (a *appender) FollowConcurrency(n int) { a.followed = append(a.followed, n) }

func TestWrapKeepsTheAbilitiesOfItsTarget(t *testing.T) {
	a := &appender{}
	w := Wrap(a, Policy{}, Options{})
	if _, ok := w.(pipe.PayloadAppender); !ok {
		t.Error("the wrapper of a PayloadAppender is not one: its pipe would encode every record before the call")
	}
	f, ok := w.(pipe.ConcurrencyFollower)
	if !ok {
		t.Fatal("the wrapper does not forward the concurrency")
	}
	f.FollowConcurrency(7)
	if len(a.followed) != 1 || a.followed[0] != 7 {
		t.Errorf("the target was told %v, want [7]", a.followed)
	}
	plain := Wrap(pipe.TargetFunc(func(context.Context, []*pipe.Event) (pipe.Result, error) { return pipe.Result{}, nil }), Policy{}, Options{})
	if _, ok := plain.(pipe.PayloadAppender); ok {
		t.Error("the wrapper of an ordinary target claims PayloadAppender")
	}
}
