package awsimport

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/internal/validation"
)

// checker runs on each imported pipe what `pipes validate` runs on a
// pipeline file (the loader, then the registry's checks), so that the
// importer never writes a pipe that validate refuses (a filter pattern
// over Pipes' 4096 characters, a template over 8192, ...).
type checker struct {
	reg    *pipes.Registry
	loader config.Loader
}

func newChecker(lookupEnv func(string) (string, bool)) *checker {
	if lookupEnv == nil {
		// `pipes import aws` reads no environment: a variable is a
		// placeholder, and what is made with one is not judged, as
		// `pipes validate --skip-env` does.
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	return &checker{reg: pipes.NewRegistry(), loader: config.Loader{SkipEnv: true, LookupEnv: lookupEnv}}
}

// check returns the problems of the pipe p, each at the part of the input
// m read it from.
func (c *checker) check(m *mapper, p *yaml.Node) ([]Problem, error) {
	data, err := yaml.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("writing pipe %s to check it: %w", m.name, err)
	}
	rep := c.loader.Report("imported.yaml", data)
	errs := append(rep.Errors, validation.Check(c.reg, &rep)...)
	var types blockTypes
	if len(rep.Pipes) > 0 {
		types.source = rep.Pipes[0].Source.Type
		types.target = rep.Pipes[0].Target.Type
		if e := rep.Pipes[0].Enrichment; e != nil {
			types.enrichment = e.Type
		}
	}
	var out []Problem
	for _, e := range errs {
		what := "the imported pipe"
		if e.Field != "" {
			what = "the imported " + e.Field
		}
		out = append(out, Problem{Path: m.inputPath(e.Field, types), Msg: fmt.Sprintf("%s does not validate: %s; the pipe is not imported", what, e.Msg)})
	}
	return out, nil
}

// blockTypes are the types of the imported pipe's source, target and
// enrichment, which say which of Pipes' parameters a key is made from.
type blockTypes struct{ source, target, enrichment string }

// sourceParameters are, by pipes source type, the keys the mapper makes
// from Pipes' SourceParameters, and the parameter each is made from
// (dotted, under SourceParameters).
var sourceParameters = map[string]map[string]string{
	"sqs": {
		"batch_size":   "SqsQueueParameters.BatchSize",
		"batch_window": "SqsQueueParameters.MaximumBatchingWindowInSeconds",
	},
	"rabbitmq": {
		"batch_size":   "RabbitMQBrokerParameters.BatchSize",
		"batch_window": "RabbitMQBrokerParameters.MaximumBatchingWindowInSeconds",
		"queue":        "RabbitMQBrokerParameters.QueueName",
	},
}

// sourcePath is the input path of what the source key (batch_size,
// rate_limit, ...) of a source of type typ is made from; false when it is
// made from the Source ARN itself (the queue, the region).
func (m *mapper) sourcePath(typ, key string) (string, bool) {
	if key == "rate_limit" && m.rateFrom != "" {
		// Made from an API destination's InvocationRateLimitPerSecond.
		return m.rateFrom, true
	}
	from, ok := sourceParameters[typ][key]
	if !ok {
		return "", false
	}
	return m.at(append([]string{"SourceParameters"}, strings.Split(from, ".")...)...), true
}

// parameters are, by pipes type, the keys the mapper makes from Pipes'
// TargetParameters or EnrichmentParameters, and the parameter each is
// made from (dotted, under TargetParameters or EnrichmentParameters);
// input_template, of every type, is made from InputTemplate.
var parameters = map[string]map[string]string{
	"sqs": {
		"message_group_id":         "SqsQueueParameters.MessageGroupId",
		"message_deduplication_id": "SqsQueueParameters.MessageDeduplicationId",
	},
	"eventbridge": {
		"detail_type": "EventBridgeEventBusParameters.DetailType",
		"source":      "EventBridgeEventBusParameters.Source",
		"endpoint_id": "EventBridgeEventBusParameters.EndpointId",
		"time":        "EventBridgeEventBusParameters.Time",
		"resources":   "EventBridgeEventBusParameters.Resources",
	},
	"lambda":          {"invocation_type": "LambdaFunctionParameters.InvocationType"},
	"stepfunctions":   {"invocation_type": "StepFunctionStateMachineParameters.InvocationType"},
	"kinesis":         {"partition_key": "KinesisStreamParameters.PartitionKey"},
	"cloudwatch_logs": {"log_stream_name": "CloudWatchLogsParameters.LogStreamName", "timestamp": "CloudWatchLogsParameters.Timestamp"},
	"http": {
		"headers":         "HttpParameters.HeaderParameters",
		"query":           "HttpParameters.QueryStringParameters",
		"path_parameters": "HttpParameters.PathParameterValues",
	},
}

// parameterPath is the input path of the parameter that key (a key of
// the block, with its entry: "partition_key", "headers.X-Id",
// "resources[1]") of a block of type typ is made from, under params
// (TargetParameters or EnrichmentParameters); false when it is made from
// no parameter (the block's Target or Enrichment ARN, say).
func (m *mapper) parameterPath(params, typ, key string) (string, bool) {
	name, entry := key, ""
	if i := strings.IndexAny(key, ".["); i >= 0 {
		name, entry = key[:i], key[i:]
	}
	from, ok := parameters[typ][name]
	if name == "input_template" {
		from, ok = "InputTemplate", true
	}
	if !ok {
		return "", false
	}
	keys := append([]string{params}, strings.Split(from, ".")...)
	switch {
	case strings.HasPrefix(entry, "."): // a header or query parameter's name
		keys = append(keys, entry[1:])
	case entry != "": // a list entry, [i]
		keys = append(keys, entry)
	}
	return m.at(keys...), true
}

var patternField = regexp.MustCompile(`^filter\.patterns\[(\d+)\]`)

// inputPath is the part of the input a field of the imported pipe comes
// from: a source, target or enrichment key made from one of Pipes'
// parameters is at that parameter (source.batch_size at
// SourceParameters.SqsQueueParameters.BatchSize, target.partition_key at
// TargetParameters.KinesisStreamParameters.PartitionKey), another at the
// Source, Target or Enrichment.
func (m *mapper) inputPath(field string, types blockTypes) string {
	if sm := patternField.FindStringSubmatch(field); sm != nil {
		i, _ := strconv.Atoi(sm[1])
		return m.at("SourceParameters", "FilterCriteria", "Filters", fmt.Sprintf("[%d]", i), "Pattern")
	}
	section, _, _ := strings.Cut(field, ".")
	section, _, _ = strings.Cut(section, "[")
	if key, ok := strings.CutPrefix(field, "source."); ok {
		if p, ok := m.sourcePath(types.source, key); ok {
			return p
		}
	}
	if key, ok := strings.CutPrefix(field, "target."); ok {
		if p, ok := m.parameterPath("TargetParameters", types.target, key); ok {
			return p
		}
	}
	if key, ok := strings.CutPrefix(field, "enrichment."); ok {
		if p, ok := m.parameterPath("EnrichmentParameters", types.enrichment, key); ok {
			return p
		}
	}
	switch {
	case section == "source":
		return m.at("Source")
	case section == "filter":
		return m.at("SourceParameters", "FilterCriteria")
	case section == "enrichment":
		return m.at("Enrichment")
	case section == "target":
		return m.at("Target")
	case section == "logging":
		return m.at("LogConfiguration")
	case section == "name":
		return m.at("Name")
	}
	return m.base
}
