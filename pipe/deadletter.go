package pipe

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/source"
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
	if err == nil {
		return false
	}
	if _, native := p.opt.Source.(source.Terminator); p.opt.DeadLetter == nil && !native {
		return false
	}
	if core.IsPermanent(err) {
		return true
	}
	exhausted, _ := core.IsExhausted(err)
	return exhausted && p.opt.DeadLetterOnExhausted
}

// errorCode is the ErrorCode attribute of a failure.
func errorCode(err error) string {
	var c coder
	if errors.As(err, &c) {
		return c.ErrorCode()
	}
	switch {
	case core.IsPermanent(err):
		return "ClientError"
	case core.IsThrottled(err):
		return "Throttled"
	}
	if ok, _ := core.IsExhausted(err); ok {
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

func stringAttr(v string) source.MessageAttribute {
	return source.MessageAttribute{DataType: "String", StringValue: &v}
}

// maxMessageAttributes is SQS's limit of message attributes per message.
const maxMessageAttributes = 10

// deadLetterEvent is what the dead-letter target gets for d: the original
// body (the envelope when the pipe unwrapped one) and the original message
// attributes, with the failure context beside them: as separate attributes
// when they fit under SQS's ten, else folded into DLQContext. Nothing of
// the original is dropped.
func deadLetterEvent(d *delivery, pipeName, sourceARN string, at time.Time) *Event {
	m := d.Message
	now := at.UTC().Format(time.RFC3339Nano)
	attempts := 1
	if ok, n := core.IsExhausted(d.reason); ok {
		attempts = n
	}
	first := now
	if ms, err := strconv.ParseInt(m.Attributes["ApproximateFirstReceiveTimestamp"], 10, 64); err == nil {
		first = time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
	}
	stage := stageOf(d.reason)
	reason := d.reason
	if reason == nil {
		reason = errors.New("given up")
	}
	ctx := [][2]string{
		{DLQErrorCode, errorCode(reason)},
		{DLQErrorMessage, truncateUTF8(reason.Error(), maxErrorMessage)},
		{DLQStage, stage},
		{DLQPipe, pipeName},
		{DLQAttempts, strconv.Itoa(attempts * d.NumDelivered())},
		{DLQFirstFailure, first},
		{DLQLastFailure, now},
		{DLQSourceARN, sourceARN},
		{DLQOriginalMessageID, m.MessageID},
	}
	attrs := make(map[string]source.MessageAttribute, maxMessageAttributes)
	for k, a := range m.MessageAttributes {
		if !m.Lifted(k) {
			attrs[k] = a
		}
	}
	if len(attrs)+len(ctx) <= maxMessageAttributes {
		for _, kv := range ctx {
			if _, taken := attrs[kv[0]]; taken {
				continue // the original keeps its name
			}
			if kv[0] == DLQAttempts {
				attrs[kv[0]] = source.MessageAttribute{DataType: "Number", StringValue: ptr(kv[1])}
				continue
			}
			attrs[kv[0]] = stringAttr(kv[1])
		}
	} else {
		folded := make(map[string]string, len(ctx))
		for _, kv := range ctx {
			folded[kv[0]] = kv[1]
		}
		b, _ := json.Marshal(folded) // a map of strings always encodes
		attrs[core.DLQContext] = stringAttr(string(b))
	}
	body := m.Body
	if len(m.Envelope) > 0 {
		body = string(m.Envelope)
	}
	return &Event{Message: m, RecordJSON: []byte(body), Attributes: attrs}
}

// stageError records the stage a failure came from, for the dead-letter
// context.
type stageError struct {
	stage string
	err   error
}

func (e *stageError) Error() string { return e.err.Error() }
func (e *stageError) Unwrap() error { return e.err }

// atStage marks err as a failure of stage ("" is the target).
func atStage(stage string, err error) error {
	if err == nil {
		return nil
	}
	if stage == "" {
		stage = "target"
	}
	return &stageError{stage: stage, err: err}
}

func stageOf(err error) string {
	var se *stageError
	if errors.As(err, &se) {
		return se.stage
	}
	return "target"
}

func ptr[T any](v T) *T { return &v }
