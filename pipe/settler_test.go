package pipe

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/source"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// call is one settling call a fakeSource saw.
type call struct {
	op      string
	handles []string
	d       time.Duration
	at      time.Time
}

// fakeSource records settling calls. Unit tests of the settler use it: it
// fakes exactly the Source, Extender methods the settler calls.
type fakeSource struct {
	mu    sync.Mutex
	calls []call
	// extend, when set, runs inside Extend (to block it, or fail it).
	extend func(ctx context.Context, msgs []*source.Message) error
}

func handles(msgs []*source.Message) []string {
	hs := make([]string, len(msgs))
	for i, m := range msgs {
		hs[i] = m.ReceiptHandle
	}
	return hs
}

func (f *fakeSource) record(op string, msgs []*source.Message, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call{op: op, handles: handles(msgs), d: d, at: time.Now()})
}

func (f *fakeSource) Receive(ctx context.Context, max int) ([]*source.Message, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (f *fakeSource) Ack(_ context.Context, msgs []*source.Message) error {
	f.record("ack", msgs, 0)
	return nil
}

func (f *fakeSource) Nak(_ context.Context, msgs []*source.Message, d time.Duration) error {
	f.record("nak", msgs, d)
	return nil
}

func (f *fakeSource) Extend(ctx context.Context, msgs []*source.Message, d time.Duration) error {
	if f.extend != nil {
		if err := f.extend(ctx, msgs); err != nil {
			f.record("extend-failed", msgs, d)
			return err
		}
	}
	f.record("extend", msgs, d)
	return nil
}

func (f *fakeSource) callsOf(op string) []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []call
	for _, c := range f.calls {
		if c.op == op {
			out = append(out, c)
		}
	}
	return out
}

// newTestSettler makes a settler on src with visibility vis.
func newTestSettler(t *testing.T, src source.Source, vis time.Duration, opt Options) (*settler, *Pipe) {
	t.Helper()
	opt.Source = src
	opt.Target = TargetFunc(func(context.Context, []*Event) (Result, error) { return Result{}, nil })
	p, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	p.visibility = vis
	p.info = source.Info{ARN: "arn:aws:sqs:us-east-1:000000000000:orders", VisibilityTimeout: vis}
	s := newSettler(p.settlerConfig(), 4)
	t.Cleanup(func() { s.close(time.Now().Add(time.Second)) })
	return s, p
}

func message(i int) *source.Message {
	return &source.Message{MessageID: "m" + strconv.Itoa(i), ReceiptHandle: "h" + strconv.Itoa(i), Body: `{"n":` + strconv.Itoa(i) + `}`,
		Attributes: map[string]string{source.AttrReceiveCount: "1"}}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestASecondFinalVerbIsRefusedCountedAndNotApplied(t *testing.T) {
	src := &fakeSource{}
	s, p := newTestSettler(t, src, time.Minute, Options{})
	d := s.track(message(1), time.Now())
	if err := d.Ack(); err != nil {
		t.Fatalf("first Ack: %v", err)
	}
	if err := d.Nak(); !errors.Is(err, errSettled) {
		t.Fatalf("second verb returned %v, want ErrSettled", err)
	}
	if err := d.Term(errors.New("late")); !errors.Is(err, errSettled) {
		t.Fatalf("third verb returned %v, want ErrSettled", err)
	}
	waitFor(t, "the ack", func() bool { return len(src.callsOf("ack")) == 1 })
	if n := len(src.callsOf("nak")); n != 0 {
		t.Fatalf("%d nak calls, want none: a second verb must not be applied", n)
	}
	if got := testutil.ToFloat64(p.met.doubleSettles); got != 2 {
		t.Fatalf("double_settles_total = %v, want 2", got)
	}
}

func TestAcksAreGatheredAcrossBatchesTenPerCall(t *testing.T) {
	src := &fakeSource{}
	s, _ := newTestSettler(t, src, time.Minute, Options{})
	for batch := range 3 {
		var items []settle
		for i := range 8 + batch {
			items = append(items, settle{d: s.track(message(batch*100+i), time.Now()), v: verbAck})
		}
		s.finalMany(items)
	}
	waitFor(t, "27 acks", func() bool {
		n := 0
		for _, c := range src.callsOf("ack") {
			n += len(c.handles)
		}
		return n == 27
	})
	calls := src.callsOf("ack")
	if len(calls) != 3 {
		t.Fatalf("%d ack calls for 27 acks from 3 batches, want 3 (10, 10, 7)", len(calls))
	}
	if s.tracked() != 0 {
		t.Fatalf("%d deliveries still tracked", s.tracked())
	}
}

// Defect 8: a heartbeat extension under way while a backoff is given must
// not override it: the backoff's visibility change comes after the
// extension returns.
func TestALateExtensionNeverUndoesASettle(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	src := &fakeSource{extend: func(ctx context.Context, _ []*source.Message) error {
		entered <- struct{}{}
		<-release
		return nil
	}}
	s, _ := newTestSettler(t, src, 30*time.Second, Options{})
	d := s.track(message(1), time.Now().Add(-25*time.Second)) // due: 5 s of its lease left
	s.heartbeat(time.Now())
	<-entered
	if err := d.NakWithDelay(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(src.callsOf("nak")); n != 0 {
		t.Fatalf("the backoff was applied while the extension was under way (%d nak calls)", n)
	}
	close(release)
	waitFor(t, "the backoff", func() bool { return len(src.callsOf("nak")) == 1 })
	ext, nak := src.callsOf("extend")[0], src.callsOf("nak")[0]
	if !nak.at.After(ext.at) || nak.d != 10*time.Second {
		t.Fatalf("extend at %v, nak(%v) at %v: want the 10 s backoff after the extension", ext.at, nak.d, nak.at)
	}
	s.heartbeat(time.Now().Add(time.Hour))
	time.Sleep(20 * time.Millisecond)
	if n := len(src.callsOf("extend")); n != 1 {
		t.Fatalf("%d extensions, want no more after the final verb", n)
	}
}

func TestAStaleReceiptIsNotExtendedEveryTick(t *testing.T) {
	src := &fakeSource{extend: func(_ context.Context, msgs []*source.Message) error {
		return &core.SettleError{Op: "change visibility", SenderFault: true,
			Failed: map[string]error{msgs[0].ReceiptHandle: errors.New("ReceiptHandleIsInvalid")}}
	}}
	s, _ := newTestSettler(t, src, 30*time.Second, Options{})
	s.track(message(1), time.Now().Add(-25*time.Second))
	for range 5 {
		s.heartbeat(time.Now())
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(src.callsOf("extend-failed")); n != 1 {
		t.Fatalf("a stale receipt was tried %d times, want once", n)
	}
}

func TestAHungExtensionDoesNotStallTheOthers(t *testing.T) {
	src := &fakeSource{extend: func(ctx context.Context, msgs []*source.Message) error {
		if msgs[0].ReceiptHandle == "h0" {
			<-ctx.Done() // hangs until its call deadline
			return ctx.Err()
		}
		return nil
	}}
	s, _ := newTestSettler(t, src, 30*time.Second, Options{})
	s.track(message(0), time.Now().Add(-25*time.Second))
	s.heartbeat(time.Now())
	for i := 1; i <= 3; i++ {
		d := s.track(message(i), time.Now())
		s.touch(d)
	}
	waitFor(t, "the other extensions", func() bool { return len(src.callsOf("extend")) == 3 })
}

// Defect 12: leases are extended up to 12 h from the receive whatever the
// visibility, and the last extension is cut to fit.
func TestExtensionsReachTwelveHoursFromTheReceive(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name     string
		vis      time.Duration
		received time.Duration // before now
		want     time.Duration
	}{
		{"a 30 s visibility early on", 30 * time.Second, time.Minute, 30 * time.Second},
		{"a 7 h visibility after 5 h", 7 * time.Hour, 5 * time.Hour, 7*time.Hour - leaseCapMargin},
		{"a 7 h visibility after 11 h gets what is left", 7 * time.Hour, 11 * time.Hour, time.Hour - leaseCapMargin},
		{"a 10 s visibility a moment before the cap", 10 * time.Second, 12*time.Hour - 7*time.Second, 2 * time.Second},
		{"nothing at the cap", 10 * time.Second, 12 * time.Hour, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &settler{vis: tt.vis}
			d := &delivery{receivedAt: now.Add(-tt.received)}
			if got := s.extensionLocked(d, now); got != tt.want {
				t.Fatalf("extension %v, want %v", got, tt.want)
			}
		})
	}
}

// Defect 6: the dead-lettered message keeps its body (the envelope when
// one was unwrapped) and every original attribute; the context is folded
// into one attribute when the originals leave no room under SQS's ten.
func TestDeadLetterEventKeepsTheOriginalBodyAndAttributes(t *testing.T) {
	attrs := func(n int) map[string]source.MessageAttribute {
		m := map[string]source.MessageAttribute{}
		for i := range n {
			m["a"+strconv.Itoa(i)] = stringAttr("v" + strconv.Itoa(i))
		}
		return m
	}
	snsBody := `{"Type":"Notification","MessageId":"x","TopicArn":"arn:aws:sns:us-east-1:1:t","Message":"{\"n\":1}","MessageAttributes":{"lifted":{"Type":"String","Value":"l"}}}`
	tests := []struct {
		name       string
		msg        func() *source.Message
		wantBody   string
		wantAttrs  int
		wantFolded bool
	}{
		{"one original: context beside it", func() *source.Message {
			m := message(1)
			m.MessageAttributes = attrs(1)
			return m
		}, `{"n":1}`, 10, false},
		{"five originals: context folded", func() *source.Message {
			m := message(1)
			m.MessageAttributes = attrs(5)
			return m
		}, `{"n":1}`, 6, true},
		{"an unwrapped SNS envelope goes as it came, lifted attributes left out", func() *source.Message {
			m := message(1)
			m.Body = snsBody
			m.MessageAttributes = attrs(1)
			source.Unwrap(m, source.UnwrapSNS)
			return m
		}, snsBody, 10, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.msg()
			d := &delivery{Message: m, reason: atStage("target", Permanent(errors.New("400 bad request")))}
			ev := deadLetterEvent(d, "orders", "arn:aws:sqs:us-east-1:1:orders", time.Now())
			if string(ev.RecordJSON) != tt.wantBody {
				t.Errorf("body %s, want %s", ev.RecordJSON, tt.wantBody)
			}
			if len(ev.Attributes) != tt.wantAttrs {
				t.Errorf("%d attributes, want %d: %v", len(ev.Attributes), tt.wantAttrs, ev.Attributes)
			}
			for k := range m.MessageAttributes {
				if _, ok := ev.Attributes[k]; !ok && !m.Lifted(k) {
					t.Errorf("original attribute %s dropped", k)
				}
			}
			if _, ok := ev.Attributes["lifted"]; ok {
				t.Errorf("an attribute lifted from the envelope was sent as the message's own")
			}
			folded, ok := ev.Attributes[core.DLQContext]
			if ok != tt.wantFolded {
				t.Fatalf("folded context present %v, want %v", ok, tt.wantFolded)
			}
			if ok {
				var ctx map[string]string
				if err := json.Unmarshal([]byte(*folded.StringValue), &ctx); err != nil {
					t.Fatal(err)
				}
				if ctx[DLQErrorCode] != "ClientError" || ctx[DLQStage] != "target" || ctx[DLQOriginalMessageID] != "m1" {
					t.Errorf("folded context %v", ctx)
				}
			} else if *ev.Attributes[DLQErrorCode].StringValue != "ClientError" {
				t.Errorf("ErrorCode %v", *ev.Attributes[DLQErrorCode].StringValue)
			}
		})
	}
}

// nopSource settles instantly, for benchmarks.
type nopSource struct{}

func (nopSource) Receive(ctx context.Context, _ int) ([]*source.Message, error) { return nil, nil }
func (nopSource) Ack(context.Context, []*source.Message) error                  { return nil }
func (nopSource) Nak(context.Context, []*source.Message, time.Duration) error   { return nil }
func (nopSource) Extend(context.Context, []*source.Message, time.Duration) error {
	return nil
}

// BenchmarkSettleBatchOfTen is the settler's cost per message of a batch
// of ten that is acked: track at receive, one finalMany, one Ack call.
func BenchmarkSettleBatchOfTen(b *testing.B) {
	p, err := New(Options{Source: nopSource{}, Target: TargetFunc(func(context.Context, []*Event) (Result, error) { return Result{}, nil })})
	if err != nil {
		b.Fatal(err)
	}
	p.visibility = 30 * time.Second
	s := newSettler(p.settlerConfig(), 8)
	defer s.close(time.Now().Add(time.Second))
	msgs := make([]*source.Message, 10)
	for i := range msgs {
		msgs[i] = message(i)
		if _, err := msgs[i].JSON(); err != nil {
			b.Fatal(err)
		}
	}
	items := make([]settle, 10)
	b.ReportAllocs()
	now := time.Now()
	for b.Loop() {
		for i, m := range msgs {
			items[i] = settle{d: s.track(m, now), v: verbAck}
		}
		s.finalMany(items)
	}
	b.StopTimer()
	for s.tracked() > 0 {
		time.Sleep(time.Millisecond)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*10), "ns/msg")
}

// A message whose delete waits for its call (a slow or failing
// DeleteMessageBatch) keeps its lease: the heartbeat extends it until the
// delete is done, so it is not delivered again meanwhile.
func TestADeliveryAwaitingItsDeleteKeepsItsLease(t *testing.T) {
	release := make(chan struct{})
	src := &slowAckSource{fakeSource: &fakeSource{}, release: release}
	s, _ := newTestSettler(t, src, 30*time.Second, Options{})
	d := s.track(message(1), time.Now().Add(-25*time.Second)) // due: 5 s of its lease left
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.flushAcksLocked(true)
	s.mu.Unlock()
	time.Sleep(20 * time.Millisecond) // the ack call is under way, blocked
	s.heartbeat(time.Now())
	waitFor(t, "the extension", func() bool { return len(src.callsOf("extend")) == 1 })
	close(release)
	waitFor(t, "the delete", func() bool { return s.tracked() == 0 })
	s.heartbeat(time.Now().Add(time.Hour))
	time.Sleep(20 * time.Millisecond)
	if n := len(src.callsOf("extend")); n != 1 {
		t.Fatalf("%d extensions, want none after the delete", n)
	}
}

// slowAckSource blocks Ack until release is closed.
type slowAckSource struct {
	*fakeSource
	release chan struct{}
}

func (s *slowAckSource) Ack(ctx context.Context, msgs []*source.Message) error {
	<-s.release
	return s.fakeSource.Ack(ctx, msgs)
}
