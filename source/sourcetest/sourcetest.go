// Package sourcetest is the contract suite every source.Source runs in its
// tests: the memory and SQS sources, and users' own. It checks the record
// shape, receive limits, settling, visibility and cancellation, the way the
// pipe relies on them.
//
//	func TestContract(t *testing.T) {
//		sourcetest.Run(t, sourcetest.Harness{
//			New: func(t *testing.T, o sourcetest.QueueOptions) (source.Source, func(*testing.T, ...string)) {
//				q := newTestQueue(t, o) // a fresh, empty queue
//				return q, func(t *testing.T, bodies ...string) { send(t, q, bodies) }
//			},
//		})
//	}
package sourcetest

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/source"
)

// QueueOptions are what a subtest asks of the fresh queue it gets.
type QueueOptions struct {
	// VisibilityTimeout is the queue's visibility timeout: how long a
	// receive hides a message.
	VisibilityTimeout time.Duration
	// WaitTime is how long a Receive on the empty queue long-polls before
	// it returns no messages.
	WaitTime time.Duration
}

// Harness connects the suite to a source.
type Harness struct {
	// New makes a fresh, empty queue with the given options and returns a
	// source on it and a function that sends the bodies to it (failing t
	// on error). It is called once per subtest, from parallel subtests;
	// use t.Cleanup to remove the queue. Sources that implement
	// source.Opener are opened by the suite.
	New func(t *testing.T, opts QueueOptions) (src source.Source, send func(t *testing.T, bodies ...string))
	// VisibilityTimeout is the short visibility timeout the suite waits
	// out: default 200ms. Servers with a 1 s minimum use 1-2 s.
	VisibilityTimeout time.Duration
	// WaitTime is the long poll of queues that expect messages: default
	// 1 s. It must be longer than the server takes to make a sent message
	// receivable.
	WaitTime time.Duration
	// LongWaitTime is the long poll of queues where a receive is cancelled
	// while it waits: default 20 s. A cancelled receive must return
	// ctx's error (errors.Is context.Canceled) and must not take messages
	// it does not return: they would stay hidden for 10 minutes.
	LongWaitTime time.Duration
	// Patience bounds how long the suite keeps receiving for a message it
	// expects before it fails: default 30 s.
	Patience time.Duration
	// AbandonedPollsTakeMessages says the server may hand a message to a
	// long poll whose client has given up (SQS does: the request goes on on
	// the server). The suite then skips the check that receives cancelled
	// while messages arrive lose none; the pipe runtime copes by never
	// cancelling a receive before its wait time, except at the shutdown
	// deadline.
	AbandonedPollsTakeMessages bool
	// EventSource is the eventSource of the source's records: default
	// "aws:sqs".
	EventSource string
	// NotSQSShaped says the records have another shape than SQS's (a
	// pipe.Record, e.g. RabbitMQ's): the suite does not check md5OfBody
	// and SentTimestamp, which such records do not carry.
	NotSQSShaped bool
	// NoLeases says deliveries do not end on their own (RabbitMQ: a
	// delivery stays with the consumer until it is settled or its channel
	// closes): the suite skips the check that an unsettled message comes
	// back after the visibility timeout.
	NoLeases bool
	// ForgedHandlesSettle says the server reports a settle with a forged
	// or stale receipt handle as done (fauxqs does): the suite skips the
	// check that such a settle fails that message alone.
	ForgedHandlesSettle bool
	// DelayedNakSettles says a Nak with a delay is a final settle (the
	// RabbitMQ source moves the message to a delay queue and acks the
	// original): the suite does not settle that receipt again.
	DelayedNakSettles bool
}

func (h Harness) withDefaults() Harness {
	if h.VisibilityTimeout == 0 {
		h.VisibilityTimeout = 200 * time.Millisecond
	}
	if h.WaitTime == 0 {
		h.WaitTime = time.Second
	}
	if h.LongWaitTime == 0 {
		h.LongWaitTime = 20 * time.Second
	}
	if h.Patience == 0 {
		h.Patience = 30 * time.Second
	}
	if h.EventSource == "" {
		h.EventSource = "aws:sqs"
	}
	return h
}

// longVisibility hides received messages for longer than any subtest runs,
// so that a message seen again came back because of what the subtest did.
const longVisibility = 10 * time.Minute

// Run runs the contract subtests against fresh queues made by h. They run
// in parallel, each on its own queue.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("sourcetest: Harness.New is nil")
	}
	h = h.withDefaults()
	tests := []struct {
		name string
		run  func(t *testing.T, h Harness)
	}{
		{"receive returns what was sent with the record fields set", testRecordShape},
		{"receive never returns more than max messages", testMax},
		{"delete removes messages for good", testDelete},
		{"change visibility 0 makes a message receivable at once with a higher receive count", testRelease},
		{"an undeleted message comes back after the visibility timeout", testVisibilityExpiry},
		{"a cancelled receive returns the context's error and loses nothing", testCancel},
		{"a stale receipt handle gives a settle error and the others are settled", testStaleHandle},
		{"an empty queue returns no messages and no error after the wait time", testEmpty},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, h)
		})
	}
}

// queue is one subtest's source.
type queue struct {
	h    Harness
	src  source.Source
	send func(t *testing.T, bodies ...string)
	info source.Info
}

func open(t *testing.T, h Harness, opts QueueOptions) *queue {
	t.Helper()
	src, send := h.New(t, opts)
	q := &queue{h: h, src: src, send: send}
	if o, ok := src.(source.Opener); ok {
		info, err := o.Open(t.Context())
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		q.info = info
	}
	if c, ok := src.(source.Closer); ok {
		t.Cleanup(func() {
			if err := c.Close(context.Background()); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	return q
}

// receiveN receives until n messages came or patience runs out (then it
// fails t). It checks that no receive returns more than max.
func (q *queue) receiveN(t *testing.T, n, max int) []*source.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), q.h.Patience)
	defer cancel()
	var got []*source.Message
	for len(got) < n {
		msgs, err := q.src.Receive(ctx, max)
		if ctx.Err() != nil {
			t.Fatalf("received %d of %d messages within %s (lost, or hidden by a receive that did not return them): %v",
				len(got), n, q.h.Patience, bodies(got))
		}
		if err != nil {
			t.Fatalf("Receive: %v", err)
		}
		if len(msgs) > max {
			t.Fatalf("Receive(%d) returned %d messages", max, len(msgs))
		}
		got = append(got, msgs...)
	}
	if len(got) > n {
		t.Fatalf("expected %d messages, received %d: %v", n, len(got), bodies(got))
	}
	return got
}

// receiveNone receives for one wait time and fails t if anything comes.
func (q *queue) receiveNone(t *testing.T) {
	t.Helper()
	msgs, err := q.src.Receive(t.Context(), 10)
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	if len(msgs) > 0 {
		t.Fatalf("expected no messages, received %v", bodies(msgs))
	}
}

func (q *queue) delete(t *testing.T, msgs ...*source.Message) {
	t.Helper()
	if err := q.src.Ack(t.Context(), msgs); err != nil {
		t.Fatalf("Delete: %v", err)
	}
}

func bodies(msgs []*source.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Body
	}
	return out
}

func testRecordShape(t *testing.T, h Harness) {
	q := open(t, h, QueueOptions{VisibilityTimeout: longVisibility, WaitTime: h.WaitTime})
	sent := []string{`{"n":1}`, "plain text", `{"n":3,"s":"é"}`}
	before := time.Now().Add(-time.Minute).UnixMilli()
	q.send(t, sent...)
	got := q.receiveN(t, len(sent), 10)

	want := map[string]bool{}
	for _, b := range sent {
		want[b] = true
	}
	ids := map[string]bool{}
	for _, m := range got {
		if !want[m.Body] {
			t.Errorf("received body %q, not one sent (or received twice)", m.Body)
		}
		delete(want, m.Body)
		if m.MessageID == "" || ids[m.MessageID] {
			t.Errorf("message %q: empty or repeated messageId %q", m.Body, m.MessageID)
		}
		ids[m.MessageID] = true
		if m.ReceiptHandle == "" {
			t.Errorf("message %s: empty receiptHandle", m.MessageID)
		}
		if m.ReceiveCount() != 1 {
			t.Errorf("message %s: ApproximateReceiveCount %q, want 1", m.MessageID, m.Attributes[source.AttrReceiveCount])
		}
		if !h.NotSQSShaped {
			sum := md5.Sum([]byte(m.Body))
			if m.MD5OfBody != hex.EncodeToString(sum[:]) {
				t.Errorf("message %s: md5OfBody %q, want %x", m.MessageID, m.MD5OfBody, sum)
			}
			ts, err := strconv.ParseInt(m.Attributes[source.AttrSentTimestamp], 10, 64)
			if err != nil || ts < before {
				t.Errorf("message %s: SentTimestamp %q is not a recent epoch in ms", m.MessageID, m.Attributes[source.AttrSentTimestamp])
			}
		}
		if m.EventSource != h.EventSource {
			t.Errorf("message %s: eventSource %q, want %s", m.MessageID, m.EventSource, h.EventSource)
		}
		if m.EventSourceARN == "" || (q.info.ARN != "" && m.EventSourceARN != q.info.ARN) {
			t.Errorf("message %s: eventSourceARN %q, want the queue's ARN %q", m.MessageID, m.EventSourceARN, q.info.ARN)
		}
		if _, err := m.JSON(); err != nil {
			t.Errorf("message %s: encoding the record: %v", m.MessageID, err)
		}
	}
	q.delete(t, got...)
}

func testMax(t *testing.T, h Harness) {
	q := open(t, h, QueueOptions{VisibilityTimeout: longVisibility, WaitTime: h.WaitTime})
	q.send(t, "1", "2", "3", "4", "5")
	var got []*source.Message
	for _, max := range []int{1, 2} {
		got = append(got, q.receiveN(t, max, max)...)
	}
	got = append(got, q.receiveN(t, 2, 2)...)
	q.delete(t, got...)
}

func testDelete(t *testing.T, h Harness) {
	q := open(t, h, QueueOptions{VisibilityTimeout: h.VisibilityTimeout, WaitTime: h.WaitTime})
	q.send(t, "a", "b")
	got := q.receiveN(t, 2, 10)
	q.delete(t, got...)
	time.Sleep(h.VisibilityTimeout) // let a message that was not deleted come back
	q.receiveNone(t)
}

func testRelease(t *testing.T, h Harness) {
	q := open(t, h, QueueOptions{VisibilityTimeout: longVisibility, WaitTime: h.WaitTime})
	q.send(t, "released")
	first := q.receiveN(t, 1, 10)[0]
	if err := q.src.Nak(t.Context(), []*source.Message{first}, 0); err != nil {
		t.Fatalf("ChangeVisibility 0: %v", err)
	}
	again := q.receiveN(t, 1, 10)[0]
	if again.MessageID != first.MessageID {
		t.Fatalf("received %s again, want %s", again.MessageID, first.MessageID)
	}
	if again.ReceiveCount() <= first.ReceiveCount() {
		t.Errorf("receive count %d after %d, want it higher", again.ReceiveCount(), first.ReceiveCount())
	}
	if again.ReceiptHandle == first.ReceiptHandle {
		t.Errorf("the second receive has the first one's receipt handle")
	}
	q.delete(t, again)
}

func testVisibilityExpiry(t *testing.T, h Harness) {
	if h.NoLeases {
		t.Skip("the source's deliveries are not leases: they stay until settled")
	}
	q := open(t, h, QueueOptions{VisibilityTimeout: h.VisibilityTimeout, WaitTime: h.WaitTime})
	q.send(t, "forgotten")
	first := q.receiveN(t, 1, 10)[0]
	again := q.receiveN(t, 1, 10)[0]
	if again.MessageID != first.MessageID || again.ReceiveCount() <= first.ReceiveCount() {
		t.Errorf("received %s (count %d) after %s (count %d), want the same message with a higher count",
			again.MessageID, again.ReceiveCount(), first.MessageID, first.ReceiveCount())
	}
	q.delete(t, again)
}

func testCancel(t *testing.T, h Harness) {
	q := open(t, h, QueueOptions{VisibilityTimeout: longVisibility, WaitTime: h.LongWaitTime})

	// A receive waiting on an empty queue ends with the context's error.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		msgs, err := q.src.Receive(ctx, 10)
		if len(msgs) > 0 {
			err = errors.New("received messages from an empty queue")
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond) // let the receive start waiting
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Receive returned %v, want context.Canceled", err)
	}

	// Receives cancelled while messages arrive lose none of them: a message
	// a cancelled receive swallowed stays hidden for 10 minutes.
	if h.AbandonedPollsTakeMessages {
		return
	}
	const n = 3
	var got []*source.Message
	for i := range n {
		ctx, cancel := context.WithCancel(t.Context())
		type result struct {
			msgs []*source.Message
			err  error
		}
		res := make(chan result, 1)
		go func() {
			msgs, err := q.src.Receive(ctx, 10)
			res <- result{msgs, err}
		}()
		q.send(t, "racing "+strconv.Itoa(i))
		cancel()
		r := <-res
		switch {
		case r.err == nil:
			got = append(got, r.msgs...)
		case len(r.msgs) > 0:
			t.Fatalf("Receive returned %d messages with error %v", len(r.msgs), r.err)
		case !errors.Is(r.err, context.Canceled):
			t.Fatalf("cancelled Receive returned %v, want context.Canceled", r.err)
		}
	}
	// A message swallowed by a cancelled receive would stay hidden for
	// longer than the suite's patience.
	got = append(got, q.receiveN(t, n-len(got), 10)...)
	q.delete(t, got...)
}

func testStaleHandle(t *testing.T, h Harness) {
	if h.ForgedHandlesSettle {
		t.Skip("the server reports a forged receipt handle as settled")
	}
	q := open(t, h, QueueOptions{VisibilityTimeout: longVisibility, WaitTime: h.WaitTime})
	q.send(t, "good", "stale")
	got := q.receiveN(t, 2, 10)
	good, stale := got[0], got[1]
	if good.Body != "good" {
		good, stale = stale, good
	}
	forged := &source.Message{MessageID: stale.MessageID, ReceiptHandle: "AQEBstale" + stale.ReceiptHandle[:min(8, len(stale.ReceiptHandle))] + "x"}

	for _, op := range []struct {
		name string
		call func(msgs []*source.Message) error
	}{
		{"change visibility", func(msgs []*source.Message) error { return q.src.Nak(t.Context(), msgs, longVisibility) }},
		{"delete", func(msgs []*source.Message) error { return q.src.Ack(t.Context(), msgs) }},
	} {
		if h.DelayedNakSettles && op.name == "delete" {
			q.send(t, "good")
			good = q.receiveN(t, 1, 10)[0] // the first was settled by the Nak
		}
		err := op.call([]*source.Message{good, forged})
		var se *core.SettleError
		if !errors.As(err, &se) {
			t.Fatalf("%s with a stale handle returned %v, want a *pipe.SettleError", op.name, err)
		}
		if _, ok := se.Failed[forged.ReceiptHandle]; !ok || len(se.Failed) != 1 {
			t.Errorf("%s: failed %v, want just the receipt %s (SettleError is keyed by receipt handle)", op.name, se.Failed, forged.ReceiptHandle)
		}
		if !se.SenderFault {
			t.Errorf("%s: SenderFault is false for a stale handle", op.name)
		}
	}
	q.delete(t, stale)
}

func testEmpty(t *testing.T, h Harness) {
	q := open(t, h, QueueOptions{VisibilityTimeout: h.VisibilityTimeout, WaitTime: h.WaitTime})
	q.receiveNone(t)
}
