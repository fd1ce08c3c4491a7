package sqs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"golang.org/x/sync/errgroup"

	expbackoff "github.com/pipesproject/pipes/internal/backoff"
	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/source"
)

// Settle tuning: attempts per entry, backoff, concurrent calls per settle.
const (
	settleAttempts    = 5
	settleBackoffBase = 50 * time.Millisecond
	settleBackoffMax  = 2 * time.Second
	settleParallel    = 8
)

// Operation names of SettleError.Op.
const (
	opDelete     = "delete"
	opVisibility = "change visibility"
)

// EntryError is why SQS refused one entry of a batch call.
type EntryError struct {
	// Code is SQS's error code, e.g. "ReceiptHandleIsInvalid".
	Code string
	// Message is SQS's explanation.
	Message string
	// SenderFault is true when the entry itself was wrong (retrying will
	// not help).
	SenderFault bool
}

// Error says the code, the message and whether it was the sender's fault.
func (e *EntryError) Error() string {
	if e.SenderFault {
		return e.Code + " (sender fault): " + e.Message
	}
	return e.Code + ": " + e.Message
}

// Delete deletes the messages with DeleteMessageBatch, ten per call, up to
// eight calls at once. Entries that fail without being the sender's fault,
// and whole calls that fail, are retried with exponential backoff and
// jitter (five attempts in all); the messages still not deleted are
// reported by a *pipe.SettleError keyed by receipt handle, and all others were
// deleted. It blocks until done or ctx is done and is safe for concurrent
// use.
func (s *Source) Delete(ctx context.Context, msgs []*source.Message) error {
	q, err := s.opened()
	if err != nil {
		return err
	}
	return s.settle(ctx, opDelete, msgs, func(ctx context.Context, chunk []*source.Message, ids []string) ([]types.BatchResultErrorEntry, []string, error) {
		entries := make([]types.DeleteMessageBatchRequestEntry, len(chunk))
		for i, m := range chunk {
			entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(ids[i]), ReceiptHandle: aws.String(m.ReceiptHandle)}
		}
		out, err := s.api.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(q.url), Entries: entries})
		if err != nil {
			return nil, nil, err
		}
		ok := make([]string, len(out.Successful))
		for i, e := range out.Successful {
			ok[i] = aws.ToString(e.Id)
		}
		return out.Failed, ok, nil
	})
}

// Ack is the settling verb Ack: Delete.
func (s *Source) Ack(ctx context.Context, msgs []*source.Message) error { return s.Delete(ctx, msgs) }

// Nak is the settling verb Nak (NakWithDelay when delay > 0):
// ChangeVisibility(delay).
func (s *Source) Nak(ctx context.Context, msgs []*source.Message, delay time.Duration) error {
	return s.ChangeVisibility(ctx, msgs, delay)
}

// Extend is the settling verb InProgress: ChangeVisibility(d), d from now.
func (s *Source) Extend(ctx context.Context, msgs []*source.Message, d time.Duration) error {
	return s.ChangeVisibility(ctx, msgs, d)
}

// ChangeVisibility makes the messages invisible for d from now (clamped
// to 0..12h, rounded up to whole seconds; 0 releases them at once) with
// ChangeMessageVisibilityBatch. Calls, retries and failures work as in
// Delete. It blocks until done or ctx is done and is safe for concurrent
// use.
func (s *Source) ChangeVisibility(ctx context.Context, msgs []*source.Message, d time.Duration) error {
	q, err := s.opened()
	if err != nil {
		return err
	}
	secs := int32(ceilSeconds(min(max(d, 0), MaxVisibilityTimeout)))
	return s.settle(ctx, opVisibility, msgs, func(ctx context.Context, chunk []*source.Message, ids []string) ([]types.BatchResultErrorEntry, []string, error) {
		entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(chunk))
		for i, m := range chunk {
			entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(ids[i]), ReceiptHandle: aws.String(m.ReceiptHandle), VisibilityTimeout: secs}
		}
		out, err := s.api.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(q.url), Entries: entries})
		if err != nil {
			return nil, nil, err
		}
		ok := make([]string, len(out.Successful))
		for i, e := range out.Successful {
			ok[i] = aws.ToString(e.Id)
		}
		return out.Failed, ok, nil
	})
}

// batchCall sends one batch call for chunk, whose entry ids are ids, and
// returns the failed entries, the ids that succeeded, or the call's error.
type batchCall func(ctx context.Context, chunk []*source.Message, ids []string) (failed []types.BatchResultErrorEntry, succeeded []string, err error)

// failure is one message that could not be settled.
type failure struct {
	m           *source.Message
	err         error
	senderFault bool
}

// settle splits msgs into chunks of ten, runs them (a single chunk inline,
// more with bounded concurrency) and gathers what failed.
func (s *Source) settle(ctx context.Context, op string, msgs []*source.Message, call batchCall) error {
	if len(msgs) == 0 {
		return nil
	}
	n := (len(msgs) + MaxBatch - 1) / MaxBatch
	results := make([][]failure, n)
	if n == 1 {
		results[0] = s.settleChunk(ctx, op, msgs, call)
	} else {
		var g errgroup.Group
		g.SetLimit(settleParallel)
		for i := range n {
			chunk := msgs[i*MaxBatch : min((i+1)*MaxBatch, len(msgs))]
			g.Go(func() error {
				results[i] = s.settleChunk(ctx, op, chunk, call)
				return nil
			})
		}
		_ = g.Wait() // the goroutines report through results
	}
	var serr *core.SettleError
	for _, fs := range results {
		for _, f := range fs {
			if serr == nil {
				serr = &core.SettleError{Op: op, Failed: make(map[string]error)}
			}
			serr.Failed[f.m.ReceiptHandle] = fmt.Errorf("%s of message %s on SQS queue %s: %w", op, f.m.MessageID, s.name, f.err)
			serr.SenderFault = serr.SenderFault || f.senderFault
		}
	}
	if serr == nil {
		return nil
	}
	return serr
}

// chunkIDs are the entry ids of a batch call: the index in the chunk.
var chunkIDs = [MaxBatch]string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}

// settleChunk settles up to ten messages, retrying the entries that fail
// without the sender's fault, and returns the ones that still failed.
// Entry ids are the messages' indexes in chunk.
func (s *Source) settleChunk(ctx context.Context, op string, chunk []*source.Message, call batchCall) []failure {
	var (
		lastErr  [MaxBatch]error // why each pending entry failed last
		pending  = chunk
		ids      = chunkIDs[:len(chunk)]
		failures []failure
	)
	for attempt := range settleAttempts {
		if attempt > 0 {
			s.log.DebugContext(ctx, "retrying SQS batch entries", "op", op, "queue", s.name, "entries", len(ids), "attempt", attempt+1, "err", lastErr[index(ids[0])])
			if sleep(ctx, backoff(s.backoffBase, attempt)) != nil {
				break
			}
		}
		failed, succeeded, err := call(ctx, pending, ids)
		if err != nil {
			err = classify(err)
			for _, id := range ids {
				lastErr[index(id)] = err
			}
			if ctx.Err() != nil || core.IsPermanent(err) {
				break
			}
			continue
		}
		// state of each entry of this call: 1 sent, 2 settled or given up.
		var state [MaxBatch]int8
		for _, id := range ids {
			state[index(id)] = 1
		}
		for _, id := range succeeded {
			if i := index(id); i >= 0 && state[i] == 1 {
				state[i] = 2
			}
		}
		for _, f := range failed {
			i := index(aws.ToString(f.Id))
			if i < 0 || state[i] != 1 {
				continue // not a pending entry of this call
			}
			ee := &EntryError{Code: aws.ToString(f.Code), Message: aws.ToString(f.Message), SenderFault: f.SenderFault}
			if f.SenderFault {
				failures = append(failures, failure{m: chunk[i], err: ee, senderFault: true})
				state[i] = 2
				continue
			}
			lastErr[i] = ee
		}
		var nextMsgs []*source.Message
		var nextIDs []string
		for _, id := range ids {
			i := index(id)
			if state[i] == 2 {
				continue
			}
			if lastErr[i] == nil {
				lastErr[i] = errors.New("SQS answered neither success nor failure for the entry")
			}
			nextMsgs = append(nextMsgs, chunk[i])
			nextIDs = append(nextIDs, id)
		}
		pending, ids = nextMsgs, nextIDs
		if len(pending) == 0 {
			return failures
		}
	}
	for _, id := range ids {
		i := index(id)
		f := failure{m: chunk[i], err: lastErr[i]}
		if f.err == nil {
			f.err = ctx.Err()
		}
		if ctx.Err() != nil && !errors.Is(f.err, ctx.Err()) {
			f.err = fmt.Errorf("%w (gave up: %w)", f.err, ctx.Err())
		}
		f.senderFault = core.IsPermanent(f.err)
		failures = append(failures, f)
	}
	return failures
}

// index is the chunk index an entry id stands for, -1 when it is none.
func index(id string) int {
	if len(id) != 1 || id[0] < '0' || id[0] > '9' {
		return -1
	}
	return int(id[0] - '0')
}

// backoff is the wait before retry attempt n (n >= 1): exponential from
// base, capped at settleBackoffMax, the upper half jittered.
func backoff(base time.Duration, n int) time.Duration {
	return expbackoff.Exponential{Base: base, Max: settleBackoffMax, Jitter: expbackoff.Equal}.Delay(n)
}

// sleep waits d or until ctx is done, then returns ctx's error.
func sleep(ctx context.Context, d time.Duration) error { return expbackoff.Sleep(ctx, d) }

// ceilSeconds rounds d up to whole seconds.
func ceilSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}
