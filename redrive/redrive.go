package redrive

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/pipesproject/pipes/filter"
	"github.com/pipesproject/pipes/internal/backoff"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

// AttrRedrivenAt is the message attribute Run puts on every message it
// moves: the time of the move, RFC 3339 in UTC.
const AttrRedrivenAt = "pipes-redriven-at"

// maxMessageAttributes is SQS's limit of message attributes per message.
const maxMessageAttributes = 10

// Outcome is what Run did with one message.
type Outcome string

// Outcomes of Run.
const (
	// Moved: sent to the destination, then deleted from the dead-letter
	// queue.
	Moved Outcome = "moved"
	// Skipped: the filter did not match; left in the dead-letter queue.
	Skipped Outcome = "skipped"
	// Failed: the send or the delete failed; left in the dead-letter queue
	// (when the delete failed, the message is in both queues).
	Failed Outcome = "failed"
	// WouldMove: a dry run would have moved it; left in the dead-letter
	// queue.
	WouldMove Outcome = "would_move"
)

// Entry reports what Run did with one message.
type Entry struct {
	// MessageID is the message's id in the dead-letter queue.
	MessageID string `json:"messageId"`
	// Outcome is what happened to it.
	Outcome Outcome `json:"outcome"`
	// NewMessageID is its id in the destination queue, once sent.
	NewMessageID string `json:"newMessageId,omitempty"`
	// MessageGroupID is its FIFO message group, if any.
	MessageGroupID string `json:"messageGroupId,omitempty"`
	// Body and MessageAttributes are, in a dry run, what would be sent.
	// From a RabbitMQ queue Body is set only when the body is UTF-8 text
	// (JSON cannot hold other bytes), and Data always holds it, base64 in
	// JSON, as the Pipes RabbitMQ records of `pipes dlq inspect` do.
	Body              string                             `json:"body,omitempty"`
	Data              []byte                             `json:"data,omitempty"`
	MessageAttributes map[string]source.MessageAttribute `json:"messageAttributes,omitempty"`
	// Headers are, in a dry run from a RabbitMQ queue, the AMQP headers
	// that would be sent, as Pipes RabbitMQ records show them (SQS runs
	// leave it empty).
	Headers map[string]any `json:"headers,omitempty"`
	// Error says why it failed.
	Error string `json:"error,omitempty"`
}

// Summary counts the outcomes of a run.
type Summary struct {
	Moved, Skipped, Failed, WouldMove int
}

// Options says what Run moves and how.
type Options struct {
	// From is the URL of the dead-letter queue to move messages from.
	From string
	// To is the URL of the queue to move them to. A FIFO destination (name
	// ending in ".fifo") gets each message's MessageGroupId, and its
	// message id as MessageDeduplicationId.
	To string
	// Rate caps the messages sent per second (token bucket, bursts of at
	// most 10); 0 means no cap.
	Rate float64
	// Max, when above 0, stops the run once this many messages were moved
	// or failed (would have been moved, in a dry run).
	Max int
	// Filter, when set, moves only the messages whose Pipes SQS record
	// matches it; the others are left in the dead-letter queue.
	Filter *filter.Pattern
	// DryRun moves nothing: Run reports what it would move and leaves
	// every message in the dead-letter queue.
	DryRun bool
	// IDs, when set, moves only the messages with these ids (a selection
	// made from a listing, the status page's DLQ browser): the others are
	// held and reported Skipped, and the run stops once every id was
	// moved or failed (or a receive comes back empty: the rest were gone).
	IDs []string
	// Report, when set, is called with each message's entry, in order,
	// from Run's goroutine.
	Report func(Entry)
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
}

// redriveVisibility hides a received message while Run works on it, and
// the messages it leaves behind until the run ends.
const redriveVisibility = 60 * time.Second

// Run moves messages from opt.From to opt.To: it receives ten at a time,
// sends them with SendMessageBatch keeping their body and message
// attributes (less the failure context the dead-letter stage adds:
// ErrorCode, ErrorMessage and every pipes-* attribute; plus
// pipes-redriven-at), and deletes from opt.From only the messages whose
// send succeeded. It stops when a receive comes back empty after a 1 s
// wait, or after opt.Max messages.
//
// What Run leaves in the dead-letter queue (skipped, failed, dry run) is
// kept hidden while it runs, so each message is handled once, and made
// visible again (visibility 0) before it returns, on every path; if the
// process dies, those messages reappear after about a minute. On a FIFO
// queue, a message left behind holds back the rest of its group.
//
// Failed sends and deletes are counted in the Summary, not returned as an
// error; the error is for a call that failed as a whole (Run stops there),
// a cancelled ctx or a bad option. Run blocks; one goroutine.
func Run(ctx context.Context, api API, opt Options) (sum Summary, err error) {
	if opt.From == "" || opt.To == "" {
		return sum, errors.New("redriving: both the dead-letter queue and the destination queue are needed")
	}
	if opt.From == opt.To {
		return sum, fmt.Errorf("redriving: the destination is the dead-letter queue itself (%s)", opt.From)
	}
	if opt.Rate < 0 || opt.Max < 0 {
		return sum, fmt.Errorf("redriving: rate (%v) and max (%d) must not be negative", opt.Rate, opt.Max)
	}
	r := &run{
		api: api, opt: opt, log: opt.Logger,
		fifo:   isFIFO(opt.To),
		bucket: newBucket(opt.Rate, time.Now, backoff.Sleep),
		seen:   map[string]bool{},
		left:   wanted(opt.IDs),
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	// The longest a batch may wait for tokens, on top of the visibility.
	vis := redriveVisibility
	if opt.Rate > 0 {
		vis += time.Duration(float64(r.bucket.size()) / opt.Rate * float64(time.Second))
	}
	r.held = newKeeper(api, opt.From, vis, r.log)
	defer func() {
		rctx, cancel := releaseCtx(ctx)
		defer cancel()
		if rerr := r.held.Close(rctx); rerr != nil {
			err = errors.Join(err, fmt.Errorf("making the messages left in %s visible again: %w", opt.From, rerr))
		}
	}()
	for {
		if r.left != nil && len(r.left) == 0 {
			return r.sum, nil
		}
		n := r.bucket.size()
		if opt.Max > 0 {
			left := opt.Max - r.sum.Moved - r.sum.Failed - r.sum.WouldMove
			if left <= 0 {
				return r.sum, nil
			}
			n = min(n, left)
		}
		msgs, err := receive(ctx, api, opt.From, n, vis)
		if err != nil {
			return r.sum, err
		}
		if len(msgs) == 0 {
			return r.sum, nil
		}
		if err := r.batch(ctx, msgs); err != nil {
			return r.sum, err
		}
	}
}

// run is the state of one Run.
type run struct {
	api    API
	opt    Options
	log    *slog.Logger
	fifo   bool
	bucket *bucket
	held   *pipe.Keeper
	seen   map[string]bool
	left   map[string]bool // Options.IDs not moved or failed yet; nil: every message
	sum    Summary
}

// wanted is the set of ids, nil for none (every message is wanted).
func wanted(ids []string) map[string]bool {
	if len(ids) == 0 {
		return nil
	}
	m := make(map[string]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// outgoing is one message to send.
type outgoing struct {
	msg   types.Message
	entry types.SendMessageBatchRequestEntry
	group string
}

// batch handles the messages of one receive.
func (r *run) batch(ctx context.Context, msgs []types.Message) error {
	now := time.Now()
	tag := now.UTC().Format(time.RFC3339Nano)
	var send []outgoing
	for _, m := range msgs {
		id, handle := aws.ToString(m.MessageId), aws.ToString(m.ReceiptHandle)
		if r.seen[id] {
			hold(r.held, id, handle, now) // back after a lapsed hold: already handled
			continue
		}
		r.seen[id] = true
		group := m.Attributes[source.AttrMessageGroupID]
		if r.left != nil && !r.left[id] {
			hold(r.held, id, handle, now)
			r.report(Entry{MessageID: id, Outcome: Skipped, MessageGroupID: group})
			continue
		}
		if r.opt.Filter != nil {
			ev, err := pipe.NewEvent(Record(m, "", ""))
			if err != nil || !r.opt.Filter.MatchEvent(ev) {
				hold(r.held, id, handle, now)
				r.report(Entry{MessageID: id, Outcome: Skipped, MessageGroupID: group})
				continue
			}
		}
		attrs := r.outgoingAttributes(id, m.MessageAttributes, tag)
		if r.opt.DryRun {
			hold(r.held, id, handle, now)
			r.report(Entry{MessageID: id, Outcome: WouldMove, MessageGroupID: group, Body: aws.ToString(m.Body), MessageAttributes: Record(types.Message{MessageAttributes: attrs}, "", "").MessageAttributes})
			continue
		}
		e := types.SendMessageBatchRequestEntry{
			Id:                aws.String(strconv.Itoa(len(send))),
			MessageBody:       m.Body,
			MessageAttributes: attrs,
		}
		if trace := m.Attributes[string(types.MessageSystemAttributeNameAWSTraceHeader)]; trace != "" {
			e.MessageSystemAttributes = map[string]types.MessageSystemAttributeValue{
				string(types.MessageSystemAttributeNameForSendsAWSTraceHeader): {DataType: aws.String("String"), StringValue: aws.String(trace)},
			}
		}
		if r.fifo {
			if group == "" {
				hold(r.held, id, handle, now)
				r.report(Entry{MessageID: id, Outcome: Failed, Error: "no MessageGroupId: it cannot be sent to the FIFO queue " + r.opt.To})
				continue
			}
			e.MessageGroupId, e.MessageDeduplicationId = aws.String(group), aws.String(id)
		}
		send = append(send, outgoing{msg: m, entry: e, group: group})
	}
	if len(send) == 0 {
		return nil
	}
	if err := r.bucket.wait(ctx, len(send)); err != nil {
		r.failAll(send, now, err)
		return err
	}
	return r.send(ctx, send, now)
}

// send sends one batch and deletes from the dead-letter queue what was sent.
func (r *run) send(ctx context.Context, send []outgoing, receivedAt time.Time) error {
	entries := make([]types.SendMessageBatchRequestEntry, len(send))
	for i, o := range send {
		entries[i] = o.entry
	}
	out, err := r.api.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(r.opt.To), Entries: entries})
	if err != nil {
		err = fmt.Errorf("sending %d messages to %s: %w", len(send), r.opt.To, err)
		r.failAll(send, receivedAt, err)
		return err
	}
	newID := make(map[int]string, len(out.Successful))
	for _, s := range out.Successful {
		if i, ok := entryIndex(s.Id, len(send)); ok {
			newID[i] = aws.ToString(s.MessageId)
		}
	}
	sendErr := map[int]string{}
	for _, f := range out.Failed {
		if i, ok := entryIndex(f.Id, len(send)); ok {
			sendErr[i] = fmt.Sprintf("sending to %s: %s: %s", r.opt.To, aws.ToString(f.Code), aws.ToString(f.Message))
		}
	}
	var del []types.DeleteMessageBatchRequestEntry
	for i, o := range send {
		if _, ok := newID[i]; ok {
			del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: o.msg.ReceiptHandle})
			continue
		}
		msg, ok := sendErr[i]
		if !ok {
			msg = "sending to " + r.opt.To + ": the answer named neither success nor failure"
		}
		r.fail(o, receivedAt, "", msg)
	}
	if len(del) == 0 {
		return nil
	}
	dout, err := r.api.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(r.opt.From), Entries: del})
	if err != nil {
		err = fmt.Errorf("deleting %d redriven messages from %s: %w", len(del), r.opt.From, err)
		for _, d := range del {
			i, _ := entryIndex(d.Id, len(send))
			r.fail(send[i], receivedAt, newID[i], fmt.Sprintf("sent as %s but %v", newID[i], err))
		}
		return err
	}
	delErr := map[int]string{}
	for _, f := range dout.Failed {
		if i, ok := entryIndex(f.Id, len(send)); ok {
			delErr[i] = fmt.Sprintf("%s: %s", aws.ToString(f.Code), aws.ToString(f.Message))
		}
	}
	for _, d := range del {
		i, _ := entryIndex(d.Id, len(send))
		if msg, bad := delErr[i]; bad {
			r.fail(send[i], receivedAt, newID[i], fmt.Sprintf("sent as %s but not deleted from %s (it is in both queues): %s", newID[i], r.opt.From, msg))
			continue
		}
		r.report(Entry{MessageID: aws.ToString(send[i].msg.MessageId), Outcome: Moved, NewMessageID: newID[i], MessageGroupID: send[i].group})
	}
	return nil
}

// fail records a failed message and keeps it hidden until the run ends.
func (r *run) fail(o outgoing, receivedAt time.Time, newID, msg string) {
	id := aws.ToString(o.msg.MessageId)
	hold(r.held, id, aws.ToString(o.msg.ReceiptHandle), receivedAt)
	r.report(Entry{MessageID: id, Outcome: Failed, NewMessageID: newID, MessageGroupID: o.group, Error: msg})
}

func (r *run) failAll(send []outgoing, receivedAt time.Time, err error) {
	for _, o := range send {
		r.fail(o, receivedAt, "", err.Error())
	}
}

// report counts an entry and hands it to opt.Report.
func (r *run) report(e Entry) {
	if e.Outcome != Skipped {
		delete(r.left, e.MessageID)
	}
	r.sum.Count(e.Outcome)
	if r.opt.Report != nil {
		r.opt.Report(e)
	}
}

// Count adds one message with outcome o to the summary.
func (s *Summary) Count(o Outcome) {
	switch o {
	case Moved:
		s.Moved++
	case Skipped:
		s.Skipped++
	case Failed:
		s.Failed++
	case WouldMove:
		s.WouldMove++
	}
}

// Handled is the number of messages counted, whatever their outcome.
func (s Summary) Handled() int { return s.Moved + s.Skipped + s.Failed + s.WouldMove }

// IsContextAttribute tells whether a message attribute is failure context
// added by pipes' dead-letter stage (ErrorCode, ErrorMessage, pipes-*),
// which a redrive removes.
func IsContextAttribute(name string) bool {
	return name == pipe.DLQErrorCode || name == pipe.DLQErrorMessage || strings.HasPrefix(name, "pipes-")
}

// outgoingAttributes are the message attributes a moved message is sent
// with: the original ones less the failure context, plus the redrive tag
// when SQS's limit of 10 leaves room for it.
func (r *run) outgoingAttributes(id string, in map[string]types.MessageAttributeValue, tag string) map[string]types.MessageAttributeValue {
	out := make(map[string]types.MessageAttributeValue, len(in)+1)
	for k, v := range in {
		if !IsContextAttribute(k) {
			out[k] = v
		}
	}
	if len(out) >= maxMessageAttributes {
		r.log.Warn("no room for the redrive tag: the message already has 10 message attributes", "message_id", id, "attribute", AttrRedrivenAt)
		return out
	}
	out[AttrRedrivenAt] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(tag)}
	return out
}

// entryIndex parses a batch entry id Run gave.
func entryIndex(id *string, n int) (int, bool) {
	i, err := strconv.Atoi(aws.ToString(id))
	return i, err == nil && i >= 0 && i < n
}
