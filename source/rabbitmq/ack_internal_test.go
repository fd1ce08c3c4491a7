package rabbitmq

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// ackBroker is the broker's side of one channel's acks, as RabbitMQ
// checks them: a basic.ack names an unsettled tag (else the broker closes
// the channel), and a multiple one settles every unsettled tag up to it.
// It fails the test on an ack the broker would refuse, and on one that
// settles a tag no Ack asked for.
type ackBroker struct {
	t         *testing.T
	unsettled map[uint64]bool // tag → acked by Ack (may be settled by an ack)
	frames    []string
}

func newAckBroker(t *testing.T, n int) *ackBroker {
	b := &ackBroker{t: t, unsettled: map[uint64]bool{}}
	for i := 1; i <= n; i++ {
		b.unsettled[uint64(i)] = false
	}
	return b
}

func (b *ackBroker) send(tag uint64, multiple bool) error {
	b.t.Helper()
	b.frames = append(b.frames, fmt.Sprintf("%d/%v", tag, multiple))
	acked, ok := b.unsettled[tag]
	if !ok {
		b.t.Fatalf("basic.ack of tag %d, settled already: the broker closes the channel", tag)
	}
	if !acked {
		b.t.Fatalf("basic.ack of tag %d, which no Ack asked for", tag)
	}
	delete(b.unsettled, tag)
	if !multiple {
		return nil
	}
	for t, acked := range b.unsettled {
		if t < tag {
			if !acked {
				b.t.Fatalf("basic.ack multiple of %d settles tag %d, which no Ack asked for", tag, t)
			}
			delete(b.unsettled, t)
		}
	}
	return nil
}

// elsewhere settles tag another way (a nack, a reject), as the failure
// paths do, then tells the ledger.
func (b *ackBroker) elsewhere(l *ackLedger, tag uint64) {
	b.t.Helper()
	if _, ok := b.unsettled[tag]; !ok {
		b.t.Fatalf("nack of tag %d, settled already", tag)
	}
	delete(b.unsettled, tag)
	l.settledElsewhere(tag)
}

// acked marks tags as asked for by Ack, then acks them through l.
func (b *ackBroker) acked(l *ackLedger, tags ...uint64) {
	b.t.Helper()
	for _, t := range tags {
		b.unsettled[t] = true
	}
	if errs := l.ack(tags); errs != nil {
		b.t.Fatalf("ack %v: %v", tags, errs)
	}
}

func span(from, to uint64) []uint64 {
	var out []uint64
	for t := from; t <= to; t++ {
		out = append(out, t)
	}
	return out
}

// testLedger is a ledger whose timer never fires within a test (it is
// flushed by hand), over a broker of n deliveries.
func testLedger(t *testing.T, n int) (*ackLedger, *ackBroker) {
	b := newAckBroker(t, n)
	l := newAckLedger(b.send, 1000)
	l.linger = time.Hour
	t.Cleanup(func() { l.drop() })
	return l, b
}

func TestTheLedgerAcksTheOldestRunWithOneMultipleAck(t *testing.T) {
	for _, tc := range []struct {
		name   string
		steps  func(l *ackLedger, b *ackBroker)
		frames []string
	}{
		{"batches in order: one multiple ack each", func(l *ackLedger, b *ackBroker) {
			b.acked(l, 1, 2, 3)
			b.acked(l, 4, 5, 6, 7)
		}, []string{"3/true", "7/true"}},
		{"a later batch lingers until the older one comes: one ack for both", func(l *ackLedger, b *ackBroker) {
			b.acked(l, 4, 5, 6)
			b.acked(l, 1, 2, 3)
			b.acked(l, 7, 8)
		}, []string{"6/true", "8/true"}},
		{"a single tag goes alone", func(l *ackLedger, b *ackBroker) {
			b.acked(l, 1)
			b.acked(l, 2)
		}, []string{"1/false", "2/false"}},
		{"a tag nacked meanwhile does not stop the floor", func(l *ackLedger, b *ackBroker) {
			b.acked(l, 1, 2, 4, 5)
			b.elsewhere(l, 3)
			b.acked(l, 6, 7)
		}, []string{"2/true", "5/true", "7/true"}},
		{"a tag nacked first is passed over", func(l *ackLedger, b *ackBroker) {
			b.elsewhere(l, 1)
			b.acked(l, 2, 3)
		}, []string{"3/true"}},
		{"the nack that completes a run sends the lingering acks above it", func(l *ackLedger, b *ackBroker) {
			b.acked(l, 2, 3, 4)
			b.elsewhere(l, 1)
		}, []string{"4/true"}},
		{"acks lingering over an unsettled tag go one by one on a flush", func(l *ackLedger, b *ackBroker) {
			b.acked(l, 3, 4)
			l.flush()
			b.acked(l, 1) // done: at once
			b.acked(l, 2, 5)
		}, []string{"3/false", "4/false", "1/false", "5/true"}},
		{"a dropped ledger sends nothing more of what lingered", func(l *ackLedger, b *ackBroker) {
			b.acked(l, 2, 3)
			l.drop()
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, b := testLedger(t, 100)
			tc.steps(l, b)
			if !slices.Equal(b.frames, tc.frames) {
				t.Errorf("frames %v, want %v", b.frames, tc.frames)
			}
		})
	}
}

func TestLingeringAcksGoWhenTheTimerFires(t *testing.T) {
	b := newAckBroker(t, 20)
	done := make(chan struct{})
	l := newAckLedger(func(tag uint64, multiple bool) error {
		err := b.send(tag, multiple)
		if tag == 12 {
			close(done)
		}
		return err
	}, 1000)
	l.linger = 5 * time.Millisecond
	l.mu.Lock() // the broker's map is the test's: guard it as the ledger does
	for _, t := range span(11, 12) {
		b.unsettled[t] = true
	}
	l.mu.Unlock()
	if errs := l.ack(span(11, 12)); errs != nil {
		t.Fatal(errs)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the lingering acks were not sent")
	}
	l.flush()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !slices.Equal(b.frames, []string{"11/false", "12/false"}) {
		t.Errorf("frames %v, want 11 and 12 one by one", b.frames)
	}
}

func TestLingeringAcksGoAtOnceWhenTooManyWait(t *testing.T) {
	b := newAckBroker(t, 100)
	l := newAckLedger(b.send, 10) // 5 may linger
	l.linger = time.Hour
	defer l.drop()
	b.acked(l, 2, 3)
	b.acked(l, 4, 5, 6)
	if want := []string{"2/false", "3/false", "4/false", "5/false", "6/false"}; !slices.Equal(b.frames, want) {
		t.Errorf("frames %v, want %v", b.frames, want)
	}
}

func TestAStuckFloorTurnsTheLedgerOffInsteadOfGrowing(t *testing.T) {
	l, b := testLedger(t, maxAbove+10)
	tags := span(2, maxAbove+3) // tag 1 is never settled here
	for _, t := range tags {
		b.unsettled[t] = true
	}
	if errs := l.ack(tags); errs != nil {
		t.Fatal(errs)
	}
	if !l.off || l.settled != nil || l.pending != nil {
		t.Fatalf("off %v, %d settled, %d pending: want the ledger off and empty", l.off, len(l.settled), len(l.pending))
	}
	if len(b.frames) != len(tags) {
		t.Fatalf("%d frames for %d tags", len(b.frames), len(tags))
	}
	b.acked(l, 1, maxAbove+4)
	if want := []string{"1/false", fmt.Sprintf("%d/false", maxAbove+4)}; !slices.Equal(b.frames[len(tags):], want) {
		t.Errorf("an off ledger sent %v, want %v", b.frames[len(tags):], want)
	}
}

// Batches of 10 settling in a random order (16 in flight, each taking a
// fixed time and a random one, exponentially distributed: the next to
// finish is the one due first; a new one starts only while the in-flight
// and the lingering messages fit the prefetch; the timer fires as it
// would), some of their messages nacked: every ack is one the broker
// takes, every acked tag is settled in the end, none that was not acked.
// Lingering brings the frames under what they are without it.
func TestRandomSettlingOrdersOnlyEverAckWhatWasAcked(t *testing.T) {
	type batch struct {
		tags []uint64
		due  time.Duration
	}
	const batches, size, inflight = 200, 10, 16
	for _, tc := range []struct {
		name            string
		fixed, jitter   time.Duration
		maxFramesPerMsg float64
	}{
		// Without the linger these come to 0.73 and 0.88 frames a
		// message (the first near the 0.70 measured at c16).
		{"jitter a fifth of a batch's time", 4 * time.Millisecond, time.Millisecond, 0.35},
		{"jitter as long as a batch's time", 2 * time.Millisecond, 2 * time.Millisecond, 0.75},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var frames, msgs int
			for seed := range uint64(100) {
				rng := rand.New(rand.NewPCG(seed, 7))
				b := newAckBroker(t, batches*size)
				l := newAckLedger(b.send, size*inflight)
				var now time.Duration
				l.now = func() time.Time { return time.Unix(0, int64(now)) }
				l.linger = time.Hour // fired by hand, as it would fire at ackLinger
				var open []batch
				next, nacks := 0, 0
				for next < batches || len(open) > 0 {
					for len(open) < inflight && next < batches && len(open)*size+len(l.pending) < size*inflight {
						open = append(open, batch{span(uint64(next*size+1), uint64(next*size+size)),
							now + tc.fixed + time.Duration(rng.ExpFloat64()*float64(tc.jitter))})
						next++
					}
					fireAt := time.Duration(-1)
					for _, at := range l.pending {
						if d := time.Duration(at.UnixNano()) + ackLinger; fireAt < 0 || d < fireAt {
							fireAt = d
						}
					}
					i := 0
					for j := range open {
						if open[j].due < open[i].due {
							i = j
						}
					}
					if fireAt >= 0 && (len(open) == 0 || open[i].due > fireAt) {
						now = max(now, fireAt)
						l.mu.Lock()
						l.linger = ackLinger
						l.expireLocked()
						l.stopTimerLocked()
						l.linger = time.Hour
						l.mu.Unlock()
						continue
					}
					bt := open[i]
					open = slices.Delete(open, i, i+1)
					now = bt.due
					var ack []uint64
					for _, t := range bt.tags {
						if rng.IntN(20) == 0 {
							b.elsewhere(l, t)
							nacks++
						} else {
							ack = append(ack, t)
						}
					}
					if len(ack) > 0 {
						b.acked(l, ack...)
					}
				}
				l.flush()
				if len(b.unsettled) != 0 {
					t.Fatalf("seed %d: tags left unsettled: %v", seed, b.unsettled)
				}
				frames, msgs = frames+len(b.frames), msgs+batches*size-nacks
			}
			perMsg := float64(frames) / float64(msgs)
			t.Logf("%.3f ack frames a message", perMsg)
			if perMsg > tc.maxFramesPerMsg {
				t.Errorf("%.2f ack frames a message, want at most %.2f", perMsg, tc.maxFramesPerMsg)
			}
		})
	}
}
