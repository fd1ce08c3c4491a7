// Package rabbitmq is the RabbitMQ source of pipes: it consumes one queue
// over AMQP 0-9-1 (github.com/rabbitmq/amqp091-go), hands its deliveries to
// the pipe as records of the Pipes RabbitMQ shape (SPEC.md §2.2) and
// settles them the RabbitMQ way when the pipe says so: basic.ack for done,
// a requeue for a give-back, and for failures the queue's own
// dead-lettering (its dead-letter exchange, its delivery limit) or pipes'
// count of deliveries (max_receive_count). It decides no outcome on its
// own: batching, scaling and verdicts belong to the pipe runtime.
//
// RabbitMQ deliveries are not leases: a delivery stays with the consumer
// until it is settled or the channel closes (then the broker requeues it),
// so the source has no Extend. What AMQP does not tell a client — the
// queue's type, dead-letter exchange and delivery limit — is read from the
// management API at Open, or taken from Config's fallback keys.
//
// # SQS behaviours and their RabbitMQ counterparts
//
//	SQS                              RabbitMQ source
//	DeleteMessage (success, filter)  basic.ack
//	visibility 0 (give back)         basic.nack requeue=true: never dead-letters
//	                                 (but quorum queues before 4.3 count it
//	                                 towards their delivery limit)
//	visibility d (retry later)       a confirmed copy in a delay queue for about
//	                                 d (then dead-lettered back), original acked;
//	                                 below HoldBelow: held unacked for d
//	retry without retry_backoff      about 1 s, doubling with jitter, ≤ 30 s
//	visibility timeout               none: deliveries stay until settled or the
//	                                 connection closes; source.Info says 30 s
//	redrive policy maxReceiveCount   quorum x-delivery-limit (the broker counts),
//	                                 or max_receive_count (pipes counts:
//	                                 x-delivery-count, else x-pipes-attempts on
//	                                 confirmed re-published copies)
//	DLQ                              the queue's dead-letter exchange (argument
//	                                 or policy) and the queues bound to it;
//	                                 x-death tells queue, reason, count
//	no redrive policy                no DLX: failures requeued after the delay,
//	                                 never dropped
//	DLQ that leads back (a cycle)    seen in x-death
//	                                 (rejected from the queue max_receive_count
//	                                 times, 10 when unset), logged, then held
//	                                 and requeued instead of dead-lettered
//	ApproximateReceiveCount          x-delivery-count + 1, x-pipes-attempts + 1,
//	                                 x-death count + 1 (+1 when redelivered)
//	messageId                        AMQP message-id (unique in flight), else a
//	                                 digest of body and properties
//
// # Retry delays outside the prefetch window
//
// A failed message waiting for its retry must not hold a basic.qos slot:
// held unacked, as many failures as the prefetch stop every other
// message for the whole delay. The source therefore moves it to a delay
// queue, the common RabbitMQ retry pattern: it publishes a copy (same
// body and properties, the failures so far in x-pipes-attempts) through
// the default exchange to <queue>.pipes-delay.<ttl>, waits for the
// publisher confirm, and only then acks the original. A crash at any
// instant means redelivery, never loss: before the confirm the original
// is still unacked (the broker redelivers it), after it the copy is
// durable; between the confirm and the ack both exist (a duplicate).
//
// The delay queues are classic, durable and the source's own (it
// declares them: the user needs configure permission on those names):
// one per TTL of a fixed ladder (500 ms … 25 min; a delay is rounded up
// to the next step), so that expiry follows publish order — a single
// queue with per-message TTLs expires only at its head, and a long delay
// would hold back the short ones behind it. Each dead-letters its expired
// messages through the default exchange back to the source's queue (its
// tail) and expires itself (x-expires) ten minutes past its TTL once
// unused; the source declares it again at least every minute while it
// uses it, which renews that lease before any message in it could be
// stranded. Pending counts the messages in them, so --drain waits.
//
// Raising basic.qos by the number held was the other choice. It was
// not taken: on RabbitMQ a per-consumer prefetch applies to consumers
// started after the change (the consumer would have to be restarted), a
// global one is not supported by quorum queues, held messages still age
// towards consumer_timeout, and an outage holding thousands would need a
// window as large.
//
// Counts survive the move. A copy carries the failures before it in
// x-pipes-attempts; Attempts adds x-delivery-count on quorum queues (which
// counts again from 0 for a copy) or the redelivered flag on classic
// ones. Because the broker's count restarts, the source applies the limits
// itself: a failure at max_receive_count, or past the queue's delivery
// limit, of a message that went through a copy is dead-lettered with
// basic.nack (x-death reason rejected); one that never left the queue is
// rejected with requeue past the limit, and the broker dead-letters it
// (reason delivery_limit) as before. Without a dead-letter exchange nothing
// is dropped: it is retried after its delay.
//
// Delays below HoldBelow (only from a sub-second Nak: retry_backoff
// rounds to whole seconds) are held unacked, as is a message whose copy
// cannot be placed (the declare or the publish refused: logged as a
// warning). A hold is capped at the broker's consumer_timeout less the
// delivery's age, less a tenth of it (at most a minute): the queue's
// x-consumer-timeout argument or consumer-timeout policy when the
// management API shows one, else DefaultConsumerTimeout (30 min; RabbitMQ
// 3.10's API does not show the global setting).
//
// Without retry_backoff the pipe passes VisibilityTimeout (30 s) as the
// delay; the source takes that for "no delay of its own" and uses about
// 1 s instead, doubling with each attempt, equal jitter, up to 30 s. (A
// retry_backoff that yields exactly 30 s is taken the same way.)
//
// # An outage is no verdict
//
// A batch whose target call failed whole with a retryable error (an
// outage: connection refused, timeouts, 5xx, 429) says nothing of its
// messages, and on no queue kind may it dead-letter them or use up their
// delivery count. The pipe hands them to Defer (source.Deferrer), from the
// first such batch on and for those in flight when its circuit opens. The
// source moves each to a delay queue as for a failure, with one
// difference: the copy's x-pipes-attempts is the attempts *before* this
// delivery, so its next delivery counts as this one again (on a quorum
// queue the broker's x-delivery-count starts at 0 for the copy; on a
// classic one the copy is not flagged redelivered). Nothing is
// dead-lettered, no delivery limit or max_receive_count is touched, and
// the messages wait outside the prefetch window — while the breaker is
// open too (its held batches are deferred: the probe is a fresh batch),
// so an outage of any length does not fill the window or age unacked
// messages towards consumer_timeout. A crash at any instant means
// redelivery, never loss, as for a failure's copy. Holding the
// deliveries unacked was the other choice, not taken for the reasons a
// failure's hold was not; it is what happens where the copy cannot be
// placed: Defer keeps those messages unacked and the pipe holds them and
// sends them again itself (they take prefetch slots meanwhile). That hold
// is capped like the source's own (HoldUntil, pipe.HoldLimiter): before
// the consumer timeout the pipe gives them back — Defer again, else
// basic.nack requeue (no delivery limit used on a classic queue, though
// the redelivered flag adds one to pipes' own count; on a quorum queue
// before RabbitMQ 4.3 it counts towards x-delivery-limit). Deliveries the
// broker prefetched while the pipe takes none (its circuit open) wait in
// the consumer's buffer, at most the prefetch of them; they age from their
// arrival, so the source gives back (reap) those near the consumer
// timeout: a copy with the attempts before it in a delay queue, else a
// requeue.
package rabbitmq

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/internal/scrub"
	"github.com/pipesproject/pipes/source"
)

// Limits and defaults of the source.
const (
	// MaxPrefetch is the largest QoS prefetch the source asks for.
	MaxPrefetch = 10000
	// DefaultWaitTime is how long a Receive waits for a first delivery
	// when Config.WaitTime is 0.
	DefaultWaitTime = 20 * time.Second
	// VisibilityTimeout is what source.Info reports: the delay the pipe
	// passes for a failed message it has no other delay for, which the
	// source replaces with its default backoff (about 1 s, doubling, up
	// to 30 s).
	VisibilityTimeout = 30 * time.Second
	// MaxHold caps a retry delay: the longest delay queue's TTL, and
	// below the broker's default consumer_timeout (30 min) for a hold.
	MaxHold = 25 * time.Minute
	// AttemptsHeader is the header of re-published copies that carries how
	// many deliveries of the message failed before (max_receive_count on
	// queues where the broker keeps no count).
	AttemptsHeader = "x-pipes-attempts"
	// ManagementOff is the ManagementURL that turns the management API off.
	ManagementOff = "off"
	// DefaultExchange is how Config.DeadLetterExchange names RabbitMQ's
	// default exchange ("" with a routing key does too).
	DefaultExchange = "amq.default"
)

// Config says which queue a Source consumes and how.
type Config struct {
	// URL is the broker: amqp:// or amqps://, user and password in it, the
	// vhost in the path ("/" or none: the default vhost). It never
	// appears in errors, logs or records.
	URL string
	// Queue is the queue to consume; it must exist.
	Queue string
	// Prefetch is the consumer's QoS prefetch count: 0 means BatchSize ×
	// MaxConcurrency, at most MaxPrefetch.
	Prefetch int
	// BatchSize and MaxConcurrency are the pipe's, for the prefetch
	// default (0 counts as 10 and 5).
	BatchSize, MaxConcurrency int
	// MaxReceiveCount, when above 0, makes the source dead-letter a message
	// whose delivery failed that many times; 0 leaves it to the broker.
	MaxReceiveCount int
	// ManagementURL is the management API that tells the queue's type,
	// dead-letter exchange and delivery limit: "" means
	// http://<amqp host>:15672 with the AMQP URL's credentials, "off" not
	// to use it. Credentials in it are used for it alone.
	ManagementURL string
	// DeadLetterExchange, DeadLetterRoutingKey and DeliveryLimit stand in
	// for what the management API would tell when it is off or cannot be
	// reached (the queue's x-dead-letter-exchange,
	// x-dead-letter-routing-key and x-delivery-limit). The default
	// exchange is DefaultExchange ("amq.default"), or "" with a routing
	// key, as RabbitMQ spells it; "" without one means no dead-letter
	// exchange.
	DeadLetterExchange   string
	DeadLetterRoutingKey string
	DeliveryLimit        int
	// WaitTime is how long a Receive waits for a first delivery: 0 means
	// DefaultWaitTime.
	WaitTime time.Duration
	// Logger receives warnings about the queue and the connection; nil
	// discards them.
	Logger *slog.Logger
	// URLAt and QueueAt, when set, are where the pipeline file gives the
	// url and the queue ("pipeline.yaml:4:8"): Open's errors about them
	// begin there.
	URLAt, QueueAt string
}

// Source consumes one RabbitMQ queue. Open it before the first Receive and
// Close it once the pipe has settled everything. All its methods are safe
// for concurrent use; it never settles a message on its own, except that
// Close requeues what was left unsettled.
type Source struct {
	cfg      Config
	uri      amqp.URI
	secret   string // the AMQP password, scrubbed from every error and log
	mgmt     string // management API base URL, "" when off
	mgmtUser string
	mgmtPass string
	prefetch int
	wait     time.Duration
	log      *slog.Logger
	arn      string
	key      string // eventSourceKey: <queue>::<vhost>
	arnJSON  json.RawMessage
	keyJSON  json.RawMessage
	connName string

	openMu sync.Mutex
	opened atomic.Pointer[queueInfo]

	mu        sync.Mutex
	sess      *session          // nil while disconnected
	ready     chan struct{}     // closed when sess is set; replaced when it ends
	lastErr   error             // why there is no session
	gen       uint64            // generation of the last session
	inflight  map[string]*entry // by receipt handle
	ids       map[string]int    // AMQP message-ids in flight
	closing   bool
	stop      chan struct{}      // closed by Close
	bg        context.Context    // cancelled by Close: bounds publishes
	cancelBg  context.CancelFunc //
	loops     sync.WaitGroup     // the connection loop and pumps
	timers    sync.WaitGroup     // held messages' timers and re-publishes
	publishes atomic.Int64       // re-publishes under way
	// requeuedAt is when a message was last given back to the broker
	// (UnixNano): the broker applies a requeue asynchronously, so for a
	// moment the message is neither ours nor counted in the queue.
	requeuedAt atomic.Int64
	// delayQueues are the delay queues used, by name, with when each was
	// last declared (s.mu); delayedAt is when Pending last saw messages in
	// them (UnixNano).
	delayQueues map[string]time.Time
	delayedAt   atomic.Int64
	// consumerTimeoutForTest, when set, is the consumer timeout the
	// source caps unacked deliveries by (a server setting otherwise).
	consumerTimeoutForTest time.Duration
}

var (
	_ source.Source         = (*Source)(nil)
	_ source.Opener         = (*Source)(nil)
	_ source.Closer         = (*Source)(nil)
	_ source.Terminator     = (*Source)(nil)
	_ source.AttemptCounter = (*Source)(nil)
	_ source.CancelSafe     = (*Source)(nil)
	_ source.Deferrer       = (*Source)(nil)
)

// New checks cfg and builds the source. It does no I/O: Open connects.
// Errors name the problem, never the password.
func New(cfg Config) (*Source, error) {
	s := &Source{cfg: cfg, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	var errs []error
	uri, secret, err := parseURL(cfg.URL)
	if err != nil {
		errs = append(errs, err)
	}
	s.uri, s.secret = uri, secret
	if cfg.Queue == "" {
		errs = append(errs, errors.New("no queue"))
	}
	if cfg.Prefetch < 0 || cfg.Prefetch > MaxPrefetch {
		errs = append(errs, fmt.Errorf("prefetch %d is outside 0..%d", cfg.Prefetch, MaxPrefetch))
	}
	if cfg.MaxReceiveCount < 0 {
		errs = append(errs, fmt.Errorf("max receive count %d is negative", cfg.MaxReceiveCount))
	}
	if cfg.DeliveryLimit < 0 {
		errs = append(errs, fmt.Errorf("delivery limit %d is negative", cfg.DeliveryLimit))
	}
	if cfg.WaitTime < 0 {
		errs = append(errs, fmt.Errorf("wait time %v is negative", cfg.WaitTime))
	}
	if err == nil {
		if err := s.setManagement(cfg.ManagementURL); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("configuring RabbitMQ source %s: %w", cfg.Queue, err)
	}
	s.prefetch = cfg.Prefetch
	if s.prefetch == 0 {
		b, c := cfg.BatchSize, cfg.MaxConcurrency
		if b <= 0 {
			b = 10
		}
		if c <= 0 {
			c = 5
		}
		s.prefetch = min(b*c, MaxPrefetch)
	}
	s.wait = cfg.WaitTime
	if s.wait == 0 {
		s.wait = DefaultWaitTime
	}
	s.arn = ARN(uri, cfg.Queue)
	s.key = cfg.Queue + "::" + uri.Vhost
	s.arnJSON, _ = json.Marshal(s.arn) // strings always encode
	s.keyJSON, _ = json.Marshal(s.key)
	s.connName = "pipes rabbitmq source " + cfg.Queue + " " + rand.Text()[:6]
	s.inflight = map[string]*entry{}
	s.ids = map[string]int{}
	s.delayQueues = map[string]time.Time{}
	s.ready = make(chan struct{})
	s.stop = make(chan struct{})
	s.bg, s.cancelBg = context.WithCancel(context.Background())
	return s, nil
}

// parseURL reads an AMQP URL without ever putting it, or its password,
// in an error.
func parseURL(raw string) (amqp.URI, string, error) {
	if raw == "" {
		return amqp.URI{}, "", errors.New("no url")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return amqp.URI{}, "", errors.New("the url is not a valid URL")
	}
	if u.Scheme != "amqp" && u.Scheme != "amqps" {
		return amqp.URI{}, "", fmt.Errorf("the url's scheme is %q, want amqp or amqps", u.Scheme)
	}
	secret, _ := u.User.Password()
	uri, err := amqp.ParseURI(raw)
	if err != nil {
		return amqp.URI{}, "", errors.New("the url is not a valid AMQP URL (amqp[s]://user:password@host:port/vhost)")
	}
	return uri, secret, nil
}

// setManagement resolves the management API's base URL and credentials.
func (s *Source) setManagement(raw string) error {
	switch raw {
	case ManagementOff:
		return nil
	case "":
		s.mgmt = "http://" + net.JoinHostPort(s.uri.Host, "15672")
		s.mgmtUser, s.mgmtPass = s.uri.Username, s.uri.Password
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New(`management url must be an http(s) URL, "" or "off"`)
	}
	s.mgmtUser, s.mgmtPass = s.uri.Username, s.uri.Password
	if u.User != nil {
		s.mgmtUser = u.User.Username()
		s.mgmtPass, _ = u.User.Password()
		if s.mgmtPass != "" && s.secret == "" {
			s.secret = s.mgmtPass
		}
		u.User = nil
	}
	s.mgmt = strings.TrimSuffix(u.String(), "/")
	return nil
}

// scrub returns err with the passwords replaced, in every form (a
// management answer may echo the Basic credentials "user:password"
// base64-encoded), for errors that come from libraries (a dial error, a
// management answer).
func (s *Source) scrub(err error) error {
	return scrub.New(append(scrub.Userinfo(s.uri.Username, s.secret), scrub.Userinfo(s.mgmtUser, s.mgmtPass)...)...).Error(err)
}

// Attempts is how many times m has been delivered, this delivery included:
// x-delivery-count + 1 where the broker keeps it (quorum queues), else the
// source's own x-pipes-attempts header or the x-death count for this queue,
// plus one for this delivery and one more when the broker flags it
// redelivered. It never blocks.
func (s *Source) Attempts(m *source.Message) int {
	return m.ReceiveCount()
}
