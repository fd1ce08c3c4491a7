package ui

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/redrive"
	"github.com/pipesproject/pipes/redrive/rabbit"
	"github.com/pipesproject/pipes/source/memory"
)

// Depth is a queue's message counts as the page shows them.
type Depth struct {
	// Name names the queue (a URL for SQS).
	Name string `json:"name"`
	// Visible are the messages waiting (SQS ApproximateNumberOfMessages,
	// RabbitMQ ready).
	Visible int `json:"visible"`
	// InFlight are those received and not yet settled (SQS
	// ApproximateNumberOfMessagesNotVisible, RabbitMQ unacked; -1 when
	// unknown).
	InFlight int `json:"inFlight"`
}

// Depths are the counts of a pipe's queue and of its dead-letter queue
// (DLQ nil when it has none or it cannot be found).
type Depths struct {
	Queue *Depth `json:"queue"`
	DLQ   *Depth `json:"dlq"`
	// DLQNote says why DLQ is nil, when it is.
	DLQNote string `json:"dlqNote,omitempty"`
}

// Depther reads the depths of a pipe's queues. It blocks for the calls;
// the server calls it at most every 30 s per pipe, and only while the page
// or the API is read.
type Depther interface {
	Depths(ctx context.Context) (Depths, error)
}

// Redriver moves the messages of a pipe's dead-letter queue back to its
// source queue, at most rate a second (0: no cap), calling report for each
// message handled. It blocks until the queue is empty or ctx is done; it
// is `pipes dlq redrive`'s code.
type Redriver interface {
	Redrive(ctx context.Context, rate float64, report func(redrive.Entry)) (redrive.Summary, error)
}

// Queues gives the Depther and, when it has a dead-letter queue that
// `pipes dlq redrive` can move from, the Redriver of a pipe's source:
// sqs (GetQueueAttributes and redrive.Run), rabbitmq (a passive declare,
// the management API and the rabbit redrive) or memory (the process's own
// queues, broker; depths only). Other sources give nil, nil. It does no
// I/O.
func Queues(spec config.Pipe, broker *memory.Broker, log *slog.Logger) (Depther, Redriver) {
	switch spec.Source.Type {
	case "sqs":
		q := &sqsQueues{spec: spec, log: log}
		return q, q
	case "rabbitmq":
		q := &rabbitQueues{spec: spec, log: log}
		return q, q
	case "memory":
		if broker == nil {
			return nil, nil
		}
		return memoryQueues{spec: spec, broker: broker}, nil
	}
	return nil, nil
}

// sqsQueues finds a pipe's SQS queues once and reads their counts.
type sqsQueues struct {
	spec config.Pipe
	log  *slog.Logger

	mu          sync.Mutex
	api         redrive.API
	source, dlq string
	dlqNote     string
}

func (q *sqsQueues) open(ctx context.Context) (redrive.API, string, string, string, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.api != nil {
		return q.api, q.source, q.dlq, q.dlqNote, nil
	}
	src := q.spec.Source
	guess := redrive.RegionOfURL(src.QueueURL)
	if a, err := redrive.ParseQueueARN(src.QueueARN); err == nil {
		guess = a.Region
	}
	client, err := redrive.NewClient(ctx, redrive.ClientConfig{Region: src.Region, Endpoint: src.Endpoint, RegionGuess: guess})
	if err != nil {
		return nil, "", "", "", err
	}
	source, err := redrive.ResolveURL(ctx, client, src.QueueURL, src.QueueARN, src.QueueName)
	if err != nil {
		return nil, "", "", "", err
	}
	dlq, err := redrive.DeadLetterURL(ctx, client, source)
	note := ""
	switch {
	case errors.Is(err, redrive.ErrNoRedrivePolicy):
		if dl := q.spec.DeadLetter; dl != nil && dl.Target.Type == "sqs" && dl.Target.QueueURL != "" {
			dlq = dl.Target.QueueURL
		} else {
			note = "the queue has no redrive policy"
		}
	case err != nil:
		return nil, "", "", "", err
	}
	q.api, q.source, q.dlq, q.dlqNote = client, source, dlq, note
	return client, source, dlq, note, nil
}

// Depths implements Depther.
func (q *sqsQueues) Depths(ctx context.Context) (Depths, error) {
	api, source, dlq, note, err := q.open(ctx)
	if err != nil {
		return Depths{}, err
	}
	c, err := redrive.QueueCounts(ctx, api, source)
	if err != nil {
		return Depths{}, err
	}
	d := Depths{Queue: &Depth{Name: source, Visible: c.Visible + c.Delayed, InFlight: c.InFlight}, DLQNote: note}
	if dlq != "" {
		c, err := redrive.QueueCounts(ctx, api, dlq)
		if err != nil {
			return d, err
		}
		d.DLQ = &Depth{Name: dlq, Visible: c.Visible + c.Delayed, InFlight: c.InFlight}
	}
	return d, nil
}

// Redrive implements Redriver with redrive.Run, as `pipes dlq redrive`
// (RedriveIDs without a selection).
func (q *sqsQueues) Redrive(ctx context.Context, rate float64, report func(redrive.Entry)) (redrive.Summary, error) {
	return q.RedriveIDs(ctx, nil, rate, report)
}

// rabbitQueues reads a pipe's RabbitMQ queues on a connection of their
// own, opened for each call.
type rabbitQueues struct {
	spec config.Pipe
	log  *slog.Logger
}

func (q *rabbitQueues) dial(ctx context.Context) (*rabbit.Broker, string, string, error) {
	src := q.spec.Source
	b, err := rabbit.Dial(ctx, rabbit.Config{URL: src.URL, ManagementURL: src.ManagementURL})
	if err != nil {
		return nil, "", "", err
	}
	dlx, key, set := src.DeadLetter()
	found, err := b.FindDLQ(ctx, src.Queue, rabbit.Fallback{Exchange: dlx, RoutingKey: key, Set: set})
	if errors.Is(err, rabbit.ErrNoDLQ) {
		return b, "", "no dead-letter queue found (pipes dlq --queue names one)", nil
	}
	if err != nil {
		_ = b.Close()
		return nil, "", "", err
	}
	return b, found.Queue, "", nil
}

// Depths implements Depther.
func (q *rabbitQueues) Depths(ctx context.Context) (Depths, error) {
	b, dlq, note, err := q.dial(ctx)
	if err != nil {
		return Depths{}, err
	}
	defer b.Close()
	depth := func(name string) (*Depth, error) {
		c, err := b.Counts(ctx, name)
		if err != nil {
			return nil, err
		}
		d := &Depth{Name: name, Visible: c.Ready, InFlight: -1}
		if c.UnackedKnown {
			d.InFlight = c.Unacked
		}
		return d, nil
	}
	var d Depths
	if d.Queue, err = depth(q.spec.Source.Queue); err != nil {
		return Depths{}, err
	}
	d.DLQNote = note
	if dlq != "" {
		if d.DLQ, err = depth(dlq); err != nil {
			return d, err
		}
	}
	return d, nil
}

// Redrive implements Redriver with the rabbit redrive, as `pipes dlq
// redrive` (RedriveIDs without a selection).
func (q *rabbitQueues) Redrive(ctx context.Context, rate float64, report func(redrive.Entry)) (redrive.Summary, error) {
	return q.RedriveIDs(ctx, nil, rate, report)
}

// memoryQueues reads the process's memory queues.
type memoryQueues struct {
	spec   config.Pipe
	broker *memory.Broker
}

// Depths implements Depther.
func (q memoryQueues) Depths(context.Context) (Depths, error) {
	depth := func(name string) *Depth {
		mq, ok := q.broker.Lookup(name)
		if !ok {
			return nil
		}
		st := mq.Stats()
		return &Depth{Name: name, Visible: st.Visible + st.Delayed, InFlight: st.InFlight}
	}
	name := q.spec.Source.QueueName
	if name == "" {
		name = q.spec.Name
	}
	d := Depths{Queue: depth(name)}
	if rp := q.spec.Source.RedrivePolicy; rp != nil {
		d.DLQ = depth(rp.DeadLetterQueue)
	} else {
		d.DLQNote = "the queue has no redrive_policy"
	}
	return d, nil
}
