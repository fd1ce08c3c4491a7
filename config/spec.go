// Package config turns pipeline files (YAML) into typed, validated specs.
// Decoding is strict: unknown keys, wrong types and out-of-range values are
// errors that name the file, line, column and field. ${ENV} and
// ${ENV:-default} are interpolated in scalar values. It imports nothing of
// pipes' own packages.
package config

import (
	"strconv"
	"strings"
	"time"
)

// Pos is a place in a pipeline file.
type Pos struct {
	File   string
	Line   int
	Column int
}

// String formats p as file:line:col, leaving out the parts that are unknown
// (zero), for error messages.
func (p Pos) String() string {
	s := p.File
	if p.Line > 0 {
		s += ":" + strconv.Itoa(p.Line)
		if p.Column > 0 {
			s += ":" + strconv.Itoa(p.Column)
		}
	}
	return s
}

// KeyPos says where the value of each key of a block is written: by key
// as the file writes it ("partition_key"), and for a mapping or a list
// each entry too ("headers.X-Id", "query.id", "path_parameters[0]").
// Keys the file leaves out are absent.
type KeyPos map[string]Pos

// At is where key's value is written: the key's own position, else that
// of the key it is in ("headers" for "headers.X-Id"), else block (the
// position of the block, for a key the file leaves out).
func (k KeyPos) At(key string, block Pos) Pos {
	for key != "" {
		if p, ok := k[key]; ok {
			return p
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			break
		}
		key = key[:i]
	}
	return block
}

// Pipe is one pipe as written in a pipeline file, after defaults.
type Pipe struct {
	// Name is unique in the process.
	Name       string
	Source     Source
	Filter     *Filter     // nil when the file has none
	Enrichment *Enrichment // nil when the file has none
	Target     Target
	// DeadLetter is the pipe-level dead-letter target (`dead_letter:`),
	// nil when the file has none.
	DeadLetter *DeadLetter
	Logging    Logging
	// Pos is where the pipe begins in its file; Dir is the file's folder,
	// against which relative paths (preload files) are resolved.
	Pos Pos
	Dir string
	// EnvValues are the values of the environment variables interpolated
	// into the pipe's text (`${VAR}`), sorted: the status page masks those
	// that stand in free text (templates, filters), where a secret may have
	// been put. Never printed.
	EnvValues []string `json:"-"`
}

// Source is the `source:` block.
type Source struct {
	Type string // sqs | memory | rabbitmq

	// sqs: one of QueueURL, QueueARN, QueueName.
	QueueURL  string
	QueueARN  string
	QueueName string // also the memory queue's name (default: the pipe's name)
	Region    string
	Endpoint  string

	BatchSize         int           // 1..10000, default 10; >10 needs BatchWindow >= 1s
	BatchWindow       time.Duration // 0..300s
	MaxConcurrency    int           // 2..1000, default 1000
	VisibilityTimeout time.Duration // 0 = the queue's own; else 1s..12h
	WaitTime          time.Duration // 0..20s, default 20s (sqs, memory; 0 for rabbitmq)

	// InitialConcurrency is the number of concurrent batches a pipe starts
	// with (default 5, at most MaxConcurrency). Key `initial_concurrency`.
	InitialConcurrency int
	// ScaleUpPerMinute is how many concurrent batches may be added per
	// minute while messages keep coming (default 300, Pipes' rate; 1..100000).
	// Key `scale_up_per_minute`.
	ScaleUpPerMinute int
	// Unwrap takes message bodies out of an envelope before filtering:
	// "none" (default), "sns", "eventbridge", "s3pointer" (an SQS Extended
	// Client pointer, replaced by its S3 object), "s3event" (an S3 event
	// notification, one record per entry) or "auto" (any of them; the S3
	// forms on sqs sources only). Key `unwrap`.
	Unwrap string
	// DeletePayloads deletes the S3 object of an unwrapped pointer once
	// its message was deleted from the queue. Key `delete_payloads`.
	DeletePayloads bool
	// S3, when set, says how an sqs source reaches S3 payloads. Key `s3`.
	S3 *S3
	// RateLimit caps the messages received per second (0: no cap): a token
	// bucket gates the receives, so messages beyond it stay in the queue
	// and burn no receive count. Key `rate_limit`.
	RateLimit float64
	// RetryBackoff, when set, gives failed items a visibility timeout by
	// receive count instead of leaving the queue's own. Key `retry_backoff`.
	RetryBackoff *Backoff

	// FIFO makes the memory queue keep order per message group; for an
	// sqs source it says the queue is a FIFO one, where its name comes
	// from a variable (and must agree with a known name). Key `fifo`.
	FIFO bool

	// memory only.
	// Preload is a JSON Lines file of messages to put on the memory queue at
	// start (relative to the pipeline file). Key `preload`.
	Preload string
	// RedrivePolicy moves a memory message to another memory queue after
	// MaxReceiveCount receives. Key `redrive_policy`.
	RedrivePolicy *RedrivePolicy

	// rabbitmq only.
	// URL is the broker: amqp:// or amqps://, user and password in it, the
	// vhost in the path ("/" or none: the default vhost). Key `url`.
	URL string
	// Queue is the queue to consume. Key `queue`.
	Queue string
	// Prefetch is the consumer's QoS prefetch count; 0 means batch_size ×
	// max_concurrency, at most 10000. Key `prefetch`.
	Prefetch int
	// MaxReceiveCount, when above 0, makes pipes dead-letter a message
	// after that many failed deliveries; 0 leaves it to the broker (the
	// queue's delivery limit or dead-letter exchange). Key
	// `max_receive_count`.
	MaxReceiveCount int
	// ManagementURL is the management API to read the queue's arguments
	// and policies from: "" means http://<amqp host>:15672 with the same
	// credentials, "off" not to use it. Key `management_url`.
	ManagementURL string
	// DeadLetterExchange, DeadLetterRoutingKey and DeliveryLimit stand in
	// for what the management API would tell (the queue's
	// x-dead-letter-exchange, x-dead-letter-routing-key and
	// x-delivery-limit), when it cannot be used. Keys
	// `dead_letter_exchange`, `dead_letter_routing_key`, `delivery_limit`.
	// The default exchange is spelt "amq.default", or "" with a routing
	// key (RabbitMQ's own x-dead-letter-exchange ""): "" without one is
	// no dead-letter exchange. Use DeadLetter to read them.
	DeadLetterExchange   string
	DeadLetterRoutingKey string
	DeliveryLimit        int

	Pos Pos
	// QueuePos is where the queue is named (queue_url, queue_arn,
	// queue_name or queue), EndpointPos where the server is (endpoint, or a
	// rabbitmq source's url); zero when the key is absent. Errors about
	// reaching the queue point there.
	QueuePos, EndpointPos Pos
}

// DefaultExchange is how dead_letter_exchange names RabbitMQ's default
// exchange (the management API's name for it, which no exchange can be
// declared with).
const DefaultExchange = "amq.default"

// DeadLetter is the dead-letter exchange and routing key that a rabbitmq
// source's fallback keys describe: exchange "" is the default exchange
// (dead_letter_exchange "amq.default", or "" with a
// dead_letter_routing_key); ok is false when they describe none.
func (s Source) DeadLetter() (exchange, routingKey string, ok bool) {
	switch {
	case s.DeadLetterExchange == DefaultExchange:
		return "", s.DeadLetterRoutingKey, true
	case s.DeadLetterExchange != "":
		return s.DeadLetterExchange, s.DeadLetterRoutingKey, true
	case s.DeadLetterRoutingKey != "":
		return "", s.DeadLetterRoutingKey, true
	}
	return "", "", false
}

// IsFIFO reports whether the source is a FIFO queue: a memory source with
// `fifo: true`, or an SQS queue with `fifo: true` or whose URL, name or ARN
// ends in ".fifo".
func (s Source) IsFIFO() bool {
	switch s.Type {
	case "memory":
		return s.FIFO
	case "sqs":
		if s.FIFO {
			return true
		}
		for _, q := range []string{s.QueueURL, s.QueueName, s.QueueARN} {
			if strings.HasSuffix(q, ".fifo") {
				return true
			}
		}
	}
	return false
}

// Backoff is `retry_backoff:`: the visibility given to a failed item is
// Base * Factor^(receiveCount-1), capped at Max, with full jitter when
// Jitter is set.
type Backoff struct {
	Base   time.Duration // 0..12h, default 10s (0 = release at once)
	Factor float64       // 1..10, default 2
	Max    time.Duration // Base..12h, default 15m
	Jitter bool          // default false
}

// RedrivePolicy is the memory queue's `redrive_policy:`.
type RedrivePolicy struct {
	MaxReceiveCount int    // 1..1000; key `max_receive_count`
	DeadLetterQueue string // memory queue name; key `dead_letter_queue`
}

// Filter is the `filter:` block; every part present must pass.
type Filter struct {
	// Patterns are EventBridge event patterns, OR-ed, at most 5. Each is
	// kept as JSON text (YAML mappings are converted), with its position.
	Patterns    []string
	PatternsPos []Pos
	JQ          string
	JQPos       Pos
	Expr        string
	ExprPos     Pos
	// JQSpan and ExprSpan say where each character of JQ and Expr is
	// written, for errors inside them (see Span).
	JQSpan, ExprSpan Span
}

// Enrichment is the `enrichment:` block.
type Enrichment struct {
	Type          string // http | lambda | stepfunctions | jq
	URL           string
	Method        string // http: default POST
	Batch         bool   // http: one call per batch (default true)
	InputTemplate string
	Headers       map[string]string
	// Query parameters added to the URL (http, key `query`), and
	// PathParameters filling the URL's `*` in order (key
	// `path_parameters`); values, like header values, may be templates.
	Query          map[string]string
	PathParameters []string
	Timeout        time.Duration
	// InsecureSkipVerify turns TLS verification off (http).
	InsecureSkipVerify bool
	JQ                 string
	// FunctionName, Region, Endpoint: lambda.
	FunctionName string
	Region       string
	Endpoint     string
	// StateMachineARN: stepfunctions (an express workflow, run
	// synchronously; also takes region and endpoint). Key
	// `state_machine_arn`.
	StateMachineARN string
	// Auth is how an http enrichment signs its calls: "" (none) or
	// "aws_sigv4" (SigV4 for execute-api, API Gateway; region from the URL
	// or Region). Key `auth`.
	Auth string
	Pos  Pos
	// KeyPos is where each key of the block is written, for errors
	// about one key (a header's value, a query parameter).
	KeyPos KeyPos
	// InputTemplateSpan and JQSpan say where each character of
	// InputTemplate and JQ is written, for errors inside them (see Span).
	InputTemplateSpan, JQSpan Span
}

// DeadLetter is the `dead_letter:` block: a target (same keys as
// `target:`) for items that fail with a client error, or that exhaust the
// target's retries when OnExhausted is "dead_letter".
type DeadLetter struct {
	Target Target
	// OnExhausted is what happens to an item whose retries are exhausted:
	// "release" (default: back to the queue) or "dead_letter".
	OnExhausted string
}

// Retry is a target's `retry:` block: SNS-style delivery retries inside
// the runner before an item is given back to the queue.
type Retry struct {
	MaxAttempts int           // 1..100, default 3 (1 = no retry)
	Backoff     string        // linear | arithmetic | geometric | exponential; default exponential
	MinDelay    time.Duration // default 1s
	MaxDelay    time.Duration // default 20s, at least MinDelay, at most 1h
	MaxEventAge time.Duration // 0 = no limit
	Jitter      bool          // default true
}

// Target is the `target:` block.
type Target struct {
	Type string // http | stdout | sqs | sns | eventbridge | lambda | stepfunctions | cloudwatch_logs | func | rabbitmq

	// http
	URL     string
	Method  string            // default POST
	Batch   bool              // default true
	Headers map[string]string // values interpolated from env; may hold template placeholders
	// Query parameters added to the URL; values may hold template
	// placeholders, as may the URL's path. Key `query`.
	Query map[string]string
	// PathParameters fill the URL's `*`, one each, in order, as Pipes'
	// PathParameterValues fill an API destination's wildcards; each may
	// be a template. Key `path_parameters`.
	PathParameters     []string
	Timeout            time.Duration // default 30s, 1ms..5m
	InsecureSkipVerify bool          // key `insecure_skip_verify`

	InputTemplate string // key `input_template`
	// InputTemplateSpan says where each character of InputTemplate is
	// written, for errors inside it (see Span).
	InputTemplateSpan Span

	// func: the name a Go program registered its callback under.
	Func string

	// AWS targets: Region and Endpoint override the AWS config chain.
	Region   string
	Endpoint string
	// sqs: the queue; MessageGroupID and MessageDeduplicationID are
	// templates (FIFO queues). Keys `queue_url`, `message_group_id`,
	// `message_deduplication_id`.
	QueueURL               string
	MessageGroupID         string
	MessageDeduplicationID string
	// sns: key `topic_arn` (also takes message_group_id and
	// message_deduplication_id for FIFO topics).
	TopicARN string
	// eventbridge: keys `event_bus_name` (default "default"), `source`
	// (default: the pipe's ARN, as Pipes), `detail_type` (default "Event
	// from aws:sqs", or aws:rmq for a rabbitmq source); each may be a
	// template.
	EventBusName string
	EventSource  string
	DetailType   string
	// EndpointID, Resources and Time are the rest of Pipes'
	// EventBridgeEventBusParameters: keys `endpoint_id` (a global
	// endpoint), `resources` (up to 10 ARNs, each may be a template) and
	// `time` (RFC 3339, usually a dynamic path like `$.body.time`).
	EndpointID string
	Resources  []string
	Time       string
	// lambda: keys `function_name`, `invocation_type` (RequestResponse,
	// the default, or Event).
	FunctionName   string
	InvocationType string
	// kinesis: key `stream` (the stream's name or ARN) and
	// `partition_key` (a constant, a dynamic path like `$.body.customer`
	// or a template with `<$.body.customer>` placeholders), Pipes'
	// KinesisStreamParameters.PartitionKey.
	Stream       string
	PartitionKey string
	// firehose: key `delivery_stream` (the delivery stream's name or ARN).
	DeliveryStream string
	// stepfunctions: key `state_machine_arn`; `invocation_type` is
	// REQUEST_RESPONSE (the default, as in Pipes: StartSyncExecution, for
	// express workflows) or FIRE_AND_FORGET (StartExecution).
	StateMachineARN string
	// cloudwatch_logs: keys `log_group_name` (a name or ARN),
	// `log_stream_name` (a constant or a template; default the pipe's
	// name) and `timestamp` (a dynamic path to milliseconds since the
	// epoch; default the delivery time).
	LogGroupName  string
	LogStreamName string
	Timestamp     string
	// Auth is how an http target signs its calls: "" (none) or
	// "aws_sigv4" (SigV4 for execute-api, API Gateway; region from the URL
	// or Region). Key `auth`.
	Auth string

	// rabbitmq: publishes to Exchange ("" is the default exchange) with
	// RoutingKey (a template); Headers (templates) become AMQP headers;
	// Persistent (default true) sets delivery mode 2; Mandatory (default
	// true) makes an unroutable message fail its item. URL is the broker.
	// Keys `exchange`, `routing_key`, `persistent`, `mandatory`.
	Exchange   string
	RoutingKey string
	Persistent bool
	Mandatory  bool

	// Offload, when set, sends large payloads of an sqs target through S3
	// the SQS Extended Client's way. Key `offload`.
	Offload *Offload

	// Retry, when set, retries failed deliveries inside the runner.
	Retry *Retry

	// stdout: items whose body contains FailOn are reported failed (a
	// debugging aid that shows the retry and dead-letter lifecycle).
	// Key `fail_on`. Its path form, `$.body.poison == true`, matches a
	// field of the record instead of text: FailOnPattern is then that
	// match as an EventBridge pattern (JSON), and the text is not looked
	// for.
	FailOn        string
	FailOnPattern string

	Pos Pos
	// KeyPos is where each key of the block is written, for errors
	// about one key (a partition key, a header's value).
	KeyPos KeyPos
}

// Logging is the `logging:` block (Pipes' levels).
type Logging struct {
	Level                string // off | error | info | trace; default error
	IncludeExecutionData bool   // key `include_execution_data`
}
