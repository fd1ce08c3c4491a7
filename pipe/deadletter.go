package pipe

import (
	"context"
	"errors"
	"strconv"
	"time"
	"unicode/utf8"
)

// Message attributes the dead-letter stage puts on each item it sends,
// named after Lambda's asynchronous DLQ and RabbitMQ's x-death (SPEC.md
// Part A item 8).
const (
	DLQErrorCode         = "ErrorCode"
	DLQErrorMessage      = "ErrorMessage"
	DLQStage             = "pipes-stage"
	DLQPipe              = "pipes-pipe"
	DLQAttempts          = "pipes-attempts"
	DLQFirstFailure      = "pipes-first-failure"
	DLQLastFailure       = "pipes-last-failure"
	DLQSourceARN         = "pipes-source-arn"
	DLQOriginalMessageID = "pipes-original-message-id"
)

// maxErrorMessage is the longest ErrorMessage kept (Lambda keeps 1 KB).
const maxErrorMessage = 1024

// coder is an error that carries a machine-readable code (an HTTP status, an
// AWS error code).
type coder interface{ ErrorCode() string }

// deadLetterable reports whether a failed item goes to the dead-letter
// target rather than back to the queue: a client error that retrying will
// not fix, or, with on_exhausted: dead_letter, an item whose in-runner
// retries ran out.
func (p *Pipe) deadLetterable(err error) bool {
	if p.opt.DeadLetter == nil || err == nil {
		return false
	}
	if IsPermanent(err) {
		return true
	}
	exhausted, _ := IsExhausted(err)
	return exhausted && p.opt.DeadLetterOnExhausted
}

// errorCode is the ErrorCode attribute of a failure.
func errorCode(err error) string {
	var c coder
	if errors.As(err, &c) {
		return c.ErrorCode()
	}
	switch {
	case IsPermanent(err):
		return "ClientError"
	case IsThrottled(err):
		return "Throttled"
	}
	if ok, _ := IsExhausted(err); ok {
		return "RetriesExhausted"
	}
	return "Error"
}

func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

func stringAttr(v string) MessageAttribute {
	return MessageAttribute{DataType: "String", StringValue: &v}
}

// deadLetter sends items to the dead-letter target with their failure
// context; each is deleted from the source once the send succeeded and
// released (visibility 0) when it did not: never dropped.
func (p *Pipe) deadLetter(ctx context.Context, items []*item, v []verdict, del *deleter) {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	events := make([]*Event, len(items))
	for i, it := range items {
		m := it.msg
		attempts := 1
		if ok, n := IsExhausted(v[i].err); ok {
			attempts = n
		}
		first := now
		if ms, err := strconv.ParseInt(m.Attributes["ApproximateFirstReceiveTimestamp"], 10, 64); err == nil {
			first = time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
		}
		stage := v[i].stage
		if stage == "" {
			stage = "target"
		}
		attrs := map[string]MessageAttribute{
			DLQErrorCode:         stringAttr(errorCode(v[i].err)),
			DLQErrorMessage:      stringAttr(truncateUTF8(v[i].err.Error(), maxErrorMessage)),
			DLQStage:             stringAttr(stage),
			DLQPipe:              stringAttr(p.opt.Name),
			DLQAttempts:          {DataType: "Number", StringValue: ptr(strconv.Itoa(attempts * max(1, m.ReceiveCount())))},
			DLQFirstFailure:      stringAttr(first),
			DLQLastFailure:       stringAttr(now),
			DLQSourceARN:         stringAttr(p.info.ARN),
			DLQOriginalMessageID: stringAttr(m.MessageID),
		}
		// The original attributes go along while SQS's limit of 10 allows.
		if len(attrs)+len(m.MessageAttributes) <= 10 {
			for k, a := range m.MessageAttributes {
				if _, taken := attrs[k]; !taken {
					attrs[k] = a
				}
			}
		}
		events[i] = &Event{Message: m, Payload: []byte(m.Body), Attributes: attrs}
	}
	res, err := p.opt.DeadLetter.Deliver(ctx, events)
	failed := map[string]error{}
	if err != nil {
		for _, ev := range events {
			failed[ev.ID()] = err
		}
	}
	for _, f := range res.Failures {
		failed[f.ID] = f.Err
	}
	var sent, back []*item
	for _, it := range items {
		if _, bad := failed[it.msg.MessageID]; bad {
			back = append(back, it)
		} else {
			sent = append(sent, it)
		}
	}
	p.met.deadLettered.Add(float64(len(sent)))
	del.add(sent)
	if len(back) > 0 {
		p.log.Error("sending to the dead-letter target failed; the messages are released to the queue instead",
			"messages", len(back), "error", firstErr(failed))
		p.changeVisibility(ctx, back, 0)
		p.met.released.Add(float64(len(back)))
		p.untrack(back)
	}
}

func ptr[T any](v T) *T { return &v }

func firstErr(m map[string]error) error {
	for _, err := range m {
		return err
	}
	return nil
}
