package sqs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/pipesproject/pipes/internal/s3payload"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

// DefaultPayloadConcurrency is how many S3 objects a source fetches or
// deletes at once when Payloads.Concurrency is 0.
const DefaultPayloadConcurrency = 16

// Payloads says what the source does with payloads that live in S3:
// Extended Client pointers and S3 event notifications. Both are unwrapped
// in Receive, before the pipe filters.
type Payloads struct {
	// Pointers replaces the body of a message that is an SQS Extended
	// Client pointer (`["software.amazon.payloadoffloading.PayloadS3Pointer",
	// {"s3BucketName":…,"s3Key":…}]`) by the content of the object it
	// names; the pointer is kept as the record's envelope. An object that
	// cannot be fetched (missing, access denied, above the store's size
	// limit, a failed call) fails that message alone, at stage "unwrap".
	Pointers bool
	// Events splits an S3 event notification (`{"Records":[{"s3":…}]}`)
	// into one record per entry, whose body is the entry's JSON (the
	// objects are not fetched); the notification is kept as each record's
	// envelope. S3's test event is done without reaching the target.
	Events bool
	// Store reaches S3; required with Pointers.
	Store *s3payload.Store
	// MissingIsPermanent makes a missing object or bucket a client error
	// (pipe.Permanent): the message goes to the pipe's dead-letter target
	// at once instead of being retried until the redrive policy moves it.
	MissingIsPermanent bool
	// Delete deletes a pointer's object once its message was deleted
	// from the queue (pipe.AckObserver): never before, never for a
	// message that failed, was released or was dead-lettered.
	Delete bool
	// Concurrency bounds the objects fetched, and apart from those the
	// objects deleted, at once across the source (default
	// DefaultPayloadConcurrency).
	Concurrency int
	// OnDelete, when set, is told of every object delete and whether it
	// failed (for the metrics).
	OnDelete func(failed bool)
}

// payloads is a source's S3 side.
type payloads struct {
	cfg     Payloads
	fetches chan struct{} // semaphore of fetches
	deletes chan struct{} // semaphore of deletes
	log     *slog.Logger
}

// check reports settings that do not go together.
func (c *Payloads) check() error {
	switch {
	case c == nil:
		return nil
	case c.Pointers && c.Store == nil:
		return fmt.Errorf("unwrapping S3 pointers needs an S3 store")
	case c.Delete && !c.Pointers:
		return fmt.Errorf("deleting S3 payloads needs the unwrapping of S3 pointers")
	case c.Concurrency < 0:
		return fmt.Errorf("S3 payload concurrency %d is negative", c.Concurrency)
	}
	return nil
}

// newPayloads makes the S3 side of a source; nil when it has none.
func newPayloads(cfg *Payloads, log *slog.Logger) *payloads {
	if cfg == nil || !cfg.Pointers && !cfg.Events {
		return nil
	}
	n := cfg.Concurrency
	if n == 0 {
		n = DefaultPayloadConcurrency
	}
	return &payloads{cfg: *cfg, fetches: make(chan struct{}, n), deletes: make(chan struct{}, n), log: log}
}

// unwrap takes the S3 forms out of msgs: pointers are fetched, at most
// Concurrency at once across the source, all of one receive in parallel;
// notifications are split. It returns once every fetch has returned, at
// the latest after within (half the receive's visibility: the pipe's
// heartbeat keeps a message hidden only once Receive returned it); a
// fetch not done by then, or when ctx is done, fails its message (which
// is still returned, so that it is settled and nothing is lost).
func (p *payloads) unwrap(ctx context.Context, msgs []*source.Message, within time.Duration) {
	if within > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, within)
		defer cancel()
	}
	var wg sync.WaitGroup
	for _, m := range msgs {
		if p.cfg.Pointers {
			if ptr, ok := s3payload.ParsePointer(m.Body); ok {
				wg.Add(1)
				go func() {
					defer wg.Done()
					p.fetch(ctx, m, ptr)
				}()
				continue
			}
		}
		if p.cfg.Events {
			splitEvent(m)
		}
	}
	wg.Wait()
}

// fetch replaces m's pointer body by the object.
func (p *payloads) fetch(ctx context.Context, m *source.Message, ptr s3payload.Pointer) {
	select {
	case p.fetches <- struct{}{}:
	case <-ctx.Done():
		m.UnwrapErr = fmt.Errorf("getting the payload %s: %w", ptr, ctx.Err())
		return
	}
	defer func() { <-p.fetches }()
	body, err := p.cfg.Store.Get(ctx, ptr)
	if err != nil {
		if p.cfg.MissingIsPermanent && errors.Is(err, s3payload.ErrNotFound) {
			err = pipe.Permanent(err)
		}
		m.UnwrapErr = fmt.Errorf("unwrapping the S3 pointer of message %s: %w", m.MessageID, err)
		return
	}
	m.Envelope = json.RawMessage(m.Body)
	m.Body = body
}

// splitEvent makes m's records when its body is an S3 event notification.
func splitEvent(m *source.Message) {
	ev := s3payload.ParseEvent(m.Body)
	switch ev.Kind {
	case s3payload.TestEvent:
		m.Envelope = json.RawMessage(m.Body)
		m.Split = []*source.Message{}
	case s3payload.Records:
		env := json.RawMessage(m.Body)
		m.Split = make([]*source.Message, len(ev.Entries))
		for i, e := range ev.Entries {
			m.Split[i] = &source.Message{
				MessageID: m.MessageID, ReceiptHandle: m.ReceiptHandle, Body: string(e),
				Attributes: m.Attributes, MessageAttributes: m.MessageAttributes,
				MD5OfBody: m.MD5OfBody, MD5OfMessageAttributes: m.MD5OfMessageAttributes,
				EventSource: m.EventSource, EventSourceARN: m.EventSourceARN, AWSRegion: m.AWSRegion,
				Envelope: env,
			}
		}
	}
}

// Acked deletes the payload objects of deleted messages whose pointer the
// source unwrapped, when Payloads.Delete is set (pipe.AckObserver; the
// settler calls it after a successful DeleteMessageBatch entry of each
// message). It blocks until every delete returned, at most Concurrency at
// once, and is safe for concurrent use. A failed delete is logged and
// counted (OnDelete); it fails nothing: the message is gone already, the
// object is left behind.
func (s *Source) Acked(ctx context.Context, msgs []*source.Message) {
	p := s.payloads
	if p == nil || !p.cfg.Delete {
		return
	}
	var wg sync.WaitGroup
	for _, m := range msgs {
		if m.UnwrapErr != nil || len(m.Envelope) == 0 {
			continue
		}
		ptr, ok := s3payload.ParsePointer(string(m.Envelope))
		if !ok {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case p.deletes <- struct{}{}:
			case <-ctx.Done():
				p.deleted(m, ptr, ctx.Err())
				return
			}
			defer func() { <-p.deletes }()
			p.deleted(m, ptr, p.cfg.Store.Delete(ctx, ptr))
		}()
	}
	wg.Wait()
}

// deleted records the outcome of one object delete.
func (p *payloads) deleted(m *source.Message, ptr s3payload.Pointer, err error) {
	if p.cfg.OnDelete != nil {
		p.cfg.OnDelete(err != nil)
	}
	if err != nil {
		p.log.Error("deleting the S3 payload of a deleted message failed; the object is left behind",
			"message_id", m.MessageID, "object", ptr.String(), "error", err)
	}
}
