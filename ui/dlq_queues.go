package ui

import (
	"context"
	"errors"
	"fmt"

	"github.com/pipesproject/pipes/redrive"
	"github.com/pipesproject/pipes/redrive/rabbit"
)

// Browse implements DLQBrowser with redrive.Inspect, as `pipes dlq
// inspect` reads an SQS dead-letter queue.
func (q *sqsQueues) Browse(ctx context.Context, maxMsgs int) ([]redrive.View, error) {
	api, _, dlq, note, err := q.open(ctx)
	if err != nil {
		return nil, err
	}
	if dlq == "" {
		return nil, fmt.Errorf("no dead-letter queue to list: %s", note)
	}
	msgs, err := redrive.Inspect(ctx, api, dlq, redrive.InspectOptions{Max: maxMsgs})
	views := make([]redrive.View, len(msgs))
	for i, m := range msgs {
		views[i] = redrive.ViewOfSQS(m)
	}
	return views, err
}

// RedriveIDs implements DLQBrowser with redrive.Run and its IDs.
func (q *sqsQueues) RedriveIDs(ctx context.Context, ids []string, rate float64, report func(redrive.Entry)) (redrive.Summary, error) {
	api, source, dlq, note, err := q.open(ctx)
	if err != nil {
		return redrive.Summary{}, err
	}
	if dlq == "" {
		return redrive.Summary{}, fmt.Errorf("no dead-letter queue to redrive: %s", note)
	}
	return redrive.Run(ctx, api, redrive.Options{From: dlq, To: source, Rate: rate, IDs: ids, Report: report, Logger: q.log})
}

// Browse implements DLQBrowser with the rabbit Peek, as `pipes dlq
// inspect` reads a RabbitMQ dead-letter queue.
func (q *rabbitQueues) Browse(ctx context.Context, maxMsgs int) ([]redrive.View, error) {
	b, dlq, note, err := q.dial(ctx)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	if dlq == "" {
		return nil, errors.New(note)
	}
	peeked, err := b.Peek(ctx, dlq, maxMsgs)
	views := make([]redrive.View, len(peeked))
	for i, m := range peeked {
		views[i] = m.View
	}
	return views, err
}

// RedriveIDs implements DLQBrowser with the rabbit redrive and its IDs.
func (q *rabbitQueues) RedriveIDs(ctx context.Context, ids []string, rate float64, report func(redrive.Entry)) (redrive.Summary, error) {
	b, dlq, note, err := q.dial(ctx)
	if err != nil {
		return redrive.Summary{}, err
	}
	defer b.Close()
	if dlq == "" {
		return redrive.Summary{}, errors.New(note)
	}
	return b.Redrive(ctx, rabbit.Options{From: dlq, To: q.spec.Source.Queue, Rate: rate, IDs: ids, Report: report, Logger: q.log})
}
