package awsimport

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// resolver gives CloudFormation values their text: --param first, then
// the template's own parameters and resources, and `${ENV}` references for
// what is known only at deploy time (recorded in env).
type resolver struct {
	params    map[string]string
	tmplParam map[string]any            // the template's Parameters
	resources map[string]map[string]any // logical id → resource
	env       map[string]bool           // variables the output reads
	lookupEnv func(string) (string, bool)
	notes     *[]Problem
	// conds is the template's Conditions section, condCache what is
	// known of each condition once evaluated.
	conds     map[string]any
	condCache map[string]*condition
	// skipped are the resources whose Condition is false, by logical id,
	// with the condition's name: CloudFormation does not create them.
	skipped map[string]string
}

// envRef records and returns a `${NAME}` reference, or the variable's
// value when the import resolves the environment (Options.LookupEnv).
func (r *resolver) envRef(name string) string {
	if r.lookupEnv != nil {
		if v, ok := r.lookupEnv(name); ok {
			return escape(v)
		}
	}
	r.env[name] = true
	return "${" + name + "}"
}

// paramFromEnv is a template parameter's value from the environment,
// when the import resolves it (Options.LookupEnv): the variable of the
// parameter's own name (QueueUrl), else of its Result.Env name
// (QUEUE_URL). It wins over the parameter's Default; --param wins over it.
func (r *resolver) paramFromEnv(name string) (string, bool) {
	if r.lookupEnv == nil {
		return "", false
	}
	for _, n := range []string{name, envName(name)} {
		if v, ok := r.lookupEnv(n); ok {
			return v, true
		}
	}
	return "", false
}

// envName turns names like "OrdersQueue" and "Arn" into ORDERS_QUEUE_ARN.
func envName(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		if b.Len() > 0 {
			b.WriteByte('_')
		}
		prevLower := false
		for _, c := range p {
			switch {
			case unicode.IsUpper(c):
				if prevLower {
					b.WriteByte('_')
				}
				b.WriteRune(c)
				prevLower = false
			case unicode.IsLower(c) || unicode.IsDigit(c):
				b.WriteRune(unicode.ToUpper(c))
				prevLower = true
			default:
				if s := b.String(); s != "" && !strings.HasSuffix(s, "_") {
					b.WriteByte('_')
				}
				prevLower = false
			}
		}
	}
	s := strings.Trim(b.String(), "_")
	if s == "" || unicode.IsDigit(rune(s[0])) {
		s = "V_" + s
	}
	return s
}

// escape makes literal text safe in a pipes file, where `${` starts an
// environment reference.
func escape(s string) string { return strings.ReplaceAll(s, "${", "$${") }

// str resolves v to text for a pipes file (literal `${` escaped). A value
// that cannot be resolved becomes a `${ENV}` reference named after path,
// with a note.
func (r *resolver) str(v any, path string) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return escape(x)
	case bool:
		return strconv.FormatBool(x)
	case int:
		return strconv.Itoa(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	name, arg, ok := intrinsic(v)
	if !ok {
		*r.notes = append(*r.notes, Problem{Path: path, Msg: "expected a string, got a " + typeName(v) + "; left as an environment variable"})
		return r.envRef(envName(lastPart(path)))
	}
	switch name {
	case "Ref":
		s, _ := arg.(string)
		return r.ref(s, path)
	case "Fn::GetAtt":
		res, attr := getAttArgs(arg)
		return r.getAtt(res, attr, path)
	case "Fn::Sub":
		return r.sub(arg, path)
	case "Fn::Join":
		l := list(arg)
		if len(l) == 2 {
			sep := r.str(l[0], path)
			var parts []string
			for i, e := range r.items(l[1], path) {
				parts = append(parts, r.str(e, fmt.Sprintf("%s.Fn::Join[1][%d]", path, i)))
			}
			return strings.Join(parts, sep)
		}
	case "Fn::Select":
		l := list(arg)
		if len(l) == 2 {
			idx, err := strconv.Atoi(r.str(l[0], path))
			items := r.items(l[1], path)
			if err == nil && idx >= 0 && idx < len(items) {
				return r.str(items[idx], fmt.Sprintf("%s.Fn::Select[1][%d]", path, idx))
			}
		}
	case "Fn::If":
		// Fn::If whose condition is decided is replaced before (decideIfs);
		// here when it cannot be decided.
		if chosen, ok, _, _ := r.pickIf(arg); ok {
			if isNoValue(chosen) {
				return ""
			}
			return r.str(chosen, path)
		}
		return r.undecidedIf(arg, path)
	case "Fn::ImportValue":
		// Another stack's output: --param gives it by its export name.
		export := unescape(r.str(arg, path))
		if v, ok := r.params[export]; ok {
			return escape(v)
		}
		return r.envRef(envName(export))
	}
	*r.notes = append(*r.notes, Problem{Path: path, Msg: name + " cannot be resolved here; left as an environment variable"})
	return r.envRef(envName(lastPart(path)))
}

// items returns the list v stands for: a list, Fn::Split of a string, or a
// comma-separated parameter.
func (r *resolver) items(v any, path string) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	name, arg, ok := intrinsic(v)
	switch {
	case ok && name == "Fn::Split":
		l := list(arg)
		if len(l) == 2 {
			sep := unescape(r.str(l[0], path))
			var out []any
			for _, p := range strings.Split(unescape(r.str(l[1], path)), sep) {
				out = append(out, p)
			}
			return out
		}
	case ok && name == "Ref":
		s, _ := arg.(string)
		var out []any
		for _, p := range strings.Split(unescape(r.ref(s, path)), ",") {
			out = append(out, p)
		}
		return out
	}
	return []any{v}
}

func unescape(s string) string { return strings.ReplaceAll(s, "$${", "${") }

func getAttArgs(arg any) (res, attr string) {
	switch x := arg.(type) {
	case string:
		res, attr, _ = strings.Cut(x, ".")
	case []any:
		if len(x) == 2 {
			res, _ = x[0].(string)
			attr, _ = x[1].(string)
		}
	}
	return res, attr
}

func lastPart(path string) string {
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[i+1:]
	}
	return path
}

func typeName(v any) string {
	switch v.(type) {
	case map[string]any:
		return "mapping"
	case []any:
		return "list"
	}
	return fmt.Sprintf("%T", v)
}

// pseudo gives AWS's pseudo parameters (AWS::Region, ...).
func (r *resolver) pseudo(name string) (string, bool) {
	if v, ok := r.params[name]; ok {
		return escape(v), true
	}
	switch name {
	case "AWS::Region":
		return r.envRef("AWS_REGION"), true
	case "AWS::AccountId":
		return r.envRef("AWS_ACCOUNT_ID"), true
	case "AWS::StackName":
		return r.envRef("STACK_NAME"), true
	case "AWS::StackId":
		return r.envRef("STACK_ID"), true
	case "AWS::Partition":
		return "aws", true
	case "AWS::URLSuffix":
		return "amazonaws.com", true
	case "AWS::NoValue":
		return "", true
	}
	return "", false
}

// ref resolves {"Ref": name}.
func (r *resolver) ref(name, path string) string {
	if v, ok := r.params[name]; ok {
		return escape(v)
	}
	if strings.HasPrefix(name, "AWS::") {
		if v, ok := r.pseudo(name); ok {
			return v
		}
	}
	if p, ok := r.tmplParam[name]; ok {
		if v, ok := r.paramFromEnv(name); ok {
			return escape(v)
		}
		if def, has := mapping(p)["Default"]; has {
			if l, isList := def.([]any); isList {
				parts := make([]string, len(l))
				for i, e := range l {
					parts[i] = r.str(e, path)
				}
				return strings.Join(parts, ",")
			}
			return r.str(def, path)
		}
		return r.envRef(envName(name))
	}
	if res, ok := r.resources[name]; ok {
		return r.resourceValue(name, res, "", path)
	}
	if cond, ok := r.skipped[name]; ok {
		r.noteOnce(path, fmt.Sprintf("Ref %s names a resource whose Condition %s is false with these parameters (CloudFormation does not create it); left as an environment variable", name, cond))
		return r.envRef(envName(baseID(name)))
	}
	*r.notes = append(*r.notes, Problem{Path: path, Msg: fmt.Sprintf("Ref %s names no parameter or resource of the file; left as an environment variable", name)})
	return r.envRef(envName(name))
}

// getAtt resolves {"Fn::GetAtt": [res, attr]}.
func (r *resolver) getAtt(res, attr, path string) string {
	if v, ok := r.params[res+"."+attr]; ok {
		return escape(v)
	}
	if rs, ok := r.resources[res]; ok {
		return r.resourceValue(res, rs, attr, path)
	}
	if cond, ok := r.skipped[res]; ok {
		r.noteOnce(path, fmt.Sprintf("GetAtt %s.%s names a resource whose Condition %s is false with these parameters (CloudFormation does not create it); left as an environment variable", res, attr, cond))
		return r.envRef(envName(baseID(res), attr))
	}
	*r.notes = append(*r.notes, Problem{Path: path, Msg: fmt.Sprintf("GetAtt %s.%s names no resource of the file; left as an environment variable", res, attr)})
	return r.envRef(envName(res, attr))
}

// prop resolves a resource property, "" when absent.
func (r *resolver) prop(res map[string]any, key, path string) string {
	v, ok := mapping(res["Properties"])[key]
	if !ok {
		return ""
	}
	return r.str(v, path+".Properties."+key)
}

func resType(res map[string]any) string {
	t, _ := res["Type"].(string)
	return t
}

// resourceValue is what Ref (attr "") or GetAtt gives for a resource of the
// template, from its properties where they tell, else a `${ENV}` reference.
func (r *resolver) resourceValue(id string, res map[string]any, attr, path string) string {
	rpath := "Resources." + id
	// ra is ":region:account:" of an ARN, asked for only when used.
	ra := func() string {
		region, _ := r.pseudo("AWS::Region")
		account, _ := r.pseudo("AWS::AccountId")
		return ":" + region + ":" + account + ":"
	}
	id = baseID(id)
	named := func(key, suffix string) (string, bool) {
		if n := r.prop(res, key, rpath); n != "" {
			return n, true
		}
		return r.envRef(envName(id, suffix)), false
	}
	switch resType(res) {
	case "AWS::SQS::Queue":
		name := r.queueName(res, rpath)
		switch attr {
		case "", "QueueUrl":
			if name == "" {
				return r.envRef(envName(id, "QueueUrl"))
			}
			region, _ := r.pseudo("AWS::Region")
			account, _ := r.pseudo("AWS::AccountId")
			return "https://sqs." + region + ".amazonaws.com/" + account + "/" + name
		case "Arn":
			if name == "" {
				return r.envRef(envName(id, "Arn"))
			}
			return "arn:aws:sqs" + ra() + name
		case "QueueName":
			if name == "" {
				return r.envRef(envName(id, "QueueName"))
			}
			return name
		}
	case "AWS::SNS::Topic":
		name := r.prop(res, "TopicName", rpath)
		if name != "" && isTrue(mapping(res["Properties"])["FifoTopic"]) && !strings.HasSuffix(name, ".fifo") {
			name += ".fifo"
		}
		switch attr {
		case "", "TopicArn":
			if name == "" {
				return r.envRef(envName(id, "TopicArn"))
			}
			return "arn:aws:sns" + ra() + name
		case "TopicName":
			if name == "" {
				return r.envRef(envName(id, "TopicName"))
			}
			return name
		}
	case "AWS::Lambda::Function", "AWS::Serverless::Function":
		name, ok := named("FunctionName", "FunctionName")
		switch attr {
		case "":
			return name
		case "Arn":
			if !ok {
				return r.envRef(envName(id, "Arn"))
			}
			return "arn:aws:lambda" + ra() + "function:" + name
		}
	case "AWS::Lambda::Alias":
		// Ref and Arn of an alias are the function's ARN with the alias;
		// Lambda's Invoke takes "function:alias" as well.
		fn := r.prop(res, "FunctionName", rpath)
		alias := r.prop(res, "Name", rpath)
		if attr == "" || attr == "Arn" || attr == "AliasArn" {
			if fn == "" || alias == "" {
				return r.envRef(envName(id, "Arn"))
			}
			return fn + ":" + alias
		}
	case "AWS::Events::EventBus":
		name, _ := named("Name", "Name")
		switch attr {
		case "", "Name":
			return name
		case "Arn":
			return "arn:aws:events" + ra() + "event-bus/" + name
		}
	case "AWS::Kinesis::Stream", "AWS::KinesisFirehose::DeliveryStream":
		key, prefix := "Name", "arn:aws:kinesis"+ra()+"stream/"
		if resType(res) == "AWS::KinesisFirehose::DeliveryStream" {
			key, prefix = "DeliveryStreamName", "arn:aws:firehose"+ra()+"deliverystream/"
		}
		name, ok := named(key, key)
		switch attr {
		case "", key:
			return name
		case "Arn":
			if !ok {
				return r.envRef(envName(id, "Arn"))
			}
			return prefix + name
		}
	case "AWS::StepFunctions::StateMachine", "AWS::Serverless::StateMachine":
		// Ref and Arn are the state machine's ARN.
		key := "StateMachineName"
		if resType(res) == "AWS::Serverless::StateMachine" {
			key = "Name"
		}
		switch attr {
		case "", "Arn":
			name := r.prop(res, key, rpath)
			if name == "" {
				return r.envRef(envName(id, "Arn"))
			}
			return "arn:aws:states" + ra() + "stateMachine:" + name
		case "Name":
			name, _ := named(key, "Name")
			return name
		}
	case "AWS::Logs::LogGroup":
		// Ref is the log group's name.
		name, ok := named("LogGroupName", "LogGroupName")
		switch attr {
		case "", "LogGroupName":
			return name
		case "Arn":
			if !ok {
				return r.envRef(envName(id, "Arn"))
			}
			return "arn:aws:logs" + ra() + "log-group:" + name + ":*"
		}
	case "AWS::ApiGateway::Stage":
		// Ref is the stage's name (an execute-api ARN's stage part).
		if attr == "" {
			if name := r.prop(res, "StageName", rpath); name != "" {
				return name
			}
		}
	case "AWS::Events::ApiDestination", "AWS::Events::Connection":
		prefix := "api-destination/"
		if resType(res) == "AWS::Events::Connection" {
			prefix = "connection/"
		}
		name, ok := named("Name", "Name")
		switch attr {
		case "", "Name":
			return name
		case "Arn":
			if !ok {
				return r.envRef(envName(id, "Arn"))
			}
			return "arn:aws:events" + ra() + prefix + name
		}
	}
	if attr == "" {
		return r.envRef(envName(id))
	}
	return r.envRef(envName(id, attr))
}

// queueName is an SQS queue resource's QueueName (with the .fifo that
// FifoQueue requires), "" when the template leaves it to CloudFormation.
func (r *resolver) queueName(res map[string]any, rpath string) string {
	name := r.prop(res, "QueueName", rpath)
	if name != "" && isTrue(mapping(res["Properties"])["FifoQueue"]) && !strings.HasSuffix(name, ".fifo") {
		name += ".fifo"
	}
	return name
}

func isTrue(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case string:
		return strings.EqualFold(x, "true")
	}
	return false
}

// sub resolves Fn::Sub: "text ${Name} ${Res.Attr} ${!Literal}", or
// [text, {Name: value}].
func (r *resolver) sub(arg any, path string) string {
	text, _ := arg.(string)
	vars := map[string]any{}
	if l := list(arg); len(l) == 2 {
		text, _ = l[0].(string)
		vars = mapping(l[1])
	}
	var b strings.Builder
	for {
		i := strings.Index(text, "${")
		if i < 0 {
			b.WriteString(escape(text))
			break
		}
		b.WriteString(escape(text[:i]))
		end := strings.IndexByte(text[i:], '}')
		if end < 0 {
			b.WriteString(escape(text[i:]))
			break
		}
		name := text[i+2 : i+end]
		text = text[i+end+1:]
		switch {
		case strings.HasPrefix(name, "!"):
			b.WriteString("$${" + name[1:] + "}")
		case vars[name] != nil:
			b.WriteString(r.str(vars[name], path+".Fn::Sub[1]."+name))
		case strings.Contains(name, ".") && !strings.HasPrefix(name, "AWS::"):
			res, attr, _ := strings.Cut(name, ".")
			b.WriteString(r.getAtt(res, attr, path))
		default:
			b.WriteString(r.ref(name, path))
		}
	}
	return b.String()
}

// sortedEnv returns the recorded variables in order.
func (r *resolver) sortedEnv() []string {
	out := make([]string, 0, len(r.env))
	for k := range r.env {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
