package awsimport

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pipesproject/pipes/internal/similar"
)

// shape is what a part of a pipe definition may hold, after
// AWS::Pipes::Pipe's CloudFormation reference and the DescribePipe
// response: the keys of an object and the shape of each, the shape of a
// list's elements, or anything (free: maps of names to values, the
// parameters of sources and targets pipes does not run, which are named
// as left out already).
type shape struct {
	keys map[string]*shape
	elem *shape
}

// free holds anything.
var free = &shape{}

// obj is an object of the given keys.
func obj(keys map[string]*shape) *shape { return &shape{keys: keys} }

// pipeShape is the shape of a pipe definition's properties. It is read
// only.
func pipeShape() *shape {
	http := obj(map[string]*shape{"HeaderParameters": free, "PathParameterValues": free, "QueryStringParameters": free})
	batching := map[string]*shape{"BatchSize": free, "MaximumBatchingWindowInSeconds": free}
	rabbit := map[string]*shape{"Credentials": free, "QueueName": free, "VirtualHost": free}
	for k, v := range batching {
		rabbit[k] = v
	}
	return obj(map[string]*shape{
		"Description": free, "DesiredState": free, "KmsKeyIdentifier": free, "Name": free, "RoleArn": free, "Tags": free,
		"Source": free, "Enrichment": free, "Target": free,
		// DescribePipe's response and a CreatePipe request add these.
		"Arn": free, "CurrentState": free, "StateReason": free, "CreationTime": free, "LastModifiedTime": free,
		"SourceParameters": obj(map[string]*shape{
			"SqsQueueParameters":       obj(batching),
			"RabbitMQBrokerParameters": obj(rabbit),
			"FilterCriteria": obj(map[string]*shape{
				"Filters": {elem: obj(map[string]*shape{"Pattern": free})},
			}),
			"ActiveMQBrokerParameters": free, "DynamoDBStreamParameters": free, "KinesisStreamParameters": free,
			"ManagedStreamingKafkaParameters": free, "SelfManagedKafkaParameters": free,
		}),
		"EnrichmentParameters": obj(map[string]*shape{"HttpParameters": http, "InputTemplate": free}),
		"TargetParameters": obj(map[string]*shape{
			"HttpParameters": http, "InputTemplate": free,
			"SqsQueueParameters":                 obj(map[string]*shape{"MessageGroupId": free, "MessageDeduplicationId": free}),
			"LambdaFunctionParameters":           obj(map[string]*shape{"InvocationType": free}),
			"StepFunctionStateMachineParameters": obj(map[string]*shape{"InvocationType": free}),
			"KinesisStreamParameters":            obj(map[string]*shape{"PartitionKey": free}),
			"CloudWatchLogsParameters":           obj(map[string]*shape{"LogStreamName": free, "Timestamp": free}),
			"EventBridgeEventBusParameters": obj(map[string]*shape{
				"DetailType": free, "EndpointId": free, "Resources": free, "Source": free, "Time": free,
			}),
			"BatchJobParameters": free, "EcsTaskParameters": free, "RedshiftDataParameters": free,
			"SageMakerPipelineParameters": free, "TimestreamParameters": free,
		}),
		"LogConfiguration": obj(map[string]*shape{
			"Level": free, "IncludeExecutionData": free,
			"CloudwatchLogsLogDestination": free, "FirehoseLogDestination": free, "S3LogDestination": free,
		}),
	})
}

// unknownKeys names every key of props its shape does not hold, which
// CloudFormation and the Pipes API refuse and the importer would
// otherwise ignore without a word: a misspelt BatchSize is the default
// batch size, a FilterCriteria outside SourceParameters a pipe that passes
// every message. A misplaced or misspelt filter leaves the pipe out; any
// other key is named as left out, and the pipe is written without it.
func (m *mapper) unknownKeys(props map[string]any) {
	root := pipeShape()
	var walk func(v any, s *shape, path string)
	walk = func(v any, s *shape, path string) {
		if s == free || v == nil {
			return
		}
		if _, _, ok := intrinsic(v); ok {
			return // Fn::If and the like: resolved where it is read
		}
		if s.elem != nil {
			for i, e := range list(v) {
				walk(e, s.elem, fmt.Sprintf("%s[%d]", path, i))
			}
			return
		}
		mp := mapping(v)
		for _, k := range sortedKeys(mp) {
			sub, ok := s.keys[k]
			at := path + "." + k
			if path == "" {
				at = m.at(k)
			}
			if ok {
				walk(mp[k], sub, at)
				continue
			}
			hint := hintFor(root, s, k)
			if isFilterKey(k) {
				if hint == "" {
					hint = " (Pipes has filters at SourceParameters.FilterCriteria.Filters[].Pattern)"
				}
				m.drop(at, "%s is not a property %s%s, so its filter would be lost and every message passed", k, where(path), hint)
				continue
			}
			m.leftOut(at, "%s is not a property %s%s; it is ignored", k, where(path), hint)
		}
	}
	walk(props, root, "")
}

func isFilterKey(k string) bool {
	switch strings.ToLower(k) {
	case "filtercriteria", "filters", "filter", "pattern":
		return true
	}
	return false
}

// where names the object a key is in, for messages.
func where(path string) string {
	if path == "" {
		return "of AWS::Pipes::Pipe"
	}
	return "of " + path[strings.LastIndexByte(path, '.')+1:]
}

// hintFor says where a key belongs when it is another object's (Pipes
// names FilterCriteria under SourceParameters), or which key of its own
// object it is close to (BatchSze: BatchSize); "" when neither.
func hintFor(root, in *shape, key string) string {
	for k := range in.keys {
		if strings.EqualFold(k, key) {
			return fmt.Sprintf(" (did you mean %s?)", k)
		}
	}
	var found []string
	var find func(s *shape, path string)
	find = func(s *shape, path string) {
		for k, sub := range s.keys {
			p := strings.TrimPrefix(path+"."+k, ".")
			if strings.EqualFold(k, key) {
				found = append(found, p)
			}
			find(sub, p)
		}
		if s.elem != nil {
			find(s.elem, path+"[]")
		}
	}
	find(root, "")
	if len(found) == 1 {
		return fmt.Sprintf(" (Pipes has it at %s)", found[0])
	}
	if best := similar.Closest(key, slices.Sorted(maps.Keys(in.keys))); best != "" {
		return fmt.Sprintf(" (did you mean %s?)", best)
	}
	return ""
}
