package memory

import (
	"container/list"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/source"
)

// Record constants of the memory source.
const (
	// SenderID is the SenderId attribute of every message sent here.
	SenderID = "pipes-memory"
	// AttrFirstReceiveTimestamp is the system attribute set on the first receive.
	AttrFirstReceiveTimestamp = "ApproximateFirstReceiveTimestamp"
	// AttrDeduplicationID is the FIFO deduplication id attribute.
	AttrDeduplicationID = "MessageDeduplicationId"
	// AttrDeadLetterSourceARN names the queue a dead-lettered message came from.
	AttrDeadLetterSourceARN = "DeadLetterQueueSourceArn"
	// DedupWindow is how long a FIFO deduplication id suppresses duplicates.
	DedupWindow = 5 * time.Minute
)

// ErrStaleHandle is why Delete or ChangeVisibility failed for a message
// (in a *pipe.SettleError): its receipt handle is unknown, or the message
// was received again or deleted since.
var ErrStaleHandle = errors.New("receipt handle is stale or unknown")

// SendInput is a message to send.
type SendInput struct {
	// Body is the message body: 1 byte to 1 MiB.
	Body string
	// MessageAttributes are the sender's attributes (optional).
	MessageAttributes map[string]source.MessageAttribute
	// GroupID is the FIFO message group, required on FIFO queues and
	// refused on standard ones.
	GroupID string
	// DeduplicationID suppresses a FIFO message sent again with the same
	// id within 5 minutes (optional; there is no content-based dedup).
	DeduplicationID string
	// Delay hides the message for that long after sending (0..15 min,
	// standard queues only, as in SQS).
	Delay time.Duration
}

// Stats counts a queue's messages, for tests and summaries.
type Stats struct {
	// Visible messages can be received now (ApproximateNumberOfMessages).
	Visible int
	// InFlight messages were received and are hidden by their visibility
	// timeout (ApproximateNumberOfMessagesNotVisible).
	InFlight int
	// Delayed messages were sent with a delay that has not passed yet.
	Delayed int
	// Sent counts messages sent or preloaded (not those moved in by redrive).
	Sent int64
	// Received counts receives of messages (a message received twice counts 2).
	Received int64
	// Deleted counts messages deleted.
	Deleted int64
	// DeadLettered counts messages this queue moved to its dead-letter queue.
	DeadLettered int64
}

// entry is one stored message.
type entry struct {
	elem      *list.Element
	id        string
	body      string
	md5Body   string
	md5Attrs  string
	attrs     map[string]string // SentTimestamp, SenderId, FIFO and redrive attributes
	mattrs    map[string]source.MessageAttribute
	group     string
	visibleAt time.Time
	receives  int
	firstRecv int64 // ms, 0 before the first receive
	handle    string
}

type dedupEntry struct {
	id   string
	sent time.Time
}

// Queue is one in-process queue. It implements source.Source, source.Opener and
// source.Closer; all its methods are safe for concurrent use.
type Queue struct {
	name string

	mu       sync.Mutex
	opts     Options
	implicit bool // created on demand as a dead-letter queue
	dlq      *Queue
	msgs     list.List // of *entry, in send order
	byHandle map[string]*entry
	dedup    map[string]dedupEntry
	seq      uint64
	wake     chan struct{} // closed and replaced when messages may have become receivable
	stats    Stats
}

var (
	_ source.Source     = (*Queue)(nil)
	_ source.Opener     = (*Queue)(nil)
	_ source.Closer     = (*Queue)(nil)
	_ source.Extender   = (*Queue)(nil)
	_ source.CancelSafe = (*Queue)(nil)
)

func newQueue(name string, opts Options, implicit bool) *Queue {
	return &Queue{
		name:     name,
		opts:     opts,
		implicit: implicit,
		byHandle: make(map[string]*entry),
		dedup:    make(map[string]dedupEntry),
		wake:     make(chan struct{}),
	}
}

// adopt checks opts against the queue's, or takes them when the queue was
// created on demand.
func (q *Queue) adopt(opts Options) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.implicit {
		if q.opts.FIFO != opts.FIFO {
			return fmt.Errorf("creating memory queue %q: it is already the %s dead-letter queue of another queue", q.name, kind(q.opts.FIFO))
		}
		q.opts, q.implicit = opts, false
		return nil
	}
	if !q.opts.sameAs(opts) {
		return fmt.Errorf("creating memory queue %q: it exists with other options", q.name)
	}
	return nil
}

func (q *Queue) setDLQ(d *Queue) {
	q.mu.Lock()
	q.dlq = d
	q.mu.Unlock()
}

func (q *Queue) isFIFO() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.opts.FIFO
}

// Name is the queue's name in its broker.
func (q *Queue) Name() string { return q.name }

// ARN is the queue's identifier in records: arn:pipes:memory:<region>:000000000000:<name>.
func (q *Queue) ARN() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.arnLocked()
}

func (q *Queue) arnLocked() string { return arnOf(q.opts.Region, q.name) }

func arnOf(region, name string) string {
	return "arn:pipes:memory:" + region + ":000000000000:" + name
}

// Open describes the queue. It does not block and may be called any number
// of times.
func (q *Queue) Open(ctx context.Context) (source.Info, error) {
	if err := ctx.Err(); err != nil {
		return source.Info{}, fmt.Errorf("opening memory queue %s: %w", q.name, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	info := source.Info{
		ARN:               q.arnLocked(),
		FIFO:              q.opts.FIFO,
		VisibilityTimeout: q.opts.VisibilityTimeout,
		MaxReceiveCount:   q.opts.MaxReceiveCount,
		InProcess:         true,
	}
	if q.opts.DeadLetterQueue != "" {
		info.DeadLetterARN = arnOf(q.opts.Region, q.opts.DeadLetterQueue)
	}
	return info, nil
}

// Close does nothing and returns nil: the queue belongs to its broker and
// may be shared with other pipes, so its messages stay and it stays usable.
func (q *Queue) Close(ctx context.Context) error { return nil }

// Send puts a message on the queue and returns its message id. It does
// not block. On a FIFO queue, a deduplication id seen within the last 5
// minutes returns the first message's id and stores nothing.
func (q *Queue) Send(ctx context.Context, in SendInput) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("sending to memory queue %s: %w", q.name, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := checkInput(q.opts.FIFO, in); err != nil {
		return "", fmt.Errorf("sending to memory queue %s: %w", q.name, err)
	}
	id, _ := q.sendLocked(in)
	return id, nil
}

// checkInput applies the send rules of a FIFO or standard queue.
func checkInput(fifo bool, in SendInput) error {
	switch {
	case in.Body == "":
		return errors.New("the body is empty")
	case len(in.Body) > MaxBodySize:
		return fmt.Errorf("the body has %d bytes, more than 1 MiB", len(in.Body))
	case !utf8.ValidString(in.Body):
		return errors.New("the body is not valid UTF-8")
	case in.Delay < 0 || in.Delay > 15*time.Minute:
		return fmt.Errorf("delay %s is not within 0..15m", in.Delay)
	case fifo && in.GroupID == "":
		return errors.New("a FIFO queue needs a message group id")
	case fifo && in.Delay > 0:
		return errors.New("a FIFO queue does not take per-message delays")
	case !fifo && (in.GroupID != "" || in.DeduplicationID != ""):
		return errors.New("group and deduplication ids are for FIFO queues only")
	}
	for name, a := range in.MessageAttributes {
		if err := checkAttribute(name, a); err != nil {
			return err
		}
	}
	return nil
}

// checkAttribute applies SQS's rules to a message attribute.
func checkAttribute(name string, a source.MessageAttribute) error {
	if name == "" || len(name) > 256 {
		return fmt.Errorf("message attribute name %q must have 1..256 characters", name)
	}
	base := a.DataType
	for i := range len(base) {
		if base[i] == '.' {
			base = base[:i]
			break
		}
	}
	switch base {
	case "String", "Number":
		if a.StringValue == nil {
			return fmt.Errorf("message attribute %q of type %s needs a string value", name, a.DataType)
		}
	case "Binary":
		if a.BinaryValue == nil {
			return fmt.Errorf("message attribute %q of type %s needs a binary value", name, a.DataType)
		}
	default:
		return fmt.Errorf("message attribute %q has data type %q, not String, Number or Binary (with an optional .suffix)", name, a.DataType)
	}
	return nil
}

// sendLocked stores a checked message and returns its id, and whether it
// was stored (not a FIFO duplicate). q.mu must be held.
func (q *Queue) sendLocked(in SendInput) (string, bool) {
	now := q.opts.Now()
	if q.opts.FIFO && in.DeduplicationID != "" {
		for k, d := range q.dedup {
			if now.Sub(d.sent) >= DedupWindow {
				delete(q.dedup, k)
			}
		}
		if d, ok := q.dedup[in.DeduplicationID]; ok {
			return d.id, false
		}
	}
	sum := md5.Sum([]byte(in.Body))
	e := &entry{
		id:        newID(),
		body:      in.Body,
		md5Body:   hex.EncodeToString(sum[:]),
		attrs:     map[string]string{source.AttrSentTimestamp: strconv.FormatInt(now.UnixMilli(), 10), "SenderId": SenderID},
		visibleAt: now.Add(in.Delay),
		group:     in.GroupID,
	}
	if len(in.MessageAttributes) > 0 {
		e.mattrs = make(map[string]source.MessageAttribute, len(in.MessageAttributes))
		for k, v := range in.MessageAttributes {
			e.mattrs[k] = v
		}
		e.md5Attrs = md5OfAttributes(e.mattrs)
	}
	if q.opts.FIFO {
		e.attrs[source.AttrMessageGroupID] = in.GroupID
		e.attrs[source.AttrSequenceNumber] = q.nextSeq()
		if in.DeduplicationID != "" {
			e.attrs[AttrDeduplicationID] = in.DeduplicationID
			q.dedup[in.DeduplicationID] = dedupEntry{id: e.id, sent: now}
		}
	}
	e.elem = q.msgs.PushBack(e)
	q.stats.Sent++
	q.signal()
	return e.id, true
}

func (q *Queue) nextSeq() string {
	q.seq++
	return fmt.Sprintf("%020d", q.seq)
}

// arrive stores messages moved here by a redrive policy, keeping their id,
// body, attributes and receive count. It does not count them as sent.
func (q *Queue) arrive(from string, es []*entry) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, e := range es {
		e.attrs[AttrDeadLetterSourceARN] = from
		if q.opts.FIFO {
			// SQS replaces the deduplication id by the message id on the
			// move into a FIFO dead-letter queue.
			e.attrs[AttrDeduplicationID] = e.id
			e.attrs[source.AttrSequenceNumber] = q.nextSeq()
		}
		e.handle = ""
		e.visibleAt = time.Time{}
		e.elem = q.msgs.PushBack(e)
	}
	q.signal()
}

// signal wakes the receivers waiting for messages. q.mu must be held.
func (q *Queue) signal() {
	close(q.wake)
	q.wake = make(chan struct{})
}

// Receive returns up to max (1..10) visible messages and hides them for the
// visibility timeout. On an empty queue it long-polls: it blocks until a
// message is sent or becomes visible again, the wait time passes (then it
// returns no messages and nil), or ctx is done (then it returns ctx's error
// and receives nothing). Messages received maxReceiveCount times are moved
// to the dead-letter queue instead of being returned.
func (q *Queue) Receive(ctx context.Context, max int) ([]*source.Message, error) {
	limit := max
	if limit < 1 || limit > 10 {
		return nil, fmt.Errorf("receiving from memory queue %s: max %d is not within 1..10", q.name, limit)
	}
	var deadline *time.Timer
	defer func() {
		if deadline != nil {
			deadline.Stop()
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		q.mu.Lock()
		msgs, moved, next := q.take(limit)
		wake, wait, dlq, arn := q.wake, q.opts.WaitTime, q.dlq, q.arnLocked()
		var untilNext time.Duration
		if !next.IsZero() {
			untilNext = next.Sub(q.opts.Now())
		}
		q.mu.Unlock()

		if len(moved) > 0 {
			dlq.arrive(arn, moved)
		}
		if len(msgs) > 0 {
			return msgs, nil
		}
		if wait == 0 {
			return nil, nil
		}
		if deadline == nil {
			deadline = time.NewTimer(wait)
		}
		var expiry <-chan time.Time
		var expiryTimer *time.Timer
		if !next.IsZero() {
			expiryTimer = time.NewTimer(untilNext)
			expiry = expiryTimer.C
		}
		var done bool
		select {
		case <-ctx.Done():
		case <-deadline.C:
			done = true
		case <-wake:
		case <-expiry:
		}
		if expiryTimer != nil {
			expiryTimer.Stop()
		}
		if done {
			return nil, nil
		}
	}
}

// take receives up to max messages, removes those due for redrive, and
// tells when the next hidden message becomes visible (zero if none).
// q.mu must be held.
func (q *Queue) take(max int) (out []*source.Message, moved []*entry, next time.Time) {
	now := q.opts.Now()
	var blocked map[string]bool // FIFO groups with a message in flight
	if q.opts.FIFO {
		for el := q.msgs.Front(); el != nil; el = el.Next() {
			if e := el.Value.(*entry); now.Before(e.visibleAt) {
				if blocked == nil {
					blocked = make(map[string]bool)
				}
				blocked[e.group] = true
			}
		}
	}
	for el := q.msgs.Front(); el != nil; {
		e := el.Value.(*entry)
		el = el.Next()
		if now.Before(e.visibleAt) {
			if next.IsZero() || e.visibleAt.Before(next) {
				next = e.visibleAt
			}
			continue
		}
		if len(out) == max {
			break
		}
		if blocked[e.group] {
			continue
		}
		if q.opts.MaxReceiveCount > 0 && e.receives >= q.opts.MaxReceiveCount && q.dlq != nil {
			q.remove(e)
			moved = append(moved, e)
			q.stats.DeadLettered++
			continue
		}
		if e.handle != "" {
			delete(q.byHandle, e.handle)
		}
		e.receives++
		if e.firstRecv == 0 {
			e.firstRecv = now.UnixMilli()
		}
		e.handle = newHandle()
		q.byHandle[e.handle] = e
		e.visibleAt = now.Add(q.opts.VisibilityTimeout)
		q.stats.Received++
		out = append(out, q.record(e, e.handle))
	}
	return out, moved, next
}

func (q *Queue) remove(e *entry) {
	q.msgs.Remove(e.elem)
	if e.handle != "" {
		delete(q.byHandle, e.handle)
	}
}

// record makes the pipe record of a stored message. q.mu must be held.
func (q *Queue) record(e *entry, handle string) *source.Message {
	attrs := make(map[string]string, len(e.attrs)+2)
	for k, v := range e.attrs {
		attrs[k] = v
	}
	attrs[source.AttrReceiveCount] = strconv.Itoa(e.receives)
	if e.firstRecv != 0 {
		attrs[AttrFirstReceiveTimestamp] = strconv.FormatInt(e.firstRecv, 10)
	}
	var mattrs map[string]source.MessageAttribute
	if len(e.mattrs) > 0 {
		mattrs = make(map[string]source.MessageAttribute, len(e.mattrs))
		for k, v := range e.mattrs {
			mattrs[k] = v
		}
	}
	return &source.Message{
		MessageID:              e.id,
		ReceiptHandle:          handle,
		Body:                   e.body,
		Attributes:             attrs,
		MessageAttributes:      mattrs,
		MD5OfBody:              e.md5Body,
		MD5OfMessageAttributes: e.md5Attrs,
		EventSource:            "aws:sqs",
		EventSourceARN:         q.arnLocked(),
		AWSRegion:              q.opts.Region,
	}
}

// Delete removes the messages for good, by receipt handle. Messages whose
// handle is stale (received again since, or already deleted) or unknown are
// reported by a *pipe.SettleError with SenderFault set, wrapping
// ErrStaleHandle; the others are deleted. It does not block.
func (q *Queue) Delete(ctx context.Context, msgs []*source.Message) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("deleting %d messages from %s: %w", len(msgs), q.name, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var failed map[string]error
	removed := false
	for _, m := range msgs {
		e, ok := q.byHandle[m.ReceiptHandle]
		if !ok {
			failed = addFailure(failed, m)
			continue
		}
		q.remove(e)
		q.stats.Deleted++
		removed = true
	}
	if removed && q.opts.FIFO {
		q.signal() // a group may be free again
	}
	if failed != nil {
		return &core.SettleError{Op: "delete", Failed: failed, SenderFault: true}
	}
	return nil
}

func addFailure(failed map[string]error, m *source.Message) map[string]error {
	if failed == nil {
		failed = make(map[string]error)
	}
	failed[m.ReceiptHandle] = fmt.Errorf("message %s: %w", m.MessageID, ErrStaleHandle)
	return failed
}

// Ack is the settling verb Ack: Delete.
func (q *Queue) Ack(ctx context.Context, msgs []*source.Message) error { return q.Delete(ctx, msgs) }

// Nak is the settling verb Nak (NakWithDelay when delay > 0):
// ChangeVisibility(delay).
func (q *Queue) Nak(ctx context.Context, msgs []*source.Message, delay time.Duration) error {
	return q.ChangeVisibility(ctx, msgs, delay)
}

// Extend is the settling verb InProgress: ChangeVisibility(d), d from now.
func (q *Queue) Extend(ctx context.Context, msgs []*source.Message, d time.Duration) error {
	return q.ChangeVisibility(ctx, msgs, d)
}

// ChangeVisibility hides the messages for d (0..12h) from now: 0 makes them
// receivable at once. A message whose visibility has expired but that was
// not received again may still be changed. Stale handles are reported like
// Delete's. It does not block.
func (q *Queue) ChangeVisibility(ctx context.Context, msgs []*source.Message, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("changing visibility of %d messages in %s: %w", len(msgs), q.name, err)
	}
	if d < 0 || d > MaxVisibilityTimeout {
		return fmt.Errorf("changing visibility of %d messages in %s: %s is not within 0..12h", len(msgs), q.name, d)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.opts.Now()
	var failed map[string]error
	for _, m := range msgs {
		e, ok := q.byHandle[m.ReceiptHandle]
		if !ok {
			failed = addFailure(failed, m)
			continue
		}
		e.visibleAt = now.Add(d)
	}
	q.signal() // a message may be visible sooner than a waiting receiver thought
	if failed != nil {
		return &core.SettleError{Op: "change visibility", Failed: failed, SenderFault: true}
	}
	return nil
}

// Stats counts the queue's messages now.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.stats
	now := q.opts.Now()
	for el := q.msgs.Front(); el != nil; el = el.Next() {
		e := el.Value.(*entry)
		switch {
		case !now.Before(e.visibleAt):
			s.Visible++
		case e.receives > 0:
			s.InFlight++
		default:
			s.Delayed++
		}
	}
	return s
}

// Snapshot returns copies of the stored messages, visible or not, in send
// order, with their current receipt handle ("" if never received).
func (q *Queue) Snapshot() []*source.Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]*source.Message, 0, q.msgs.Len())
	for el := q.msgs.Front(); el != nil; el = el.Next() {
		e := el.Value.(*entry)
		out = append(out, q.record(e, e.handle))
	}
	return out
}

// newID returns a random version 4 UUID.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}

// newHandle returns a random receipt handle.
func newHandle() string { return "mem-" + rand.Text() }

// md5OfAttributes is SQS's MD5OfMessageAttributes: over the attributes
// sorted by name, each encoded as length-prefixed name, length-prefixed data
// type, a transport byte (1 string, 2 binary) and the length-prefixed value.
func md5OfAttributes(attrs map[string]source.MessageAttribute) string {
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	h := md5.New()
	var n [4]byte
	put := func(b []byte) {
		binary.BigEndian.PutUint32(n[:], uint32(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	for _, name := range names {
		a := attrs[name]
		put([]byte(name))
		put([]byte(a.DataType))
		if a.StringValue != nil {
			h.Write([]byte{1})
			put([]byte(*a.StringValue))
		} else {
			h.Write([]byte{2})
			put(a.BinaryValue)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ReceiveIsCancelSafe marks the queue pipe.CancelSafe: a cancelled Receive
// takes nothing, so a stopping pipe need not wait out its long polls.
func (q *Queue) ReceiveIsCancelSafe() {}
