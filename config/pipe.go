package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// parsed is one decoded pipe and where its name is written, for the
// duplicate-name check across files.
type parsed struct {
	pipe      Pipe
	namePos   Pos
	nameField string
}

// parseFile decodes every pipe of one file; problems go to d.errs.
func (d *decoder) parseFile(data []byte, dir string) []parsed {
	d.lines = bytes.Split(data, []byte("\n"))
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			d.errorf(Pos{File: d.file}, "", "the file holds no pipe")
			return nil
		}
		d.syntaxError(err)
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			d.syntaxError(err)
		} else {
			d.errorf(d.pos(&extra), "", "a file holds one YAML document; this is a second one (list pipes under pipes: instead)")
		}
		return nil
	}
	if len(doc.Content) == 0 || isNull(deref(doc.Content[0])) {
		d.errorf(Pos{File: d.file}, "", "the file holds no pipe")
		return nil
	}
	root := deref(doc.Content[0])
	if root.Kind != yaml.MappingNode {
		d.errorf(d.pos(root), "", "must be a mapping: one pipe, or pipes: with a list of pipes")
		return nil
	}
	multi := false
	for i := 0; i < len(root.Content); i += 2 {
		multi = multi || root.Content[i].Value == "pipes"
	}
	if !multi {
		p, ok := d.pipe(root, "", dir)
		if !ok {
			return nil
		}
		return []parsed{p}
	}
	pipeKeys := []string{"name", "source", "filter", "enrichment", "target", "logging"}
	b := d.block(root, "", append([]string{"pipes"}, pipeKeys...))
	for _, k := range pipeKeys {
		if b.vals[k] != nil {
			d.errorf(b.keyPos[k], k, "belongs inside a pipe of the pipes: list (a file holds one pipe at top level, or several under pipes:)")
		}
	}
	list := deref(b.vals["pipes"])
	if isNull(list) || (list.Kind == yaml.SequenceNode && len(list.Content) == 0) {
		d.errorf(b.at("pipes"), "pipes", "must list at least one pipe")
		return nil
	}
	if list.Kind != yaml.SequenceNode {
		d.errorf(d.pos(list), "pipes", "must be a list of pipes, got %s", kindName(list))
		return nil
	}
	var out []parsed
	for i, n := range list.Content {
		if p, ok := d.pipe(n, "pipes["+strconv.Itoa(i)+"]", dir); ok {
			out = append(out, p)
		}
	}
	return out
}

// yamlLine finds the line number in a yaml.v3 syntax error.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func (d *decoder) syntaxError(err error) {
	msg := err.Error()
	pos := Pos{File: d.file}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		pos.Line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	d.errorf(pos, "", "invalid YAML: %s", strings.TrimPrefix(msg, "yaml: "))
}

// validName is Pipes' rule for pipe names.
var validName = regexp.MustCompile(`^[.\-_A-Za-z0-9]{1,64}$`)

// pipe decodes one pipe mapping. It returns false when n is not a mapping.
func (d *decoder) pipe(n *yaml.Node, path, dir string) (parsed, bool) {
	b := d.block(n, path, []string{"name", "source", "filter", "enrichment", "target", "dead_letter", "logging"})
	if b == nil {
		return parsed{}, false
	}
	p := Pipe{Pos: b.pos, Dir: dir}
	envFrom := len(d.envValues)
	name, ok := d.scalarOf(b.vals["name"], b.field("name"), "a string")
	switch {
	case !b.has("name"):
		d.errorf(b.pos, path, "name is required")
	case ok && !validName.MatchString(name.text):
		d.errorf(name.pos, b.field("name"), "must be 1 to 64 letters, digits, '.', '-' or '_'")
	}
	p.Name = name.text

	var sb, tb *block
	if !b.has("source") {
		d.errorf(b.pos, path, "source is required")
	} else if sb = b.sub("source", []string{
		"type", "queue_url", "queue_arn", "queue_name", "region", "endpoint",
		"batch_size", "batch_window", "max_concurrency", "visibility_timeout", "wait_time",
		"initial_concurrency", "scale_up_per_minute", "rate_limit", "unwrap", "retry_backoff",
		"delete_payloads", "s3",
		"fifo", "preload", "redrive_policy",
		"url", "queue", "prefetch", "max_receive_count", "management_url", "dead_letter_exchange", "dead_letter_routing_key", "delivery_limit",
	}); sb != nil {
		p.Source = d.source(sb, p.Name)
	}
	if fb := b.sub("filter", []string{"patterns", "jq", "expr"}); fb != nil {
		p.Filter = d.filter(fb)
	}
	if eb := b.sub("enrichment", []string{"type", "url", "method", "batch", "input_template", "headers", "query", "path_parameters", "timeout",
		"insecure_skip_verify", "jq", "function_name", "region", "endpoint", "state_machine_arn", "auth"}); eb != nil {
		p.Enrichment = d.enrichment(eb)
	}
	if !b.has("target") {
		d.errorf(b.pos, path, "target is required")
	} else if tb = b.sub("target", targetKeys); tb != nil {
		p.Target = d.target(tb)
	}
	d.lintPipe(p, sb, tb)
	if db := b.sub("dead_letter", append([]string{"on_exhausted"}, targetKeys...)); db != nil {
		p.DeadLetter = &DeadLetter{
			Target:      d.target(db),
			OnExhausted: db.enum("on_exhausted", "release", "release", "dead_letter"),
		}
	}
	p.Logging = Logging{Level: "error"}
	if lb := b.sub("logging", []string{"level", "include_execution_data"}); lb != nil {
		p.Logging.Level = lb.enum("level", "error", "off", "error", "info", "trace")
		p.Logging.IncludeExecutionData = lb.boolean("include_execution_data", false)
	}
	if vals := d.envValues[envFrom:]; len(vals) > 0 {
		p.EnvValues = slices.Compact(slices.Sorted(slices.Values(vals)))
	}
	return parsed{pipe: p, namePos: b.at("name"), nameField: b.field("name")}, true
}

func (d *decoder) source(b *block, pipeName string) Source {
	s := Source{Pos: b.pos}
	if !b.has("type") {
		d.errorf(b.pos, b.path, "type is required")
	}
	s.Type = b.enum("type", "", "sqs", "memory", "rabbitmq")
	s.QueueURL = b.str("queue_url")
	s.QueueARN = b.str("queue_arn")
	s.QueueName = b.str("queue_name")
	s.Region = b.str("region")
	s.Endpoint = b.str("endpoint")
	b.checkHTTPURL("endpoint", s.Endpoint)
	for _, k := range []string{"queue_url", "queue_arn", "queue_name", "queue"} {
		if b.has(k) {
			s.QueuePos = b.at(k)
			break
		}
	}
	for _, k := range []string{"endpoint", "url"} {
		if b.has(k) {
			s.EndpointPos = b.at(k)
		}
	}
	s.BatchSize = b.integer("batch_size", 10, 1, 10000)
	s.BatchWindow = b.duration("batch_window", 0, 0, 300*time.Second)
	if s.Type == "rabbitmq" {
		// Pipes runs 5 batches at once for MQ sources; 1 keeps a queue's
		// order (with a single active consumer).
		s.MaxConcurrency = b.integer("max_concurrency", 5, 1, 1000)
	} else {
		s.MaxConcurrency = b.integer("max_concurrency", 1000, 2, 1000)
	}
	if v, ok := b.durationAny("visibility_timeout"); ok {
		if v != 0 && (v < time.Second || v > 12*time.Hour) {
			d.errorf(b.at("visibility_timeout"), b.field("visibility_timeout"), "must be 0s (the queue's own) or between 1s and 12h")
		} else {
			s.VisibilityTimeout = v
		}
	}
	s.WaitTime = b.duration("wait_time", 20*time.Second, 0, 20*time.Second)
	s.InitialConcurrency = b.integer("initial_concurrency", min(5, s.MaxConcurrency), 1, s.MaxConcurrency)
	s.ScaleUpPerMinute = b.integer("scale_up_per_minute", 300, 1, 100000)
	s.RateLimit = b.number("rate_limit", 0, 0, 1e6)
	s.Unwrap = b.enum("unwrap", "none", "none", "sns", "eventbridge", "s3pointer", "s3event", "auto")
	d.sourcePayloads(b, &s)
	if rb := b.sub("retry_backoff", []string{"base", "factor", "max", "jitter"}); rb != nil {
		s.RetryBackoff = d.backoff(rb)
		if s.Type == "rabbitmq" && rb.has("base") && s.RetryBackoff.Base == 0 {
			// A delay of 0 is a give-back: RabbitMQ neither counts nor
			// dead-letters it, and the message comes straight back.
			d.errorf(rb.at("base"), rb.field("base"), "must be at least 1s for a rabbitmq source: 0 gives a failed message back at once, uncounted and never dead-lettered (a hot loop)")
		}
	}
	s.FIFO = b.boolean("fifo", false)
	s.Preload = b.str("preload")
	if rb := b.sub("redrive_policy", []string{"max_receive_count", "dead_letter_queue"}); rb != nil {
		s.RedrivePolicy = d.redrivePolicy(rb)
	}

	switch s.Type {
	case "sqs":
		d.sqsQueue(b, s)
		b.only("only for memory sources", "preload", "redrive_policy")
	case "memory":
		b.only("only for sqs sources", "queue_url", "queue_arn", "region", "endpoint")
		if s.QueueName == "" {
			s.QueueName = pipeName
		}
		if s.RedrivePolicy != nil && s.RedrivePolicy.DeadLetterQueue == s.QueueName {
			d.errorf(b.at("redrive_policy"), b.field("redrive_policy.dead_letter_queue"), "must name another queue than the source's own")
		}
	case "rabbitmq":
		b.only("only for memory sources", "fifo", "preload", "redrive_policy")
		b.only("only for sqs and memory sources", "queue_url", "queue_arn", "queue_name", "region", "endpoint", "visibility_timeout", "wait_time")
		s.WaitTime = 0 // a long poll's wait: RabbitMQ pushes, it has none to set
		d.rabbitSource(b, &s)
	}
	if s.Type != "rabbitmq" {
		b.only("only for rabbitmq sources", "url", "queue", "prefetch", "max_receive_count", "management_url", "dead_letter_exchange", "dead_letter_routing_key", "delivery_limit")
	}

	fifo := s.IsFIFO()
	switch {
	case fifo && s.BatchSize > 10:
		d.errorf(b.at("batch_size"), b.field("batch_size"), "must be at most 10 for FIFO queues (Lambda's rule)")
	case s.BatchSize > 10 && s.BatchWindow < time.Second:
		d.errorf(b.at("batch_size"), b.field("batch_size"), "batch_size > 10 needs batch_window of at least 1s (Lambda's rule)")
	}
	if fifo && s.BatchWindow > 0 {
		d.errorf(b.at("batch_window"), b.field("batch_window"), "batching window is not supported for FIFO queues")
	}
	return s
}

// rabbitSource reads and checks the keys of a rabbitmq source.
func (d *decoder) rabbitSource(b *block, s *Source) {
	s.URL = b.str("url")
	s.Queue = b.str("queue")
	s.Prefetch = b.integer("prefetch", 0, 0, 10000)
	s.MaxReceiveCount = b.integer("max_receive_count", 0, 0, 1000)
	s.ManagementURL = b.str("management_url")
	s.DeadLetterExchange = b.str("dead_letter_exchange")
	s.DeadLetterRoutingKey = b.str("dead_letter_routing_key")
	s.DeliveryLimit = b.integer("delivery_limit", 0, 0, 1000000)
	if !b.has("url") {
		d.errorf(b.pos, b.path, "url is required for a rabbitmq source")
	} else {
		b.checkAMQPURL("url", s.URL)
	}
	if !b.has("queue") {
		d.errorf(b.pos, b.path, "queue is required for a rabbitmq source")
	} else if n := len(s.Queue); n == 0 || n > 255 {
		d.errorf(b.at("queue"), b.field("queue"), "must be 1 to 255 bytes")
	}
	if m := s.ManagementURL; m != "" && m != "off" {
		b.checkHTTPURL("management_url", m)
	}
	if n := len(s.DeadLetterExchange); n > 255 {
		d.errorf(b.at("dead_letter_exchange"), b.field("dead_letter_exchange"), "must be at most 255 bytes")
	}
	if n := len(s.DeadLetterRoutingKey); n > 255 {
		d.errorf(b.at("dead_letter_routing_key"), b.field("dead_letter_routing_key"), "must be at most 255 bytes")
	}
}

// checkAMQPURL reports a value of key that is not an amqp:// or amqps://
// URL with a host. The error never shows the URL: it may hold a password.
func (b *block) checkAMQPURL(key, v string) {
	if v == "" || strings.Contains(v, "${") {
		return // an unset variable is reported where it is read
	}
	u, err := url.Parse(v)
	switch {
	case err != nil:
		b.d.errorf(b.at(key), b.field(key), "is not a URL")
	case u.Scheme != "amqp" && u.Scheme != "amqps":
		b.d.errorf(b.at(key), b.field(key), "must be an amqp:// or amqps:// URL, not %s://", u.Scheme)
	case u.Host == "":
		b.d.errorf(b.at(key), b.field(key), "must name the broker's host")
	}
}

// only reports each of keys present in b with msg.
func (b *block) only(msg string, keys ...string) {
	for _, k := range keys {
		if b.vals[k] != nil {
			b.d.errorf(b.keyPos[k], b.field(k), "%s", msg)
		}
	}
}

var (
	sqsQueueName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}(\.fifo)?$`)
	sqsQueueARN  = regexp.MustCompile(`^arn:aws[a-z-]*:sqs:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,80}(\.fifo)?$`)
)

// sqsQueue checks that an sqs source names its queue exactly once, well.
func (d *decoder) sqsQueue(b *block, s Source) {
	keys := []string{"queue_url", "queue_arn", "queue_name"}
	var set []string
	for _, k := range keys {
		if b.has(k) {
			set = append(set, k)
		}
	}
	if len(set) == 0 {
		d.errorf(b.pos, b.path, "an sqs source needs one of queue_url, queue_arn, queue_name")
	}
	for _, k := range set[min(1, len(set)):] {
		d.errorf(b.keyPos[k], b.field(k), "only one of queue_url, queue_arn, queue_name may be set (%s is set too)", set[0])
	}
	b.checkHTTPURL("queue_url", s.QueueURL)
	if s.QueueARN != "" && !sqsQueueARN.MatchString(s.QueueARN) {
		d.errorf(b.at("queue_arn"), b.field("queue_arn"), "must be an SQS queue ARN like arn:aws:sqs:us-east-1:123456789012:orders")
	}
	if s.QueueName != "" && !sqsQueueName.MatchString(s.QueueName) {
		d.errorf(b.at("queue_name"), b.field("queue_name"), "must be 1 to 80 letters, digits, '-' or '_', with .fifo at the end for a FIFO queue")
	}
	if b.has("fifo") && len(set) > 0 {
		// fifo says what kind the queue is where its name comes from a
		// variable; once the name is known it must agree. Reported at the
		// queue, so that --skip-env leaves out a placeholder's.
		k := set[0]
		named := map[string]string{"queue_url": s.QueueURL, "queue_arn": s.QueueARN, "queue_name": s.QueueName}[k]
		switch isFIFO := strings.HasSuffix(named, ".fifo"); {
		case isFIFO && !s.FIFO:
			d.errorf(b.at(k), b.field(k), "names a FIFO queue (.fifo), but fifo is false (at %s)", b.at("fifo"))
		case !isFIFO && s.FIFO:
			d.errorf(b.at(k), b.field(k), "names a standard queue (no .fifo at the end), but fifo is true (at %s)", b.at("fifo"))
		}
	}
}

func (d *decoder) backoff(b *block) *Backoff {
	bo := &Backoff{
		Base:   b.duration("base", 10*time.Second, 0, 12*time.Hour),
		Factor: b.number("factor", 2, 1, 10),
		Jitter: b.boolean("jitter", false),
	}
	bo.Max = max(15*time.Minute, bo.Base)
	if v, ok := b.durationAny("max"); ok {
		if v < bo.Base || v > 12*time.Hour {
			d.errorf(b.at("max"), b.field("max"), "must be between retry_backoff.base and 12h")
		} else {
			bo.Max = v
		}
	}
	return bo
}

func (d *decoder) redrivePolicy(b *block) *RedrivePolicy {
	if !b.has("max_receive_count") {
		d.errorf(b.pos, b.path, "max_receive_count is required")
	}
	if !b.has("dead_letter_queue") {
		d.errorf(b.pos, b.path, "dead_letter_queue is required")
	}
	return &RedrivePolicy{
		MaxReceiveCount: b.integer("max_receive_count", 0, 1, 1000),
		DeadLetterQueue: b.str("dead_letter_queue"),
	}
}

func (d *decoder) filter(b *block) *Filter {
	f := &Filter{}
	f.Patterns, f.PatternsPos = d.patterns(b)
	d.lintPatterns(f.Patterns, f.PatternsPos, b.field("patterns"))
	if b.has("jq") {
		f.JQ, f.JQSpan = b.strSpan("jq")
		f.JQPos = f.JQSpan.Start
	}
	if b.has("expr") {
		f.Expr, f.ExprSpan = b.strSpan("expr")
		f.ExprPos = f.ExprSpan.Start
	}
	return f
}

// typesTaking names the AWS target types that take key k.
func typesTaking(k string) string {
	var types []string
	for _, typ := range awsTargetTypes {
		if containsKey(awsTargetKeys[typ], k) {
			types = append(types, typ)
		}
	}
	return strings.Join(types, " and ")
}

func containsKey(keys []string, k string) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}

func (d *decoder) enrichment(b *block) *Enrichment {
	e := &Enrichment{Pos: b.pos, KeyPos: b.positions()}
	if !b.has("type") {
		d.errorf(b.pos, b.path, "type is required")
	}
	e.Type = b.enum("type", "", "http", "lambda", "stepfunctions", "jq")
	e.URL = b.str("url")
	e.InputTemplate, e.InputTemplateSpan = b.strSpan("input_template")
	d.lintTemplate(b.at("input_template"), b.field("input_template"), e.InputTemplate)
	e.Headers = b.headers("headers")
	e.Query = b.headers("query")
	e.PathParameters = b.strings("path_parameters", maxPathParameters)
	e.Timeout = b.duration("timeout", 30*time.Second, time.Millisecond, 5*time.Minute)
	e.JQ, e.JQSpan = b.strSpan("jq")
	e.Method = b.enum("method", "POST", "GET", "POST", "PUT", "PATCH", "DELETE")
	e.Batch = b.boolean("batch", true)
	e.InsecureSkipVerify = b.boolean("insecure_skip_verify", false)
	e.FunctionName = b.str("function_name")
	e.StateMachineARN = b.str("state_machine_arn")
	e.Auth = b.enum("auth", "", "aws_sigv4")
	e.Region = b.str("region")
	e.Endpoint = b.str("endpoint")
	b.checkHTTPURL("endpoint", e.Endpoint)
	switch e.Type {
	case "lambda":
		if !b.has("function_name") {
			d.errorf(b.pos, b.path, "function_name is required for a lambda enrichment")
		}
	case "stepfunctions":
		if !b.has("state_machine_arn") {
			d.errorf(b.pos, b.path, "state_machine_arn is required for a stepfunctions enrichment")
		}
	case "http":
		if !b.has("url") {
			d.errorf(b.pos, b.path, "url is required for an http enrichment")
		}
		// Placeholders (<$.body.id>) may stand in the path and query.
		b.checkHTTPURL("url", strings.NewReplacer("<", "", ">", "").Replace(e.URL))
		b.checkPathParameters(e.URL, e.PathParameters)
	case "jq":
		if !b.has("jq") {
			d.errorf(b.pos, b.path, "jq is required for a jq enrichment")
		}
	}
	if e.Type != "" && e.Type != "jq" {
		b.only("only for jq enrichments", "jq")
	}
	if e.Type != "" && e.Type != "lambda" {
		b.only("only for lambda enrichments", "function_name")
	}
	if e.Type != "" && e.Type != "stepfunctions" {
		b.only("only for stepfunctions enrichments", "state_machine_arn")
	}
	if e.Type != "" && e.Type != "lambda" && e.Type != "stepfunctions" {
		b.only("only for lambda and stepfunctions enrichments", "endpoint")
		if e.Type != "http" || e.Auth == "" {
			b.only("only for lambda and stepfunctions enrichments, and http ones with auth: aws_sigv4", "region")
		}
	}
	if e.Type != "" && e.Type != "http" {
		b.only("only for http enrichments", "url", "method", "batch", "headers", "query", "path_parameters", "insecure_skip_verify", "auth")
	}
	return e
}

// targetKeys are the keys of a `target:` (and `dead_letter:`) block.
var targetKeys = []string{
	"type", "url", "method", "batch", "headers", "query", "path_parameters", "timeout",
	"insecure_skip_verify", "input_template", "func", "fail_on",
	"region", "endpoint", "queue_url", "message_group_id", "message_deduplication_id",
	"topic_arn", "event_bus_name", "source", "detail_type", "function_name", "invocation_type", "retry",
	"exchange", "routing_key", "persistent", "mandatory", "offload",
	"endpoint_id", "resources", "time", "stream", "partition_key", "delivery_stream",
	"state_machine_arn", "log_group_name", "log_stream_name", "timestamp", "auth",
}

// awsTargetTypes are the AWS target types, in the order errors name them.
var awsTargetTypes = []string{"sqs", "sns", "eventbridge", "lambda", "kinesis", "firehose", "stepfunctions", "cloudwatch_logs"}

// IsAWSTarget reports whether a target type calls an AWS API with the
// SDK (and takes region and endpoint): sqs, sns, eventbridge, lambda,
// kinesis, firehose, stepfunctions, cloudwatch_logs.
func IsAWSTarget(typ string) bool { return slices.Contains(awsTargetTypes, typ) }

// awsTargetKeys are the keys only AWS targets take, by type.
var awsTargetKeys = map[string][]string{
	"sqs":             {"queue_url", "message_group_id", "message_deduplication_id"},
	"sns":             {"topic_arn", "message_group_id", "message_deduplication_id"},
	"eventbridge":     {"event_bus_name", "source", "detail_type", "endpoint_id", "resources", "time"},
	"lambda":          {"function_name", "invocation_type"},
	"stepfunctions":   {"state_machine_arn", "invocation_type"},
	"cloudwatch_logs": {"log_group_name", "log_stream_name", "timestamp"},
	"kinesis":         {"stream", "partition_key"},
	"firehose":        {"delivery_stream"},
}

// maxInRunner is the longest a message may be worked on inside the runner:
// SQS's 12 h visibility cap from the receive, less a margin for the batch
// window and the dead-letter send.
const maxInRunner = 12*time.Hour - 10*time.Minute

func (d *decoder) retry(b *block) *Retry {
	r := &Retry{
		MaxAttempts: b.integer("max_attempts", 3, 1, 100),
		Backoff:     b.enum("backoff", "exponential", "linear", "arithmetic", "geometric", "exponential"),
		MinDelay:    b.duration("min_delay", time.Second, 0, time.Hour),
		MaxEventAge: b.duration("max_event_age", 0, 0, 14*24*time.Hour),
		Jitter:      b.boolean("jitter", true),
	}
	r.MaxDelay = max(20*time.Second, r.MinDelay)
	if v, ok := b.durationAny("max_delay"); ok {
		if v < r.MinDelay || v > time.Hour {
			d.errorf(b.at("max_delay"), b.field("max_delay"), "must be between retry.min_delay and 1h")
		} else {
			r.MaxDelay = v
		}
	}
	return r
}

func (d *decoder) target(b *block) Target {
	t := Target{Pos: b.pos, KeyPos: b.positions()}
	if !b.has("type") {
		d.errorf(b.pos, b.path, "type is required")
	}
	types := []string{"http", "stdout", "sqs", "sns", "eventbridge", "lambda", "kinesis", "firehose", "stepfunctions", "cloudwatch_logs", "func", "rabbitmq"}
	for _, extra := range d.targetTypes {
		if extra != "" && !slices.Contains(types, extra) {
			types = append(types, extra)
		}
	}
	t.Type = b.enum("type", "", types...)
	t.URL = b.str("url")
	t.Method = b.enum("method", "POST", "GET", "POST", "PUT", "PATCH", "DELETE")
	t.Batch = b.boolean("batch", true)
	t.Headers = b.headers("headers")
	t.Query = b.headers("query")
	t.PathParameters = b.strings("path_parameters", maxPathParameters)
	t.Timeout = b.duration("timeout", 30*time.Second, time.Millisecond, 5*time.Minute)
	t.InsecureSkipVerify = b.boolean("insecure_skip_verify", false)
	t.InputTemplate, t.InputTemplateSpan = b.strSpan("input_template")
	d.lintTemplate(b.at("input_template"), b.field("input_template"), t.InputTemplate)
	t.Func = b.str("func")
	t.FailOn = b.str("fail_on")
	if path, value, ok := strings.Cut(t.FailOn, "=="); ok && strings.HasPrefix(strings.TrimSpace(path), "$.") {
		pattern, err := failOnPattern(strings.TrimSpace(path), strings.TrimSpace(value))
		if err != nil {
			d.errorf(b.at("fail_on"), b.field("fail_on"), "%v", err)
		}
		t.FailOnPattern = pattern
	}
	t.Region = b.str("region")
	t.Endpoint = b.str("endpoint")
	b.checkHTTPURL("endpoint", t.Endpoint)
	t.QueueURL = b.str("queue_url")
	t.MessageGroupID = b.str("message_group_id")
	t.MessageDeduplicationID = b.str("message_deduplication_id")
	t.TopicARN = b.str("topic_arn")
	t.EventBusName = b.str("event_bus_name")
	t.EventSource = b.str("source")
	t.DetailType = b.str("detail_type")
	t.EndpointID = b.str("endpoint_id")
	t.Resources = b.strings("resources", 10)
	t.Time = b.str("time")
	t.FunctionName = b.str("function_name")
	switch t.Type {
	case "stepfunctions":
		t.InvocationType = b.enum("invocation_type", "REQUEST_RESPONSE", "REQUEST_RESPONSE", "FIRE_AND_FORGET")
	case "", "lambda":
		t.InvocationType = b.enum("invocation_type", "", "RequestResponse", "Event")
	}
	t.Stream = b.str("stream")
	t.PartitionKey = b.str("partition_key")
	t.DeliveryStream = b.str("delivery_stream")
	if t.Type == "lambda" && t.InvocationType == "" {
		t.InvocationType = "RequestResponse"
	}
	t.StateMachineARN = b.str("state_machine_arn")
	t.LogGroupName = b.str("log_group_name")
	t.LogStreamName = b.str("log_stream_name")
	t.Timestamp = b.str("timestamp")
	t.Auth = b.enum("auth", "", "aws_sigv4")
	if rb := b.sub("retry", []string{"max_attempts", "backoff", "min_delay", "max_delay", "max_event_age", "jitter"}); rb != nil {
		t.Retry = d.retry(rb)
		// Retries inside the runner keep the message invisible by the
		// heartbeat, which SQS caps at 12 h from the receive.
		r := t.Retry
		if worst := time.Duration(r.MaxAttempts)*t.Timeout + time.Duration(r.MaxAttempts-1)*r.MaxDelay; worst > maxInRunner {
			d.errorf(rb.at("max_attempts"), rb.field("max_attempts"),
				"retries inside the runner can take up to %s (%d attempts of timeout %s, %d delays of up to %s), past SQS's 12h cap on a message's invisibility: lower max_attempts, max_delay or timeout",
				worst, r.MaxAttempts, t.Timeout, r.MaxAttempts-1, r.MaxDelay)
		}
	}
	require := func(key, what string) {
		if !b.has(key) {
			d.errorf(b.pos, b.path, "%s is required for %s target", key, what)
		}
	}
	switch t.Type {
	case "":
	case "http":
		require("url", "an http")
		// Placeholders (<$.body.id>) may stand in the path and query.
		b.checkHTTPURL("url", strings.NewReplacer("<", "", ">", "").Replace(t.URL))
		b.checkPathParameters(t.URL, t.PathParameters)
	case "func":
		require("func", "a func")
	case "sqs":
		require("queue_url", "an sqs")
		b.checkHTTPURL("queue_url", t.QueueURL)
	case "sns":
		require("topic_arn", "an sns")
	case "eventbridge":
		// Without source and detail_type, Pipes' defaults apply: the
		// pipe's ARN and "Event from aws:sqs" (target/eventbridge).
		if t.EventBusName == "" {
			t.EventBusName = "default"
		}
	case "lambda":
		require("function_name", "a lambda")
	case "kinesis":
		require("stream", "a kinesis")
		require("partition_key", "a kinesis")
	case "firehose":
		require("delivery_stream", "a firehose")
	case "stepfunctions":
		require("state_machine_arn", "a stepfunctions")
	case "cloudwatch_logs":
		require("log_group_name", "a cloudwatch_logs")
	case "rabbitmq":
		require("url", "a rabbitmq")
		b.checkAMQPURL("url", t.URL)
	}
	d.targetOffload(b, &t)
	t.Exchange = b.str("exchange")
	t.RoutingKey = b.str("routing_key")
	persistent, mandatory := b.boolean("persistent", true), b.boolean("mandatory", true)
	if t.Type == "rabbitmq" {
		t.Persistent, t.Mandatory = persistent, mandatory
	}
	if t.Type != "" && t.Type != "rabbitmq" {
		b.only("only for rabbitmq targets", "exchange", "routing_key", "persistent", "mandatory")
	}
	if t.Type != "" {
		for _, k := range []string{"queue_url", "message_group_id", "message_deduplication_id",
			"topic_arn", "event_bus_name", "source", "detail_type", "function_name", "invocation_type",
			"endpoint_id", "resources", "time", "stream", "partition_key", "delivery_stream", "state_machine_arn", "log_group_name", "log_stream_name", "timestamp"} {
			if !containsKey(awsTargetKeys[t.Type], k) {
				b.only("only for "+typesTaking(k)+" targets", k)
			}
		}
		if !slices.Contains(awsTargetTypes, t.Type) {
			b.only("only for AWS targets", "endpoint")
			if t.Type != "http" || t.Auth == "" {
				b.only("only for AWS targets and http ones with auth: aws_sigv4", "region")
			}
		}
	}
	if t.Type != "" && t.Type != "func" {
		b.only("only for func targets", "func")
	}
	if t.Type != "" && t.Type != "stdout" {
		b.only("only for stdout targets", "fail_on")
	}
	if t.Type != "" && t.Type != "http" {
		b.only("only for http targets", "query", "path_parameters", "auth")
	}
	return t
}

// maxPathParameters bounds path_parameters (a URL with more wildcards is
// no API's).
const maxPathParameters = 100

// checkPathParameters checks that the url has one `*` for each of
// path_parameters, which fill them in order (Pipes' PathParameterValues).
// The error is at the url, which may come from a variable, and does not
// quote it.
func (b *block) checkPathParameters(rawURL string, params []string) {
	if len(params) == 0 {
		return
	}
	if n := strings.Count(rawURL, "*"); n != len(params) {
		b.d.errorf(b.at("url"), b.field("url"), "has %d '*' for the %d path_parameters: each '*' is filled by one path parameter, in order", n, len(params))
	}
}

// strings is key's list of strings (at most max), nil when absent.
func (b *block) strings(key string, max int) []string {
	n := deref(b.vals[key])
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		b.d.errorf(b.d.pos(n), b.field(key), "must be a list of strings, got %s", kindName(n))
		return nil
	}
	if len(n.Content) > max {
		b.d.errorf(b.d.pos(n), b.field(key), "must list at most %d values, got %d", max, len(n.Content))
	}
	var out []string
	for i, e := range n.Content {
		if s, ok := b.d.scalarOf(e, b.field(key)+"["+strconv.Itoa(i)+"]", "a string"); ok {
			out = append(out, s.text)
		}
	}
	return out
}

// failOnPattern is fail_on's path form, `$.a.b == VALUE`, as the
// EventBridge pattern {"a":{"b":[VALUE]}}: a dotted path of the record's
// field names, and a JSON string, number, true, false or null.
func failOnPattern(path, value string) (string, error) {
	names := strings.Split(strings.TrimPrefix(path, "$."), ".")
	for _, n := range names {
		if n == "" || strings.ContainsAny(n, "[]*' \t\"") {
			return "", fmt.Errorf("path %q: want field names joined by dots, like $.body.poison", path)
		}
	}
	var v any
	if err := json.Unmarshal([]byte(value), &v); err != nil {
		return "", fmt.Errorf("%q after == is not JSON: want a string (in double quotes), a number, true, false or null", value)
	}
	switch v.(type) {
	case map[string]any, []any:
		return "", fmt.Errorf("%s after == is an object or array: want a string, a number, true, false or null", value)
	}
	var pattern any = []any{json.RawMessage(value)}
	for i := len(names) - 1; i >= 0; i-- {
		pattern = map[string]any{names[i]: pattern}
	}
	out, err := json.Marshal(pattern)
	if err != nil {
		return "", fmt.Errorf("making the pattern of %s: %w", path, err)
	}
	return string(out), nil
}
