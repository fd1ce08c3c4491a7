package memory_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/source/memory"
	"github.com/pipesproject/pipes/source/sourcetest"
)

func TestContract(t *testing.T) {
	b := memory.NewBroker()
	var mu sync.Mutex
	n := 0
	sourcetest.Run(t, sourcetest.Harness{
		New: func(t *testing.T, o sourcetest.QueueOptions) (source.Source, func(*testing.T, ...string)) {
			mu.Lock()
			n++
			name := "contract-" + strconv.Itoa(n)
			mu.Unlock()
			q, err := b.Queue(name, memory.Options{VisibilityTimeout: o.VisibilityTimeout, WaitTime: o.WaitTime})
			if err != nil {
				t.Fatal(err)
			}
			return q, func(t *testing.T, bodies ...string) {
				for _, body := range bodies {
					if _, err := q.Send(t.Context(), memory.SendInput{Body: body}); err != nil {
						t.Fatal(err)
					}
				}
			}
		},
		VisibilityTimeout: 100 * time.Millisecond,
		WaitTime:          200 * time.Millisecond,
	})
}

// clock is a fake clock the tests move by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// step is one action of a scenario on a queue driven by a fake clock.
type step struct {
	do    string // send, receive, delete, release, advance, dlq
	arg   string // send: "body" or "group:body"; delete/release: body
	max   int    // receive: max (default 10)
	delay time.Duration
	want  []string // receive, dlq: bodies in order
}

func send(arg string) step                 { return step{do: "send", arg: arg} }
func receive(max int, want ...string) step { return step{do: "receive", max: max, want: want} }
func del(body string) step                 { return step{do: "delete", arg: body} }
func release(body string) step             { return step{do: "release", arg: body} }
func advance(d time.Duration) step         { return step{do: "advance", delay: d} }
func dlq(want ...string) step              { return step{do: "dlq", want: want} }

func TestQueueScenarios(t *testing.T) {
	tests := []struct {
		name  string
		opts  memory.Options
		steps []step
	}{
		{"an unsettled message comes back after the visibility timeout", memory.Options{}, []step{
			send("a"), receive(10, "a"), receive(10), advance(29 * time.Second), receive(10),
			advance(time.Second), receive(10, "a"),
		}},
		{"a released message is receivable at once", memory.Options{}, []step{
			send("a"), receive(10, "a"), release("a"), receive(10, "a"),
		}},
		{"a deleted message never comes back", memory.Options{}, []step{
			send("a"), send("b"), receive(10, "a", "b"), del("a"), advance(time.Hour), receive(10, "b"),
		}},
		{"receives honour max and send order", memory.Options{}, []step{
			send("a"), send("b"), send("c"), receive(2, "a", "b"), receive(2, "c"),
		}},
		{"a delayed message is hidden until its delay passes", memory.Options{}, []step{
			{do: "send", arg: "late", delay: time.Minute}, send("early"), receive(10, "early"), del("early"),
			advance(time.Minute), receive(10, "late"),
		}},
		{"a message already received max receive count times is dead-lettered", memory.Options{MaxReceiveCount: 2, DeadLetterQueue: "dlq"}, []step{
			send("a"), send("b"), receive(1, "a"), advance(time.Minute), receive(1, "a"), advance(time.Minute),
			receive(10, "b"), dlq("a"),
		}},
		{"a released message is dead-lettered on its next receive", memory.Options{MaxReceiveCount: 1, DeadLetterQueue: "dlq"}, []step{
			send("a"), receive(10, "a"), release("a"), receive(10), dlq("a"),
		}},
		{"messages of a group come in order", memory.Options{FIFO: true}, []step{
			send("g:1"), send("g:2"), send("g:3"), receive(10, "1", "2", "3"),
		}},
		{"one receive may hold several groups", memory.Options{FIFO: true}, []step{
			send("a:a1"), send("b:b1"), send("a:a2"), receive(10, "a1", "b1", "a2"),
		}},
		{"a group is held while one of its messages is in flight", memory.Options{FIFO: true}, []step{
			send("g:g1"), send("g:g2"), send("h:h1"), receive(1, "g1"), receive(10, "h1"), receive(10),
			del("g1"), receive(10, "g2"),
		}},
		{"a group is released by visibility 0", memory.Options{FIFO: true}, []step{
			send("g:g1"), send("g:g2"), receive(1, "g1"), receive(10), release("g1"), receive(10, "g1", "g2"),
		}},
		{"a group is released when the visibility timeout expires", memory.Options{FIFO: true}, []step{
			send("g:g1"), send("g:g2"), receive(1, "g1"), advance(29 * time.Second), receive(10),
			advance(time.Second), receive(10, "g1", "g2"),
		}},
		{"a later message in flight holds an earlier released one", memory.Options{FIFO: true}, []step{
			send("g:g1"), send("g:g2"), receive(10, "g1", "g2"), release("g1"), receive(10),
			del("g2"), receive(10, "g1"),
		}},
		{"dead-lettering the head of a group lets the next one through", memory.Options{FIFO: true, MaxReceiveCount: 1, DeadLetterQueue: "dlq.fifo"}, []step{
			send("g:g1"), send("g:g2"), receive(1, "g1"), receive(10), advance(time.Minute),
			receive(1, "g2"), dlq("g1"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock()
			b := memory.NewBroker()
			tt.opts.Now = c.Now
			q, err := b.Queue("q", tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			latest := map[string]*source.Message{}
			for i, s := range tt.steps {
				where := fmt.Sprintf("step %d (%s %s)", i+1, s.do, s.arg)
				switch s.do {
				case "send":
					in := memory.SendInput{Body: s.arg, Delay: s.delay}
					if g, body, ok := strings.Cut(s.arg, ":"); ok {
						in.GroupID, in.Body = g, body
					}
					if _, err := q.Send(t.Context(), in); err != nil {
						t.Fatalf("%s: %v", where, err)
					}
				case "receive":
					msgs, err := q.Receive(t.Context(), s.max)
					if err != nil {
						t.Fatalf("%s: %v", where, err)
					}
					if got := bodiesOf(msgs); !slices.Equal(got, s.want) {
						t.Fatalf("%s: received %q, want %q", where, got, s.want)
					}
					for _, m := range msgs {
						latest[m.Body] = m
					}
				case "delete":
					if err := q.Delete(t.Context(), []*source.Message{latest[s.arg]}); err != nil {
						t.Fatalf("%s: %v", where, err)
					}
				case "release":
					if err := q.ChangeVisibility(t.Context(), []*source.Message{latest[s.arg]}, 0); err != nil {
						t.Fatalf("%s: %v", where, err)
					}
				case "advance":
					c.Advance(s.delay)
				case "dlq":
					d, ok := b.Lookup(tt.opts.DeadLetterQueue)
					if !ok {
						t.Fatalf("%s: no dead-letter queue %q", where, tt.opts.DeadLetterQueue)
					}
					if got := bodiesOf(d.Snapshot()); !slices.Equal(got, s.want) {
						t.Fatalf("%s: dead-letter queue holds %q, want %q", where, got, s.want)
					}
				default:
					t.Fatalf("%s: unknown step", where)
				}
			}
		})
	}
}

func bodiesOf(msgs []*source.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Body)
	}
	return out
}

func TestReceiveSetsTheRecordAttributes(t *testing.T) {
	c := newClock()
	b := memory.NewBroker()
	q, err := b.Queue("orders.fifo", memory.Options{FIFO: true, Region: "eu-west-1", Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	v := "gold"
	id, err := q.Send(t.Context(), memory.SendInput{
		Body: "hello", GroupID: "g1", DeduplicationID: "d1",
		MessageAttributes: map[string]source.MessageAttribute{"tier": {DataType: "String", StringValue: &v}},
	})
	if err != nil {
		t.Fatal(err)
	}
	sent := c.Now().UnixMilli()
	c.Advance(time.Second)
	first := receiveOne(t, q)
	c.Advance(time.Minute)
	again := receiveOne(t, q)

	for _, check := range []struct{ name, got, want string }{
		{"messageId", again.MessageID, id},
		{"body", again.Body, "hello"},
		{"md5OfBody", again.MD5OfBody, "5d41402abc4b2a76b9719d911017c592"},
		{"eventSource", again.EventSource, "aws:sqs"},
		{"eventSourceARN", again.EventSourceARN, "arn:pipes:memory:eu-west-1:000000000000:orders.fifo"},
		{"awsRegion", again.AWSRegion, "eu-west-1"},
		{"SentTimestamp", again.Attributes["SentTimestamp"], strconv.FormatInt(sent, 10)},
		{"ApproximateFirstReceiveTimestamp", again.Attributes["ApproximateFirstReceiveTimestamp"], strconv.FormatInt(sent+1000, 10)},
		{"ApproximateReceiveCount (first)", first.Attributes["ApproximateReceiveCount"], "1"},
		{"ApproximateReceiveCount (again)", again.Attributes["ApproximateReceiveCount"], "2"},
		{"SenderId", again.Attributes["SenderId"], "pipes-memory"},
		{"MessageGroupId", again.Attributes["MessageGroupId"], "g1"},
		{"MessageDeduplicationId", again.Attributes["MessageDeduplicationId"], "d1"},
		{"SequenceNumber", again.Attributes["SequenceNumber"], "00000000000000000001"},
		{"message attribute", *again.MessageAttributes["tier"].StringValue, "gold"},
	} {
		if check.got != check.want {
			t.Errorf("%s = %q, want %q", check.name, check.got, check.want)
		}
	}
	if len(again.MessageID) != 36 || again.MD5OfMessageAttributes == "" || first.ReceiptHandle == again.ReceiptHandle {
		t.Errorf("id %q, md5OfMessageAttributes %q, handles %q and %q", again.MessageID, again.MD5OfMessageAttributes, first.ReceiptHandle, again.ReceiptHandle)
	}
}

func receiveOne(t *testing.T, q *memory.Queue) *source.Message {
	t.Helper()
	msgs, err := q.Receive(t.Context(), 10)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("Receive = %d messages, %v; want 1", len(msgs), err)
	}
	return msgs[0]
}

func TestDeadLetteredMessagesKeepIdBodyAndAttributes(t *testing.T) {
	c := newClock()
	b := memory.NewBroker()
	q, err := b.Queue("src.fifo", memory.Options{FIFO: true, MaxReceiveCount: 1, DeadLetterQueue: "dlq.fifo", Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	v := "x"
	id, _ := q.Send(t.Context(), memory.SendInput{Body: "b", GroupID: "g", DeduplicationID: "d",
		MessageAttributes: map[string]source.MessageAttribute{"k": {DataType: "String", StringValue: &v}}})
	first := receiveOne(t, q)
	c.Advance(time.Minute)
	if msgs, err := q.Receive(t.Context(), 10); err != nil || len(msgs) != 0 {
		t.Fatalf("Receive after max receives = %d messages, %v; want none", len(msgs), err)
	}
	d, _ := b.Lookup("dlq.fifo")
	m := receiveOne(t, d)
	if m.MessageID != id || m.Body != "b" || *m.MessageAttributes["k"].StringValue != "x" ||
		m.Attributes["DeadLetterQueueSourceArn"] != "arn:pipes:memory:local:000000000000:src.fifo" ||
		m.Attributes["MessageDeduplicationId"] != id || m.Attributes["SentTimestamp"] != first.Attributes["SentTimestamp"] ||
		m.Attributes["MessageGroupId"] != "g" || m.ReceiveCount() != 2 {
		t.Errorf("dead-lettered record %+v", m.Attributes)
	}
	if s := q.Stats(); s.DeadLettered != 1 || s.Sent != 1 || s.Received != 1 || s.Visible+s.InFlight != 0 {
		t.Errorf("source stats %+v", s)
	}
	if s := d.Stats(); s.Sent != 0 || s.InFlight != 1 {
		t.Errorf("dead-letter queue stats %+v", s)
	}
}

func TestStaleReceiptHandles(t *testing.T) {
	tests := []struct {
		name  string
		stale func(t *testing.T, q *memory.Queue, m *source.Message) *source.Message
	}{
		{"a message received again since", func(t *testing.T, q *memory.Queue, m *source.Message) *source.Message {
			if err := q.ChangeVisibility(t.Context(), []*source.Message{m}, 0); err != nil {
				t.Fatal(err)
			}
			receiveOne(t, q)
			return m
		}},
		{"a message already deleted", func(t *testing.T, q *memory.Queue, m *source.Message) *source.Message {
			if err := q.Delete(t.Context(), []*source.Message{m}); err != nil {
				t.Fatal(err)
			}
			return m
		}},
		{"an unknown handle", func(t *testing.T, q *memory.Queue, m *source.Message) *source.Message {
			return &source.Message{MessageID: m.MessageID, ReceiptHandle: "nonsense"}
		}},
	}
	for _, tt := range tests {
		for _, op := range []string{"delete", "change visibility"} {
			t.Run(op+" of "+tt.name+" fails for it alone", func(t *testing.T) {
				q, _ := memory.NewBroker().Queue("q", memory.Options{Now: newClock().Now})
				q.Send(t.Context(), memory.SendInput{Body: "stale"})
				stale := tt.stale(t, q, receiveOne(t, q))
				q.Send(t.Context(), memory.SendInput{Body: "good"})
				good := receiveOne(t, q)
				var err error
				if op == "delete" {
					err = q.Delete(t.Context(), []*source.Message{stale, good})
				} else {
					err = q.ChangeVisibility(t.Context(), []*source.Message{stale, good}, 0)
				}
				var se *core.SettleError
				if !errors.As(err, &se) || se.Op != op || !se.SenderFault || len(se.Failed) != 1 ||
					!errors.Is(se.Failed[stale.ReceiptHandle], memory.ErrStaleHandle) {
					t.Fatalf("error %#v, want a sender-fault SettleError for %s", err, stale.MessageID)
				}
				if !strings.Contains(err.Error(), stale.MessageID) {
					t.Errorf("error %q does not name the message", err)
				}
				s := q.Stats()
				if op == "delete" && s.Deleted == 0 || op == "change visibility" && s.Visible == 0 {
					t.Errorf("the good message was not settled: %+v", s)
				}
			})
		}
	}
}

func TestLongPollWakesUp(t *testing.T) {
	tests := []struct {
		name string
		opts memory.Options
		// prepare runs before the receive; act runs while it waits.
		prepare func(t *testing.T, q *memory.Queue) *source.Message
		act     func(t *testing.T, q *memory.Queue, m *source.Message)
	}{
		{"when a message is sent", memory.Options{},
			func(t *testing.T, q *memory.Queue) *source.Message { return nil },
			func(t *testing.T, q *memory.Queue, _ *source.Message) {
				q.Send(context.Background(), memory.SendInput{Body: "x"})
			}},
		{"when a message is released", memory.Options{},
			func(t *testing.T, q *memory.Queue) *source.Message {
				q.Send(t.Context(), memory.SendInput{Body: "x"})
				return receiveOne(t, q)
			},
			func(t *testing.T, q *memory.Queue, m *source.Message) {
				q.ChangeVisibility(context.Background(), []*source.Message{m}, 0)
			}},
		{"when a visibility timeout expires", memory.Options{VisibilityTimeout: 50 * time.Millisecond},
			func(t *testing.T, q *memory.Queue) *source.Message {
				q.Send(t.Context(), memory.SendInput{Body: "x"})
				return receiveOne(t, q)
			},
			func(t *testing.T, q *memory.Queue, m *source.Message) {}},
		{"when the message in flight of a FIFO group is deleted", memory.Options{FIFO: true},
			func(t *testing.T, q *memory.Queue) *source.Message {
				q.Send(t.Context(), memory.SendInput{Body: "1", GroupID: "g"})
				q.Send(t.Context(), memory.SendInput{Body: "x", GroupID: "g"})
				m, err := q.Receive(t.Context(), 1)
				if err != nil || len(m) != 1 {
					t.Fatal(err)
				}
				return m[0]
			},
			func(t *testing.T, q *memory.Queue, m *source.Message) {
				q.Delete(context.Background(), []*source.Message{m})
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.opts.WaitTime = memory.MaxWaitTime // an empty answer would mean no wakeup
			q, err := memory.NewBroker().Queue("q", tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			m := tt.prepare(t, q)
			var wg sync.WaitGroup
			wg.Go(func() {
				time.Sleep(20 * time.Millisecond) // let the receive wait first
				tt.act(t, q, m)
			})
			got := receiveOne(t, q)
			wg.Wait()
			if got.Body != "x" {
				t.Errorf("received %q, want x", got.Body)
			}
		})
	}
}

func TestReceiveEndsWithoutMessages(t *testing.T) {
	t.Run("a short poll of an empty queue returns at once", func(t *testing.T) {
		q, _ := memory.NewBroker().Queue("q", memory.Options{})
		if msgs, err := q.Receive(t.Context(), 10); err != nil || msgs != nil {
			t.Fatalf("Receive = %v, %v", msgs, err)
		}
	})
	t.Run("a long poll returns nothing once the wait time passes", func(t *testing.T) {
		q, _ := memory.NewBroker().Queue("q", memory.Options{WaitTime: 20 * time.Millisecond})
		if msgs, err := q.Receive(t.Context(), 10); err != nil || msgs != nil {
			t.Fatalf("Receive = %v, %v", msgs, err)
		}
	})
	t.Run("a cancelled long poll returns the context's error and loses nothing", func(t *testing.T) {
		q, _ := memory.NewBroker().Queue("q", memory.Options{WaitTime: memory.MaxWaitTime})
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Go(func() {
			time.Sleep(20 * time.Millisecond)
			cancel()
		})
		msgs, err := q.Receive(ctx, 10)
		wg.Wait()
		if !errors.Is(err, context.Canceled) || msgs != nil {
			t.Fatalf("Receive = %v, %v; want context.Canceled", msgs, err)
		}
		q.Send(t.Context(), memory.SendInput{Body: "after"})
		if m := receiveOne(t, q); m.Body != "after" || m.ReceiveCount() != 1 {
			t.Errorf("received %q (count %d)", m.Body, m.ReceiveCount())
		}
	})
	t.Run("a receive with a done context receives nothing", func(t *testing.T) {
		q, _ := memory.NewBroker().Queue("q", memory.Options{})
		q.Send(t.Context(), memory.SendInput{Body: "kept"})
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := q.Receive(ctx, 10); !errors.Is(err, context.Canceled) {
			t.Fatalf("Receive error %v", err)
		}
		if s := q.Stats(); s.Visible != 1 || s.Received != 0 {
			t.Errorf("stats %+v", s)
		}
	})
	t.Run("max outside 1..10 is an error", func(t *testing.T) {
		q, _ := memory.NewBroker().Queue("q", memory.Options{})
		for _, max := range []int{0, 11} {
			if _, err := q.Receive(t.Context(), max); err == nil {
				t.Errorf("Receive(%d) gave no error", max)
			}
		}
	})
}

func TestConcurrentConsumersGetEveryMessageOnce(t *testing.T) {
	q, _ := memory.NewBroker().Queue("q", memory.Options{WaitTime: 10 * time.Millisecond})
	const n = 500
	var (
		mu   sync.Mutex
		seen = map[string]int{}
		wg   sync.WaitGroup
	)
	wg.Go(func() {
		for i := range n {
			q.Send(context.Background(), memory.SendInput{Body: strconv.Itoa(i)})
		}
	})
	for range 4 {
		wg.Go(func() {
			for {
				msgs, err := q.Receive(context.Background(), 10)
				if err != nil {
					t.Error(err)
					return
				}
				if len(msgs) == 0 {
					if q.Stats().Sent == n {
						return
					}
					continue
				}
				mu.Lock()
				for _, m := range msgs {
					seen[m.Body]++
				}
				mu.Unlock()
				if err := q.Delete(context.Background(), msgs); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("received %d distinct messages, want %d", len(seen), n)
	}
	for body, k := range seen {
		if k != 1 {
			t.Errorf("message %s received %d times", body, k)
		}
	}
	if s := q.Stats(); s.Deleted != n || s.Visible+s.InFlight != 0 {
		t.Errorf("stats %+v", s)
	}
}

func TestSendRules(t *testing.T) {
	s := "v"
	tests := []struct {
		name string
		fifo bool
		in   memory.SendInput
		want string // error text part, "" for success
	}{
		{"an empty body is refused", false, memory.SendInput{}, "the body is empty"},
		{"a body over 1 MiB is refused", false, memory.SendInput{Body: strings.Repeat("x", memory.MaxBodySize+1)}, "more than 1 MiB"},
		{"a FIFO message needs a group", true, memory.SendInput{Body: "b"}, "needs a message group id"},
		{"a FIFO message takes no delay", true, memory.SendInput{Body: "b", GroupID: "g", Delay: time.Second}, "per-message delays"},
		{"a standard message takes no group", false, memory.SendInput{Body: "b", GroupID: "g"}, "FIFO queues only"},
		{"a delay over 15 minutes is refused", false, memory.SendInput{Body: "b", Delay: 16 * time.Minute}, "not within 0..15m"},
		{"an attribute of an unknown type is refused", false, memory.SendInput{Body: "b",
			MessageAttributes: map[string]source.MessageAttribute{"a": {DataType: "Text", StringValue: &s}}}, `data type "Text"`},
		{"a string attribute needs a string value", false, memory.SendInput{Body: "b",
			MessageAttributes: map[string]source.MessageAttribute{"a": {DataType: "Number.int"}}}, "needs a string value"},
		{"a custom binary attribute is accepted", false, memory.SendInput{Body: "b",
			MessageAttributes: map[string]source.MessageAttribute{"a": {DataType: "Binary.gz", BinaryValue: []byte{1}}}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, _ := memory.NewBroker().Queue("q", memory.Options{FIFO: tt.fifo})
			_, err := q.Send(t.Context(), tt.in)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Send: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Send error %v, want one with %q", err, tt.want)
			}
		})
	}
}

func TestFIFODeduplication(t *testing.T) {
	c := newClock()
	q, _ := memory.NewBroker().Queue("q", memory.Options{FIFO: true, Now: c.Now})
	in := memory.SendInput{Body: "b", GroupID: "g", DeduplicationID: "d"}
	id1, _ := q.Send(t.Context(), in)
	c.Advance(memory.DedupWindow - time.Second)
	id2, _ := q.Send(t.Context(), in)
	c.Advance(time.Second)
	id3, _ := q.Send(t.Context(), in)
	if id1 != id2 || id3 == id1 {
		t.Errorf("ids %s %s %s: want the second a duplicate of the first, the third new", id1, id2, id3)
	}
	if s := q.Stats(); s.Sent != 2 || s.Visible != 2 {
		t.Errorf("stats %+v", s)
	}
}

func TestStatsCountEveryState(t *testing.T) {
	c := newClock()
	q, _ := memory.NewBroker().Queue("q", memory.Options{Now: c.Now})
	for _, in := range []memory.SendInput{{Body: "a"}, {Body: "b"}, {Body: "c"}, {Body: "d", Delay: time.Minute}} {
		q.Send(t.Context(), in)
	}
	msgs, _ := q.Receive(t.Context(), 2)
	q.Delete(t.Context(), msgs[:1])
	want := memory.Stats{Visible: 1, InFlight: 1, Delayed: 1, Sent: 4, Received: 2, Deleted: 1}
	if s := q.Stats(); s != want {
		t.Errorf("stats %+v, want %+v", s, want)
	}
	if got := bodiesOf(q.Snapshot()); !slices.Equal(got, []string{"b", "c", "d"}) {
		t.Errorf("snapshot %q", got)
	}
}

func TestBroker(t *testing.T) {
	t.Run("the same name and options give the same queue", func(t *testing.T) {
		b := memory.NewBroker()
		q1, err1 := b.Queue("q", memory.Options{VisibilityTimeout: time.Minute})
		q2, err2 := b.Queue("q", memory.Options{VisibilityTimeout: time.Minute, Now: time.Now})
		q3, ok := b.Lookup("q")
		if err1 != nil || err2 != nil || q1 != q2 || q1 != q3 || !ok {
			t.Fatalf("%p %p %p %v %v", q1, q2, q3, err1, err2)
		}
		if _, ok := b.Lookup("other"); ok {
			t.Error("Lookup found a queue never created")
		}
	})
	t.Run("other options for an existing queue are an error", func(t *testing.T) {
		b := memory.NewBroker()
		b.Queue("q", memory.Options{})
		if _, err := b.Queue("q", memory.Options{FIFO: true}); err == nil || !strings.Contains(err.Error(), "exists with other options") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("a dead-letter queue is created on demand and takes its own options later", func(t *testing.T) {
		b := memory.NewBroker()
		src, _ := b.Queue("src", memory.Options{MaxReceiveCount: 3, DeadLetterQueue: "dlq", Region: "r"})
		d, ok := b.Lookup("dlq")
		if !ok {
			t.Fatal("no dead-letter queue")
		}
		info, _ := src.Open(t.Context())
		want := source.Info{ARN: "arn:pipes:memory:r:000000000000:src", VisibilityTimeout: 30 * time.Second,
			MaxReceiveCount: 3, DeadLetterARN: "arn:pipes:memory:r:000000000000:dlq", InProcess: true}
		if info != want {
			t.Errorf("info %+v, want %+v", info, want)
		}
		d2, err := b.Queue("dlq", memory.Options{VisibilityTimeout: time.Minute, Region: "r"})
		if err != nil || d2 != d {
			t.Fatalf("explicit dead-letter queue: %v", err)
		}
		if info, _ := d.Open(t.Context()); info.VisibilityTimeout != time.Minute {
			t.Errorf("dead-letter queue info %+v", info)
		}
	})
	t.Run("a dead-letter queue of another type is an error", func(t *testing.T) {
		b := memory.NewBroker()
		b.Queue("dlq", memory.Options{})
		if _, err := b.Queue("src", memory.Options{FIFO: true, MaxReceiveCount: 3, DeadLetterQueue: "dlq"}); err == nil ||
			!strings.Contains(err.Error(), "must be FIFO like its source") {
			t.Fatalf("error %v", err)
		}
	})
	bad := []struct {
		name string
		q    string
		opts memory.Options
		want string
	}{
		{"an empty name", "", memory.Options{}, "must have 1..80 characters"},
		{"a name with a slash", "a/b", memory.Options{}, "may only hold"},
		{"a negative visibility timeout", "q", memory.Options{VisibilityTimeout: -1}, "visibility timeout -1ns is not within 0..12h"},
		{"a wait time over 20s", "q", memory.Options{WaitTime: time.Minute}, "wait time 1m0s is not within 0..20s"},
		{"a max receive count without a queue", "q", memory.Options{MaxReceiveCount: 2}, "needs a dead-letter queue"},
		{"a dead-letter queue without a count", "q", memory.Options{DeadLetterQueue: "d"}, "needs a max receive count"},
		{"a queue as its own dead-letter queue", "q", memory.Options{MaxReceiveCount: 1, DeadLetterQueue: "q"}, "its own dead-letter queue"},
		{"a max receive count over 1000", "q", memory.Options{MaxReceiveCount: 1001, DeadLetterQueue: "d"}, "not within 1..1000"},
	}
	for _, tt := range bad {
		t.Run(tt.name+" is an error", func(t *testing.T) {
			_, err := memory.NewBroker().Queue(tt.q, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one with %q", err, tt.want)
			}
		})
	}
}

func BenchmarkSendReceiveDelete10(b *testing.B) {
	q, _ := memory.NewBroker().Queue("bench", memory.Options{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		for range 10 {
			if _, err := q.Send(ctx, memory.SendInput{Body: `{"order":42}`}); err != nil {
				b.Fatal(err)
			}
		}
		msgs, err := q.Receive(ctx, 10)
		if err != nil || len(msgs) != 10 {
			b.Fatalf("received %d, %v", len(msgs), err)
		}
		if err := q.Delete(ctx, msgs); err != nil {
			b.Fatal(err)
		}
	}
}

func TestChangeVisibilityOutOfRangeIsAnError(t *testing.T) {
	q, _ := memory.NewBroker().Queue("q", memory.Options{})
	q.Send(t.Context(), memory.SendInput{Body: "a"})
	m := receiveOne(t, q)
	for _, d := range []time.Duration{-time.Second, 13 * time.Hour} {
		err := q.ChangeVisibility(t.Context(), []*source.Message{m}, d)
		var se *core.SettleError
		if err == nil || errors.As(err, &se) {
			t.Errorf("ChangeVisibility(%s) = %v, want a plain error", d, err)
		}
	}
}

func TestCloseLeavesTheQueueUsable(t *testing.T) {
	b := memory.NewBroker()
	q, _ := b.Queue("q", memory.Options{})
	q.Send(t.Context(), memory.SendInput{Body: "kept"})
	if err := q.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if m := receiveOne(t, q); m.Body != "kept" {
		t.Errorf("received %q", m.Body)
	}
}
