// Package targettest is the contract suite every pipe.Target runs in its
// tests: pipes' own targets and users' custom ones. It checks what the pipe
// relies on: a batch is delivered and every event is accounted for, a
// Result names only ids of its batch, an empty batch is fine, a cancelled
// context returns promptly, concurrent Deliver calls are safe, and payloads
// arrive byte for byte.
//
//	func TestContract(t *testing.T) {
//		targettest.Run(t, targettest.Harness{
//			New: func(t *testing.T) (pipe.Target, targettest.Inspect) {
//				dest := newTestDestination(t) // fresh and empty
//				tg := newTarget(t, dest)
//				return tg, func(t *testing.T) [][]byte { return dest.payloads(t) }
//			},
//		})
//	}
package targettest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

// Inspect returns every payload that has arrived at the destination so far,
// in any order, one entry per arrival (a payload that arrived twice is
// there twice). It fails t when the destination cannot be read. The suite
// calls it from the subtest's goroutine only.
type Inspect func(t *testing.T) [][]byte

// Harness connects the suite to a target.
type Harness struct {
	// New makes a target on a fresh, empty destination and the Inspect
	// that reads that destination. It is called once per subtest, from
	// parallel subtests; use t.Cleanup to remove the destination. Targets
	// that have a Close(ctx) error method are closed by the suite.
	New func(t *testing.T) (pipe.Target, Inspect)
	// Patience bounds how long the suite waits for payloads to arrive
	// after Deliver returned: default 10 s. Destinations where a delivery
	// is visible once Deliver returned need none.
	Patience time.Duration
	// Quiet is how long the suite waits for payloads that must not arrive
	// (after an empty batch) and for extra arrivals: default 200 ms.
	Quiet time.Duration
	// Prompt bounds how long a Deliver with a cancelled context may take:
	// default 5 s.
	Prompt time.Duration
}

func (h Harness) withDefaults() Harness {
	if h.Patience == 0 {
		h.Patience = 10 * time.Second
	}
	if h.Quiet == 0 {
		h.Quiet = 200 * time.Millisecond
	}
	if h.Prompt == 0 {
		h.Prompt = 5 * time.Second
	}
	return h
}

// Run runs the contract subtests against fresh targets made by h. They run
// in parallel, each on its own destination.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("targettest: Harness.New is nil")
	}
	h = h.withDefaults()
	tests := []struct {
		name string
		run  func(t *testing.T, h Harness)
	}{
		{"a batch is delivered and every event arrives", testBatch},
		{"the result never names ids outside the batch", testIDs},
		{"an empty batch succeeds and sends nothing", testEmpty},
		{"a cancelled context returns promptly with an error or failures", testCancelled},
		{"a context cancelled during a delivery returns promptly", testCancelMidway},
		{"concurrent deliveries are safe and lose nothing", testConcurrent},
		{"payloads arrive byte for byte", testBytes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, h)
		})
	}
}

// dest is one subtest's target and destination.
type dest struct {
	h       Harness
	target  pipe.Target
	inspect Inspect
}

func open(t *testing.T, h Harness) *dest {
	t.Helper()
	tg, inspect := h.New(t)
	if tg == nil || inspect == nil {
		t.Fatal("targettest: Harness.New returned a nil target or Inspect")
	}
	if c, ok := tg.(interface{ Close(context.Context) error }); ok {
		t.Cleanup(func() {
			if err := c.Close(context.Background()); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	return &dest{h: h, target: tg, inspect: inspect}
}

// Events makes one event per payload, with ids "<prefix>-0", "<prefix>-1"…
// and the payload as the message body too. Targets' own tests may use it.
func Events(prefix string, payloads ...string) []*pipe.Event {
	evs := make([]*pipe.Event, len(payloads))
	for i, p := range payloads {
		id := prefix + "-" + strconv.Itoa(i)
		evs[i] = &pipe.Event{Message: &source.Message{MessageID: id, Body: p}, RecordJSON: []byte(p)}
	}
	return evs
}

// jsonPayloads are n small compact JSON payloads, unique to prefix.
func jsonPayloads(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(`{"id":"%s-%d","n":%d}`, prefix, i, i)
	}
	return out
}

// deliver calls Deliver and checks the answer's ids belong to the batch.
func (d *dest) deliver(t *testing.T, ctx context.Context, evs []*pipe.Event) (pipe.Result, error) {
	t.Helper()
	res, err := d.target.Deliver(ctx, evs)
	checkIDs(t, evs, res)
	return res, err
}

// checkIDs fails t when res names an id outside evs, or an item twice.
func checkIDs(t *testing.T, evs []*pipe.Event, res pipe.Result) {
	t.Helper()
	ids := map[string]bool{}
	for _, ev := range evs {
		ids[ev.ID()] = true
	}
	seen := map[string]bool{}
	for _, f := range res.Failures {
		if !ids[f.ID] {
			t.Errorf("the result names id %q, which is not in the batch", f.ID)
		}
		if seen[f.ID] {
			t.Errorf("the result names id %q twice", f.ID)
		}
		seen[f.ID] = true
	}
}

// failed is the set of ids a result fails.
func failed(res pipe.Result) map[string]bool {
	m := map[string]bool{}
	for _, f := range res.Failures {
		m[f.ID] = true
	}
	return m
}

// expectArrived waits until every payload of want arrived, then checks
// nothing else did (beyond the payloads in maybe, which may or may not
// arrive), and returns the arrivals.
func (d *dest) expectArrived(t *testing.T, want []string, maybe []string) {
	t.Helper()
	deadline := time.Now().Add(d.h.Patience)
	var got [][]byte
	for {
		got = d.inspect(t)
		if missing(want, got) == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if m := missing(want, got); m != nil {
		t.Fatalf("%d of %d payloads did not arrive within %s; first missing: %.200q", len(m), len(want), d.h.Patience, m[0])
	}
	time.Sleep(d.h.Quiet)
	got = d.inspect(t)
	rest := map[string]int{}
	for _, g := range got {
		rest[string(g)]++
	}
	for _, w := range want {
		rest[w]--
	}
	allowed := map[string]bool{}
	for _, m := range maybe {
		allowed[m] = true
	}
	for p, n := range rest {
		switch {
		case n > 0 && !allowed[p]:
			t.Errorf("payload %.200q arrived %d more time(s) than it was delivered", p, n)
		case n > 1:
			t.Errorf("payload %.200q arrived %d times", p, n)
		}
	}
}

// missing lists the payloads of want that are not (all) in got.
func missing(want []string, got [][]byte) []string {
	count := map[string]int{}
	for _, g := range got {
		count[string(g)]++
	}
	var out []string
	for _, w := range want {
		if count[w] > 0 {
			count[w]--
			continue
		}
		out = append(out, w)
	}
	return out
}

func testBatch(t *testing.T, h Harness) {
	d := open(t, h)
	payloads := jsonPayloads(t.Name(), 10)
	evs := Events("batch", payloads...)
	res, err := d.deliver(t, t.Context(), evs)
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if len(res.Failures) > 0 {
		t.Fatalf("Deliver failed %d of %d items, first %s: %v", len(res.Failures), len(evs), res.Failures[0].ID, res.Failures[0].Err)
	}
	d.expectArrived(t, payloads, nil)
}

func testIDs(t *testing.T, h Harness) {
	d := open(t, h)
	ids := []string{"with space", "ünïcødé", "a/b:c", strings.Repeat("x", 200), "0"}
	evs := make([]*pipe.Event, len(ids))
	var payloads []string
	for i, id := range ids {
		p := fmt.Sprintf(`{"id":%q}`, id)
		payloads = append(payloads, p)
		evs[i] = &pipe.Event{Message: &source.Message{MessageID: id, Body: p}, RecordJSON: []byte(p)}
	}
	res, err := d.deliver(t, t.Context(), evs)
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	// Whatever failed, every event is accounted for: failed, or arrived.
	f := failed(res)
	var want, maybe []string
	for i, ev := range evs {
		if f[ev.ID()] {
			maybe = append(maybe, payloads[i])
			continue
		}
		want = append(want, payloads[i])
	}
	d.expectArrived(t, want, maybe)
}

func testEmpty(t *testing.T, h Harness) {
	d := open(t, h)
	for _, evs := range [][]*pipe.Event{nil, {}} {
		res, err := d.deliver(t, t.Context(), evs)
		if err != nil {
			t.Errorf("Deliver of an empty batch: %v", err)
		}
		if len(res.Failures) > 0 {
			t.Errorf("Deliver of an empty batch failed items: %v", res.Failures)
		}
	}
	time.Sleep(h.Quiet)
	if got := d.inspect(t); len(got) > 0 {
		t.Errorf("an empty batch sent %d payloads, first %.200q", len(got), got[0])
	}
}

// deliverWithin calls Deliver and fails t when it takes longer than
// h.Prompt (it still waits for it, to report a hang).
func (d *dest) deliverWithin(t *testing.T, ctx context.Context, evs []*pipe.Event) (pipe.Result, error) {
	t.Helper()
	start := time.Now()
	res, err := d.deliver(t, ctx, evs)
	if took := time.Since(start); took > d.h.Prompt {
		t.Errorf("Deliver with a cancelled context took %s, more than %s", took.Round(time.Millisecond), d.h.Prompt)
	}
	return res, err
}

func testCancelled(t *testing.T, h Harness) {
	d := open(t, h)
	payloads := jsonPayloads(t.Name(), 5)
	evs := Events("cancelled", payloads...)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res, err := d.deliverWithin(t, ctx, evs)
	if err == nil && len(res.Failures) == 0 {
		t.Fatal("Deliver with a cancelled context reported every item delivered")
	}
	if err != nil {
		return // the whole batch failed: nothing is claimed
	}
	accountFor(t, d, evs, payloads, res)
}

// accountFor checks that the events res does not fail arrived.
func accountFor(t *testing.T, d *dest, evs []*pipe.Event, payloads []string, res pipe.Result) {
	t.Helper()
	f := failed(res)
	var want, maybe []string
	for i, ev := range evs {
		if f[ev.ID()] {
			maybe = append(maybe, payloads[i])
		} else {
			want = append(want, payloads[i])
		}
	}
	d.expectArrived(t, want, maybe)
}

func testCancelMidway(t *testing.T, h Harness) {
	d := open(t, h)
	payloads := jsonPayloads(t.Name(), 200)
	evs := Events("midway", payloads...)
	ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
	defer cancel()
	res, err := d.deliverWithin(t, ctx, evs)
	if err != nil {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			t.Logf("Deliver failed whole with an error that does not wrap the context's: %v", err)
		}
		return
	}
	accountFor(t, d, evs, payloads, res)
}

func testConcurrent(t *testing.T, h Harness) {
	d := open(t, h)
	const workers, batches, size = 8, 5, 10
	var (
		mu   sync.Mutex
		want []string
		wg   sync.WaitGroup
	)
	for w := range workers {
		wg.Go(func() {
			for b := range batches {
				prefix := fmt.Sprintf("%s-w%d-b%d", t.Name(), w, b)
				payloads := jsonPayloads(prefix, size)
				evs := Events(prefix, payloads...)
				res, err := d.target.Deliver(t.Context(), evs)
				checkIDs(t, evs, res)
				if err != nil {
					t.Errorf("Deliver (worker %d, batch %d): %v", w, b, err)
					continue
				}
				if len(res.Failures) > 0 {
					t.Errorf("Deliver (worker %d, batch %d) failed %d items, first: %v", w, b, len(res.Failures), res.Failures[0].Err)
					continue
				}
				mu.Lock()
				want = append(want, payloads...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	d.expectArrived(t, want, nil)
}

func testBytes(t *testing.T, h Harness) {
	d := open(t, h)
	big := `{"id":"big","data":"` + strings.Repeat("0123456789abcdef", 8<<10) + `"}`
	payloads := []string{
		`{"id":"unicode","s":"é漢字🙂","esc":"\u00e9\n\t\"\\/","html":"<a href=\"x\">&amp;</a>"}`,
		`{"id":"nested","a":[1,2.5,-3e10,true,false,null,{"b":{"c":[]}}],"o":{}}`,
		`[{"id":"array"}]`,
		`12345.678`,
		"plain text, not JSON: text-payload é",
		"two\nlines of text: multiline-payload",
		big,
	}
	evs := Events("bytes", payloads...)
	res, err := d.deliver(t, t.Context(), evs)
	if err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	if len(res.Failures) > 0 {
		t.Fatalf("Deliver failed %d of %d items, first %s: %v", len(res.Failures), len(evs), res.Failures[0].ID, res.Failures[0].Err)
	}
	d.expectArrived(t, payloads, nil)
}
