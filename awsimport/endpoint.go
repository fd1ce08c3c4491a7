package awsimport

import (
	"strings"
)

// endpoint is a pipe's Source, Target or Enrichment: its kind, from the
// referenced resource's type or from the ARN, and what is known of it.
type endpoint struct {
	// kind is sqs, sns, lambda, bus, apidest, apigw, mq, smk, or an
	// unmappable kind's name (states, kinesis, ...).
	kind string
	// arn is the resolved text, ready for a pipes file (it may hold
	// `${ENV}` references); for a resource of the file it is resolved only
	// when asked for (text), so that no variable is asked for needlessly.
	arn  string
	raw  any
	path string
	// logical and res are the template resource it names, if any.
	logical string
	res     map[string]any
	// resource is the ARN's resource part ("orders", "function:f",
	// "event-bus/b", ...).
	resource string
	region   string
	account  string
}

// unmappable names the AWS services pipes has no source or target for,
// by ARN service.
var unmappable = map[string]string{
	"states":     "Step Functions state machine",
	"kinesis":    "Kinesis stream",
	"logs":       "CloudWatch Logs group",
	"firehose":   "Firehose delivery stream",
	"batch":      "Batch job queue",
	"ecs":        "ECS task",
	"redshift":   "Redshift Data API cluster or workgroup",
	"sagemaker":  "SageMaker pipeline",
	"timestream": "Timestream for LiveAnalytics table",
	"inspector":  "Inspector assessment template",
	"dynamodb":   "DynamoDB stream",
	"kafka":      "MSK (Kafka) cluster",
	"smk":        "self-managed Kafka cluster",
	"activemq":   "Amazon MQ for ActiveMQ broker",
	"mq":         "Amazon MQ broker",
	"unknown":    "resource of unknown kind",
}

// resourceKinds maps template resource types to endpoint kinds.
var resourceKinds = map[string]string{
	"AWS::SQS::Queue":                      "sqs",
	"AWS::SNS::Topic":                      "sns",
	"AWS::Lambda::Function":                "lambda",
	"AWS::Serverless::Function":            "lambda",
	"AWS::Lambda::Alias":                   "lambda",
	"AWS::Events::EventBus":                "bus",
	"AWS::Events::ApiDestination":          "apidest",
	"AWS::StepFunctions::StateMachine":     "states",
	"AWS::Serverless::StateMachine":        "states",
	"AWS::Kinesis::Stream":                 "kinesis",
	"AWS::Logs::LogGroup":                  "logs",
	"AWS::KinesisFirehose::DeliveryStream": "firehose",
	"AWS::Batch::JobQueue":                 "batch",
	"AWS::ECS::Cluster":                    "ecs",
	"AWS::ECS::TaskDefinition":             "ecs",
	"AWS::Redshift::Cluster":               "redshift",
	"AWS::SageMaker::Pipeline":             "sagemaker",
	"AWS::Timestream::Table":               "timestream",
	"AWS::Inspector::AssessmentTemplate":   "inspector",
	"AWS::DynamoDB::Table":                 "dynamodb",
	"AWS::MSK::Cluster":                    "kafka",
	"AWS::AmazonMQ::Broker":                "mq",
}

// endpointOf works out what v (a Source, Target or Enrichment value) is.
func (r *resolver) endpointOf(v any, path string) endpoint {
	var e endpoint
	if id, ok := r.resourceRef(v); ok {
		res := r.resources[id]
		e.logical, e.res = id, res
		e.kind = resourceKinds[resType(res)]
	}
	e.raw, e.path = v, path
	if e.res != nil && e.kind != "" {
		return e
	}
	e.arn = r.str(v, path)
	if e.kind == "" {
		e.kind = arnKind(e.arn)
	}
	if parts := strings.SplitN(e.arn, ":", 6); len(parts) == 6 && parts[0] == "arn" {
		e.region, e.account, e.resource = parts[3], parts[4], parts[5]
	}
	return e
}

// arnKind gives the endpoint kind of an ARN (or "smk" for a self-managed
// Kafka bootstrap address).
func arnKind(arn string) string {
	if strings.HasPrefix(arn, "smk://") {
		return "smk"
	}
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) < 6 || parts[0] != "arn" {
		return "unknown"
	}
	switch svc := parts[2]; svc {
	case "sqs", "sns", "lambda", "mq":
		return svc
	case "events":
		switch {
		case strings.HasPrefix(parts[5], "event-bus/"):
			return "bus"
		case strings.HasPrefix(parts[5], "api-destination/"):
			return "apidest"
		}
		return "unknown"
	case "execute-api":
		return "apigw"
	case "redshift-data", "redshift-serverless":
		return "redshift"
	default:
		if _, ok := unmappable[svc]; ok {
			return svc
		}
	}
	return "unknown"
}

// text is the endpoint's ARN (or other identifier) for a pipes file.
func (r *resolver) text(e *endpoint) string {
	if e.arn == "" && e.raw != nil {
		e.arn = r.str(e.raw, e.path)
	}
	return e.arn
}

// resourceRef returns the logical id of the template resource v names as a
// whole: `!Ref Res`, `!GetAtt Res.Attr`, or a `!Sub` (short or long form)
// that is just `${Res}` or `${Res.Attr}`, which name a resource exactly as
// Ref and GetAtt do (CloudFormation's Fn::Sub reference); in Sub's list
// form a variable of its own map is followed to its value. ok is false
// when v names no resource of the file.
func (r *resolver) resourceRef(v any) (string, bool) {
	for range maxDepth {
		name, arg, ok := intrinsic(v)
		if !ok {
			return "", false
		}
		id := ""
		switch name {
		case "Ref":
			id, _ = arg.(string)
		case "Fn::GetAtt":
			id, _ = getAttArgs(arg)
		case "Fn::Sub":
			text, _ := arg.(string)
			var vars map[string]any
			if l := list(arg); len(l) == 2 {
				text, _ = l[0].(string)
				vars = mapping(l[1])
			}
			text = strings.TrimSpace(text)
			ref, whole := strings.CutPrefix(text, "${")
			ref, whole2 := strings.CutSuffix(ref, "}")
			if !whole || !whole2 || strings.ContainsAny(ref, "${}") || strings.HasPrefix(ref, "!") {
				return "", false
			}
			if x, isVar := vars[ref]; isVar {
				v = x
				continue
			}
			if strings.HasPrefix(ref, "AWS::") {
				return "", false
			}
			id, _, _ = strings.Cut(ref, ".")
		default:
			return "", false
		}
		_, ok = r.resources[id]
		return id, ok
	}
	return "", false
}

// queueKind writes `fifo:` into an sqs source whose template queue (res)
// is named by a variable: the queue is FIFO only with FifoQueue true
// (AWS::SQS::Queue), which validate cannot tell from the variable. A
// FifoQueue that is not a literal (a condition not decided) writes
// nothing.
func queueKind(o *omap, res map[string]any) {
	v, has := mapping(res["Properties"])["FifoQueue"]
	switch x := v.(type) {
	case nil:
		if !has || v == nil {
			o.set("fifo", false)
		}
	case bool:
		o.set("fifo", x)
	case string:
		if strings.EqualFold(x, "true") || strings.EqualFold(x, "false") {
			o.set("fifo", isTrue(x))
		}
	}
}
