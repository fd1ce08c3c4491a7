// Package memory is an in-process queue with the semantics of Amazon SQS:
// visibility timeouts, receive counts, redrive to a dead-letter queue after
// maxReceiveCount receives, and FIFO queues with message groups. It backs
// the README quickstart, library users' tests and the runtime's own tests.
//
// Queues live in a Broker, one per process (or per test): the pipes of a
// process that name the same queue share it.
package memory

import (
	"fmt"
	"sync"
	"time"
)

// Defaults and limits of queue options, as in SQS.
const (
	// DefaultVisibilityTimeout is the visibility timeout of a queue whose
	// options leave it 0.
	DefaultVisibilityTimeout = 30 * time.Second
	// MaxVisibilityTimeout is the longest visibility timeout (12 hours).
	MaxVisibilityTimeout = 12 * time.Hour
	// MaxWaitTime is the longest long poll (20 seconds).
	MaxWaitTime = 20 * time.Second
	// DefaultRegion is the region in the ARN of a queue whose options leave
	// it empty.
	DefaultRegion = "local"
	// MaxMaxReceiveCount is the highest redrive maxReceiveCount.
	MaxMaxReceiveCount = 1000
	// MaxBodySize is the largest body a message may have (1 MiB, as SQS).
	MaxBodySize = 1 << 20
)

// Options configure a queue. The zero value is a standard queue with a 30 s
// visibility timeout, short polling and no redrive.
type Options struct {
	// FIFO makes the queue keep order per message group.
	FIFO bool
	// VisibilityTimeout is how long a receive hides a message: 0 means
	// DefaultVisibilityTimeout (30 s); at most 12 h.
	VisibilityTimeout time.Duration
	// WaitTime is how long Receive long-polls an empty queue before it
	// returns no messages: 0 returns at once (short polling); at most 20 s.
	// The pipeline file's wait_time defaults to 20 s and is passed as is.
	WaitTime time.Duration
	// MaxReceiveCount is the redrive policy's maxReceiveCount (1..1000):
	// a message already received that many times is moved to
	// DeadLetterQueue instead of being received again. 0 = no redrive.
	MaxReceiveCount int
	// DeadLetterQueue names the broker queue the redrive policy moves
	// messages to; required with MaxReceiveCount. It is created with
	// default options (and the same FIFO, Region and Now) if missing.
	DeadLetterQueue string
	// Region is the region in the queue's ARN and records; "" means "local".
	Region string
	// Now is the clock for visibility and timestamps; nil means time.Now.
	// Tests that move a fake clock should use short polling (WaitTime 0):
	// long polls wait in real time.
	Now func() time.Time
}

// normalize applies the defaults and checks the limits.
func (o Options) normalize(name string) (Options, error) {
	if o.VisibilityTimeout == 0 {
		o.VisibilityTimeout = DefaultVisibilityTimeout
	}
	if o.Region == "" {
		o.Region = DefaultRegion
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	var problems []string
	if o.VisibilityTimeout < 0 || o.VisibilityTimeout > MaxVisibilityTimeout {
		problems = append(problems, fmt.Sprintf("visibility timeout %s is not within 0..12h", o.VisibilityTimeout))
	}
	if o.WaitTime < 0 || o.WaitTime > MaxWaitTime {
		problems = append(problems, fmt.Sprintf("wait time %s is not within 0..20s", o.WaitTime))
	}
	if o.MaxReceiveCount < 0 || o.MaxReceiveCount > MaxMaxReceiveCount {
		problems = append(problems, fmt.Sprintf("max receive count %d is not within 1..1000", o.MaxReceiveCount))
	}
	if o.MaxReceiveCount > 0 && o.DeadLetterQueue == "" {
		problems = append(problems, "max receive count needs a dead-letter queue")
	}
	if o.MaxReceiveCount == 0 && o.DeadLetterQueue != "" {
		problems = append(problems, "dead-letter queue needs a max receive count")
	}
	if o.DeadLetterQueue == name {
		problems = append(problems, "a queue cannot be its own dead-letter queue")
	}
	if o.DeadLetterQueue != "" {
		if err := checkName(o.DeadLetterQueue); err != nil {
			problems = append(problems, "dead-letter queue: "+err.Error())
		}
	}
	if len(problems) > 0 {
		return o, fmt.Errorf("invalid options for memory queue %q: %s", name, joinProblems(problems))
	}
	return o, nil
}

// sameAs reports whether two normalized options configure the same queue
// (the clocks are not compared).
func (o Options) sameAs(p Options) bool {
	return o.FIFO == p.FIFO && o.VisibilityTimeout == p.VisibilityTimeout &&
		o.WaitTime == p.WaitTime && o.MaxReceiveCount == p.MaxReceiveCount &&
		o.DeadLetterQueue == p.DeadLetterQueue && o.Region == p.Region
}

func joinProblems(p []string) string {
	s := p[0]
	for _, x := range p[1:] {
		s += "; " + x
	}
	return s
}

// checkName applies SQS's queue name rule: 1..80 letters, digits, '-' and
// '_', and '.' (for the ".fifo" suffix pipes does not require).
func checkName(name string) error {
	if name == "" || len(name) > 80 {
		return fmt.Errorf("queue name %q must have 1..80 characters", name)
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
		if !ok {
			return fmt.Errorf("queue name %q may only hold letters, digits, '-', '_' and '.'", name)
		}
	}
	return nil
}

// Broker is a set of named queues shared by the pipes of one process. The
// zero value is not usable: make one with NewBroker. It is safe for
// concurrent use.
type Broker struct {
	mu     sync.Mutex
	queues map[string]*Queue
}

// NewBroker returns an empty broker.
func NewBroker() *Broker {
	return &Broker{queues: make(map[string]*Queue)}
}

// Queue creates the named queue, or returns the existing one when its
// options are the same (the clocks are not compared). It fails when the
// name or options are invalid, or conflict with the existing queue's. A
// queue first created on demand as a dead-letter queue takes the options
// of its first explicit Queue call, as long as FIFO is the same.
//
// The redrive target (opts.DeadLetterQueue) is created with default options
// if missing; it must be of the same type (FIFO or standard).
func (b *Broker) Queue(name string, opts Options) (*Queue, error) {
	if err := checkName(name); err != nil {
		return nil, fmt.Errorf("creating memory queue: %w", err)
	}
	opts, err := opts.normalize(name)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()

	var dlq *Queue
	if opts.DeadLetterQueue != "" {
		dlq = b.queues[opts.DeadLetterQueue]
		if dlq != nil && dlq.isFIFO() != opts.FIFO {
			return nil, fmt.Errorf("creating memory queue %q: dead-letter queue %q must be %s like its source", name, opts.DeadLetterQueue, kind(opts.FIFO))
		}
	}

	if q, ok := b.queues[name]; ok {
		if err := q.adopt(opts); err != nil {
			return nil, err
		}
		if dlq == nil && opts.DeadLetterQueue != "" {
			dlq = b.implicit(opts)
		}
		q.setDLQ(dlq)
		return q, nil
	}
	if dlq == nil && opts.DeadLetterQueue != "" {
		dlq = b.implicit(opts)
	}
	q := newQueue(name, opts, false)
	q.setDLQ(dlq)
	b.queues[name] = q
	return q, nil
}

// implicit creates the dead-letter queue named by opts with default
// options. b.mu must be held.
func (b *Broker) implicit(src Options) *Queue {
	dopts, _ := Options{FIFO: src.FIFO, Region: src.Region, Now: src.Now}.normalize(src.DeadLetterQueue)
	q := newQueue(src.DeadLetterQueue, dopts, true)
	b.queues[src.DeadLetterQueue] = q
	return q
}

// Lookup returns the named queue and true, or nil and false when the
// broker has no such queue.
func (b *Broker) Lookup(name string) (*Queue, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	q, ok := b.queues[name]
	return q, ok
}

func kind(fifo bool) string {
	if fifo {
		return "FIFO"
	}
	return "standard"
}
