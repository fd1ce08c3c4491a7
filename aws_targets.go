package pipes

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/target/cloudwatchlogs"
	"github.com/pipesproject/pipes/target/eventbridge"
	"github.com/pipesproject/pipes/target/firehose"
	"github.com/pipesproject/pipes/target/kinesis"
	"github.com/pipesproject/pipes/target/lambdatarget"
	"github.com/pipesproject/pipes/target/sns"
	"github.com/pipesproject/pipes/target/sqstarget"
	"github.com/pipesproject/pipes/target/stepfunctions"
)

// The AWS targets (`type: sqs | sns | eventbridge | lambda | kinesis |
// firehose | stepfunctions | cloudwatch_logs`): each is built
// from its `target:` block, counts every AWS call of the pipe by operation
// in the metrics, logs with the pipe's name, and bounds each call by the
// block's timeout.

func newSQSTarget(ctx context.Context, s config.Pipe, env *Env) (pipe.Target, error) {
	return awsTarget(ctx, s, s.Target, env, s.Target.InputTemplate != "")
}

func newSNSTarget(ctx context.Context, s config.Pipe, env *Env) (pipe.Target, error) {
	return awsTarget(ctx, s, s.Target, env, s.Target.InputTemplate != "")
}

func newEventBridgeTarget(ctx context.Context, s config.Pipe, env *Env) (pipe.Target, error) {
	return awsTarget(ctx, s, s.Target, env, s.Target.InputTemplate != "")
}

func newLambdaTarget(ctx context.Context, s config.Pipe, env *Env) (pipe.Target, error) {
	return awsTarget(ctx, s, s.Target, env, s.Target.InputTemplate != "")
}

// newAWSTarget builds the AWS target of a pipe's `target:` block.
func newAWSTarget(ctx context.Context, s config.Pipe, env *Env) (pipe.Target, error) {
	return awsTarget(ctx, s, s.Target, env, s.Target.InputTemplate != "")
}

// awsTarget builds the AWS target t of pipe s: its `target:` or the target
// of its `dead_letter:`. paramsFromRecord renders the templated parameters
// (message group and deduplication ids, bus, source, detail type) against
// the source record rather than the payload: true when an input template
// has replaced the payload, and for a dead-letter target, whose payload is
// the raw body. It does no network I/O.
func awsTarget(ctx context.Context, s config.Pipe, t config.Target, env *Env, paramsFromRecord bool) (pipe.Target, error) {
	return buildAWSTarget(ctx, s, t, env, paramsFromRecord, nil)
}

// buildAWSTarget is awsTarget with an AWS configuration to use instead of
// the default chain (nil: the default chain).
func buildAWSTarget(ctx context.Context, s config.Pipe, t config.Target, env *Env, paramsFromRecord bool, awsCfg *aws.Config) (pipe.Target, error) {
	m, name := env.Metrics, s.Name
	onCall := func(op string) { m.CountCall(name, op) }
	logger := env.Logger.With("pipe", name)
	vars := templateVars(s)
	switch t.Type {
	case "sqs":
		offload, err := sqsOffload(ctx, s, t, env, awsCfg)
		if err != nil {
			return nil, err
		}
		return sqstarget.New(ctx, sqstarget.Config{
			Offload:                offload,
			QueueURL:               t.QueueURL,
			MessageGroupID:         t.MessageGroupID,
			MessageDeduplicationID: t.MessageDeduplicationID,
			Vars:                   vars,
			ParamsFromRecord:       paramsFromRecord,
			Region:                 t.Region,
			Endpoint:               t.Endpoint,
			Timeout:                t.Timeout,
			OnCall:                 onCall,
			Logger:                 logger,
			AWSConfig:              awsCfg,
		})
	case "sns":
		return sns.New(ctx, sns.Config{
			TopicARN:               t.TopicARN,
			MessageGroupID:         t.MessageGroupID,
			MessageDeduplicationID: t.MessageDeduplicationID,
			Vars:                   vars,
			ParamsFromRecord:       paramsFromRecord,
			Region:                 t.Region,
			Endpoint:               t.Endpoint,
			Timeout:                t.Timeout,
			OnCall:                 onCall,
			Logger:                 logger,
			AWSConfig:              awsCfg,
		})
	case "eventbridge":
		return eventbridge.New(ctx, eventbridge.Config{
			EventBusName:     t.EventBusName,
			Source:           t.EventSource,
			DetailType:       t.DetailType,
			EventSource:      eventSourceOf(s.Source.Type),
			Resources:        t.Resources,
			Time:             t.Time,
			EndpointID:       t.EndpointID,
			Vars:             vars,
			ParamsFromRecord: paramsFromRecord,
			Region:           t.Region,
			Endpoint:         t.Endpoint,
			Timeout:          t.Timeout,
			OnCall:           onCall,
			Logger:           logger,
			AWSConfig:        awsCfg,
		})
	case "lambda":
		return lambdatarget.New(ctx, lambdatarget.Config{
			FunctionName:   t.FunctionName,
			InvocationType: t.InvocationType,
			Region:         t.Region,
			Endpoint:       t.Endpoint,
			Timeout:        t.Timeout,
			OnCall:         onCall,
			Logger:         logger,
			AWSConfig:      awsCfg,
		})
	case "kinesis":
		return kinesis.New(ctx, kinesis.Config{
			Stream:           t.Stream,
			PartitionKey:     t.PartitionKey,
			Vars:             vars,
			ParamsFromRecord: paramsFromRecord,
			Region:           t.Region,
			Endpoint:         t.Endpoint,
			Timeout:          t.Timeout,
			OnCall:           onCall,
			Logger:           logger,
			AWSConfig:        awsCfg,
		})
	case "stepfunctions":
		return stepfunctions.New(ctx, stepfunctions.Config{
			StateMachineARN: t.StateMachineARN,
			InvocationType:  t.InvocationType,
			Region:          t.Region,
			Endpoint:        t.Endpoint,
			Timeout:         t.Timeout,
			OnCall:          onCall,
			Logger:          logger,
			AWSConfig:       awsCfg,
		})
	case "cloudwatch_logs":
		stream := t.LogStreamName
		if stream == "" {
			stream = s.Name
		}
		return cloudwatchlogs.New(ctx, cloudwatchlogs.Config{
			LogGroup:         t.LogGroupName,
			LogStream:        stream,
			Timestamp:        t.Timestamp,
			Vars:             vars,
			ParamsFromRecord: paramsFromRecord,
			Region:           t.Region,
			Endpoint:         t.Endpoint,
			Timeout:          t.Timeout,
			OnCall:           onCall,
			Logger:           logger,
			AWSConfig:        awsCfg,
		})
	case "firehose":
		return firehose.New(ctx, firehose.Config{
			DeliveryStream: t.DeliveryStream,
			Region:         t.Region,
			Endpoint:       t.Endpoint,
			Timeout:        t.Timeout,
			OnCall:         onCall,
			Logger:         logger,
			AWSConfig:      awsCfg,
		})
	}
	return nil, fmt.Errorf("target type %q is not an AWS target", t.Type)
}

// eventSourceOf is the eventSource of the records of a source type, for
// the EventBridge target's default detail-type.
func eventSourceOf(sourceType string) string {
	if sourceType == "rabbitmq" {
		return "aws:rmq"
	}
	return "aws:sqs"
}

// checkAWSTarget reports what the AWS target t (at field, e.g. "target" or
// "dead_letter") gets wrong beyond what config checks: templates that do
// not parse, a FIFO queue or topic without message_group_id, a
// deduplication id on a standard queue or topic. It does no I/O; other
// types pass.
func checkAWSTarget(s config.Pipe, field string, t config.Target) config.Errors {
	if !config.IsAWSTarget(t.Type) {
		return nil
	}
	// A region and no credentials: New then reads no AWS configuration.
	offline := &aws.Config{Region: "us-east-1"}
	_, err := buildAWSTarget(context.Background(), s, t, &Env{Metrics: pipe.NewMetrics(nil), Logger: slog.New(slog.DiscardHandler)}, false, offline)
	if err != nil {
		return located(err, field, t.Pos, t.KeyPos)
	}
	return nil
}
