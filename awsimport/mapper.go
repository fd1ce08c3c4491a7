package awsimport

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/pipesproject/pipes/filter"
	"github.com/pipesproject/pipes/template"
)

// mapper converts one pipe definition.
type mapper struct {
	r    *resolver
	res  *Result
	base string // path of the definition in the input ("" at the top)
	name string // the pipe's name, for variable names
	// wholeID names the pipe by its whole logical id, CDK's hash kept:
	// another pipe would get the same name without it.
	wholeID bool
	// dropped is set when the pipe as a whole cannot be imported.
	dropped bool
	// invalid are problems found while mapping that `pipes validate`
	// would refuse (the pipe is left out once it is checked).
	invalid []Problem
	// rateLimit is the lowest InvocationRateLimitPerSecond of the pipe's
	// API destinations (0: none), and rateFrom where it was read.
	rateLimit int
	rateFrom  string
}

// at is the input path of a property of the definition.
func (m *mapper) at(keys ...string) string {
	p := m.base
	if p != "" {
		p += ".Properties"
	}
	for _, k := range keys {
		if p != "" && !strings.HasPrefix(k, "[") {
			p += "."
		}
		p += k
	}
	return p
}

func (m *mapper) leftOut(path, format string, args ...any) {
	m.res.LeftOut = append(m.res.LeftOut, Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (m *mapper) note(path, format string, args ...any) {
	m.res.Notes = append(m.res.Notes, Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// drop leaves the whole pipe out.
func (m *mapper) drop(path, format string, args ...any) {
	m.dropped = true
	m.leftOut(path, format+"; the pipe is not imported", args...)
}

// validName is Pipes' rule for pipe names (the API's Name pattern).
var validName = regexp.MustCompile(`^[.\-_A-Za-z0-9]{1,64}$`)
var badNameChars = regexp.MustCompile(`[^.\-_A-Za-z0-9]+`)

// pipeName works out the pipe's name: Name, where `${AWS::StackName}-`
// in front is dropped (unless --param gives the stack's name), else the
// logical id.
func (m *mapper) pipeName(props map[string]any, logical string) string {
	raw, has := props["Name"]
	name := ""
	if has {
		if fn, arg, ok := intrinsic(raw); ok && fn == "Fn::Sub" {
			text, _ := arg.(string)
			if l := list(arg); len(l) == 2 {
				text, _ = l[0].(string)
			}
			if rest, cut := strings.CutPrefix(text, "${AWS::StackName}"); cut && m.r.params["AWS::StackName"] == "" {
				if rest = strings.TrimLeft(rest, "-_."); rest != "" {
					sub := any(rest)
					if l := list(arg); len(l) == 2 {
						sub = []any{rest, l[1]}
					}
					raw = map[string]any{"Fn::Sub": sub}
				}
			}
		}
		name = unescape(m.r.str(raw, m.at("Name")))
	}
	if name == "" || strings.Contains(name, "${") {
		short := baseID(logical)
		if m.wholeID {
			short = logical
		}
		if has {
			m.note(m.at("Name"), "the name is known only at deploy time; the pipe is named %q", cmp.Or(short, "pipe"))
		}
		name = cmp.Or(short, "pipe")
	}
	if !validName.MatchString(name) {
		fixed := strings.Trim(badNameChars.ReplaceAllString(name, "-"), "-")
		if len(fixed) > 64 {
			fixed = fixed[:64]
		}
		fixed = cmp.Or(fixed, "pipe")
		m.note(m.at("Name"), "%q is not a valid pipe name; named %q", name, fixed)
		name = fixed
	}
	return name
}

// pipe converts one pipe; nil when it cannot be imported at all.
func (m *mapper) pipe(props map[string]any, logical string) (*yaml.Node, string) {
	if props == nil {
		m.leftOut(m.base, "the pipe has no Properties; not imported")
		return nil, ""
	}
	m.name = m.pipeName(props, logical)
	m.unknownKeys(props)
	p := newMap()
	p.set("name", m.name)
	src := m.source(props)
	filter := m.filter(props)
	enrichment := m.enrichment(props)
	target := m.target(props)
	logging := m.logging(props)
	if m.dropped {
		return nil, ""
	}
	if m.rateLimit > 0 {
		// InvocationRateLimitPerSecond caps the calls per second to the
		// API destination. pipes has no such key on an http stage; the
		// source's rate_limit caps the messages received per second, and
		// with batch: false each message makes at most one call, so the
		// calls per second stay at or below it as well.
		src.set("rate_limit", m.rateLimit)
		m.note(m.rateFrom, "the API destination's %d invocations per second are the source's rate_limit: at most %d messages are received per second, each making at most one call (batch: false)", m.rateLimit, m.rateLimit)
	}
	p.set("source", src)
	if filter != nil {
		p.set("filter", filter)
	}
	if enrichment != nil {
		p.set("enrichment", enrichment)
	}
	p.set("target", target)
	if logging != nil {
		p.set("logging", logging)
	}
	if s, ok := props["DesiredState"].(string); ok && s == "STOPPED" {
		m.note(m.at("DesiredState"), "the pipe is STOPPED in AWS; pipes runs it when started")
	}
	return p.n, m.name
}

// number sets key to an integer property of params (resolved), as an
// integer when it is one.
func (m *mapper) number(o *omap, key string, params map[string]any, prop, path string) (int, bool) {
	v, ok := params[prop]
	if !ok {
		return 0, false
	}
	s := m.r.str(v, path+"."+prop)
	if n, err := strconv.Atoi(s); err == nil {
		o.set(key, n)
		return n, true
	}
	o.set(key, s)
	return 0, false
}

// unmappableSources are the source parameter blocks of sources pipes
// cannot read.
var unmappableSources = map[string]string{
	"ActiveMQBrokerParameters":        "an Amazon MQ for ActiveMQ broker",
	"DynamoDBStreamParameters":        "a DynamoDB stream",
	"KinesisStreamParameters":         "a Kinesis stream",
	"ManagedStreamingKafkaParameters": "an MSK (Kafka) cluster",
	"SelfManagedKafkaParameters":      "a self-managed Kafka cluster",
}

func (m *mapper) source(props map[string]any) *omap {
	sp := mapping(props["SourceParameters"])
	for _, k := range sortedKeys(sp) {
		if what, ok := unmappableSources[k]; ok {
			m.drop(m.at("SourceParameters", k), "the source is %s, which pipes cannot read", what)
			return nil
		}
	}
	path := m.at("Source")
	if props["Source"] == nil {
		m.drop(path, "the pipe has no Source")
		return nil
	}
	e := m.r.endpointOf(props["Source"], path)
	o := newMap()
	switch e.kind {
	case "sqs":
		o.set("type", "sqs")
		switch {
		case e.res != nil:
			q := m.r.queueName(e.res, "Resources."+e.logical)
			if q != "" {
				o.set("queue_name", q)
			} else {
				q = m.r.resourceValue(e.logical, e.res, "QueueUrl", path)
				o.set("queue_url", q)
			}
			if strings.Contains(q, "${") {
				queueKind(o, e.res)
			}
		default:
			o.set("queue_arn", e.arn)
		}
		m.setRegion(o, e)
		qp := mapping(sp["SqsQueueParameters"])
		qpath := m.at("SourceParameters", "SqsQueueParameters")
		m.number(o, "batch_size", qp, "BatchSize", qpath)
		m.window(o, qp, qpath)
	case "mq":
		rp := mapping(sp["RabbitMQBrokerParameters"])
		if rp == nil {
			m.drop(path, "an Amazon MQ broker without RabbitMQBrokerParameters (ActiveMQ) is not a source pipes can read")
			return nil
		}
		rpath := m.at("SourceParameters", "RabbitMQBrokerParameters")
		o.set("type", "rabbitmq")
		vhost := m.r.str(rp["VirtualHost"], rpath+".VirtualHost")
		prefix := envName(m.name) + "_RABBITMQ"
		// Amazon MQ speaks AMQP over TLS on 5671; a local broker may
		// override the scheme and port.
		u := "${" + prefix + "_SCHEME:-amqps}://" + m.r.envRef(prefix+"_USER") + ":" + m.r.envRef(prefix+"_PASSWORD") + "@" + m.r.envRef(prefix+"_HOST") + ":${" + prefix + "_PORT:-5671}/"
		switch {
		case vhost == "" || vhost == "/":
		case strings.Contains(vhost, "${"):
			u += vhost
		default:
			u += escape(url.PathEscape(unescape(vhost)))
		}
		o.set("url", u)
		m.note(rpath+".Credentials", "the broker's user name and password (the BasicAuth secret) are read from %s_USER and %s_PASSWORD (percent-encoded), its host from %s_HOST; %s_SCHEME (amqps) and %s_PORT (5671) may change the rest", prefix, prefix, prefix, prefix, prefix)
		o.set("queue", m.r.str(rp["QueueName"], rpath+".QueueName"))
		m.number(o, "batch_size", rp, "BatchSize", rpath)
		m.window(o, rp, rpath)
	default:
		m.unsupported(path, "source", "read", e)
		return nil
	}
	return o
}

func (m *mapper) window(o *omap, params map[string]any, path string) {
	v, ok := params["MaximumBatchingWindowInSeconds"]
	if !ok {
		return
	}
	s := m.r.str(v, path+".MaximumBatchingWindowInSeconds")
	if n, err := strconv.Atoi(s); err == nil {
		o.set("batch_window", strconv.Itoa(n)+"s")
		return
	}
	o.set("batch_window", s+"s")
}

// unsupported leaves the pipe out for a source, enrichment or target
// (role) pipes has no counterpart of, or whose kind is unknown here.
func (m *mapper) unsupported(path, role, verb string, e endpoint) {
	if e.kind == "unknown" && strings.HasPrefix(e.arn, "${") && strings.HasSuffix(e.arn, "}") {
		id, _ := m.r.resourceRef(e.raw)
		if _, isParam := m.r.tmplParam[id]; id != "" && m.r.resources[id] == nil && !isParam && !strings.HasPrefix(id, "AWS::") {
			// A snippet, or a resource of another stack: its kind would
			// come from the ARN it has once deployed.
			m.drop(path, "the %s names %s, which is not a resource of this file, so its kind is not known: give its ARN with --param (%s=arn:… for a Ref, %s.Arn=arn:… for a GetAtt), or set %s for `pipes run --aws`", role, id, id, id, strings.Trim(e.arn, "${}"))
			return
		}
		m.drop(path, "the %s is known only at deploy time (%s) and its kind comes from its ARN: give it with --param, or set %s for `pipes run --aws`", role, e.arn, strings.Trim(e.arn, "${}"))
		return
	}
	m.drop(path, "the %s is %s, which pipes cannot %s", role, describe(e), verb)
}

// describe names an endpoint for messages.
func describe(e endpoint) string {
	what := cmp.Or(unmappable[e.kind], e.kind)
	if strings.ContainsRune("AEIOUaeiou", rune(what[0])) {
		what = "an " + what
	} else {
		what = "a " + what
	}
	if e.logical != "" {
		return fmt.Sprintf("%s (resource %s, %s)", what, e.logical, resType(e.res))
	}
	return fmt.Sprintf("%s (%s)", what, unescape(e.arn))
}

func (m *mapper) filter(props map[string]any) *omap {
	fc := mapping(mapping(props["SourceParameters"])["FilterCriteria"])
	filters := list(fc["Filters"])
	if len(filters) == 0 {
		return nil
	}
	seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	for i, f := range filters {
		path := m.at("SourceParameters", "FilterCriteria", "Filters", fmt.Sprintf("[%d]", i), "Pattern")
		text := unescape(m.r.str(mapping(f)["Pattern"], path))
		var compact bytes.Buffer
		if json.Compact(&compact, []byte(withoutVars(text))) == nil && compact.Len() > filter.MaxPatternLength {
			// Refused before it is made YAML, which a pattern of
			// megabytes would make slow; validate would refuse it. The
			// rest of the pipe is still checked, so that every problem
			// is named.
			m.invalid = append(m.invalid, Problem{Path: path, Msg: fmt.Sprintf("the pattern is %d characters long as JSON; at most %d are allowed (Pipes' limit); the pipe is not imported", compact.Len(), filter.MaxPatternLength)})
			continue
		}
		var doc yaml.Node
		if !json.Valid([]byte(text)) || yaml.Unmarshal([]byte(text), &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
			m.drop(path, "the pattern is not a JSON object")
			return nil
		}
		n := doc.Content[0]
		blockStyle(n)
		seq.Content = append(seq.Content, n)
	}
	if len(seq.Content) == 0 {
		return nil
	}
	o := newMap()
	o.set("patterns", seq)
	return o
}

// blockStyle makes a node read from JSON print as block YAML; strings
// keep whatever quoting they need, and `${` in them is escaped.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		n.Value = escape(n.Value)
	}
	n.Line, n.Column = 0, 0
	for _, c := range n.Content {
		blockStyle(c)
	}
	if n.Kind == yaml.SequenceNode {
		flow := true
		for _, c := range n.Content {
			flow = flow && c.Kind == yaml.ScalarNode
		}
		if flow {
			n.Style = yaml.FlowStyle
		}
	}
}

func (m *mapper) enrichment(props map[string]any) *omap {
	v := props["Enrichment"]
	if v == nil || v == "" {
		return nil
	}
	path := m.at("Enrichment")
	ep := mapping(props["EnrichmentParameters"])
	e := m.r.endpointOf(v, path)
	o := newMap()
	switch e.kind {
	case "lambda":
		o.set("type", "lambda")
		o.set("function_name", m.functionName(e, path))
		m.setRegion(o, e)
	case "states":
		// Pipes runs an enrichment state machine synchronously (express
		// workflows only).
		o.set("type", "stepfunctions")
		o.set("state_machine_arn", m.stateMachineARN(e, path))
		m.setRegion(o, e)
		m.standardWorkflow(e, path, "an enrichment")
	case "apidest", "apigw":
		o.set("type", "http")
		m.http(o, e, mapping(ep["HttpParameters"]), m.at("EnrichmentParameters", "HttpParameters"))
		// Pipes: "API Gateway / API destination enrichments require batch
		// size 1" (SPEC §5.2): one call per record.
		o.set("batch", false)
	default:
		m.unsupported(path, "enrichment", "call", e)
		return nil
	}
	if t, ok := ep["InputTemplate"]; ok {
		m.inputTemplate(o, t, m.at("EnrichmentParameters", "InputTemplate"))
	}
	return o
}

// inputTemplate writes the input template t (read at path) into o. A
// template whose text is over Pipes' limit even with every variable of it
// empty is refused here: the check of the written pipe does not judge a
// value made with a variable (it is a placeholder until deploy time), and
// validate would refuse the pipe once the variables are set.
func (m *mapper) inputTemplate(o *omap, t any, path string) {
	s := m.r.str(t, path)
	if s == "" {
		return
	}
	literal := withoutVars(s)
	if n := utf8.RuneCountInString(literal); n > template.MaxLen {
		what := "long"
		if literal != s {
			what = "long without its variables"
		}
		m.invalid = append(m.invalid, Problem{Path: path, Msg: fmt.Sprintf("the input template is %d characters %s; the limit is %d (Pipes' limit); the pipe is not imported", n, what, template.MaxLen)})
		return
	}
	o.set("input_template", s)
}

// varRef is a ${NAME} or ${NAME:-default} reference of a pipeline file.
var varRef = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*(:-[^}]*)?\}`)

// withoutVars is s with every variable reference taken out and $${ read
// as the ${ it writes: the shortest text s can expand to, whatever the
// variables hold.
func withoutVars(s string) string {
	if !strings.Contains(s, "${") {
		return s
	}
	var b strings.Builder
	for i, part := range strings.Split(s, "$${") {
		if i > 0 {
			b.WriteString("${")
		}
		b.WriteString(varRef.ReplaceAllString(part, ""))
	}
	return b.String()
}

// standardWorkflow notes a state machine of the file that is a STANDARD
// workflow (CloudFormation's default) where it is run synchronously, which
// only EXPRESS workflows allow: Step Functions refuses each call.
func (m *mapper) standardWorkflow(e endpoint, path, role string) {
	if e.res == nil {
		return
	}
	// AWS::StepFunctions::StateMachine names its kind StateMachineType;
	// SAM's AWS::Serverless::StateMachine names it Type.
	key := "StateMachineType"
	if resType(e.res) == "AWS::Serverless::StateMachine" {
		key = "Type"
	}
	if t := m.r.prop(e.res, key, "Resources."+e.logical); t == "" || t == "STANDARD" {
		m.note(path, "the state machine %s is a STANDARD workflow, which Step Functions does not run synchronously as %s: every call will fail (make it EXPRESS, or use invocation_type: FIRE_AND_FORGET for a target)", e.logical, role)
	}
}

// stateMachineARN is a state machine's ARN: from the template's resource,
// or as the pipe gives it.
func (m *mapper) stateMachineARN(e endpoint, path string) string {
	if e.res != nil {
		return m.r.resourceValue(e.logical, e.res, "Arn", path)
	}
	return m.r.text(&e)
}

// functionName is a Lambda function's name (from the template) or ARN.
func (m *mapper) functionName(e endpoint, path string) string {
	if e.res != nil {
		return m.r.resourceValue(e.logical, e.res, "", path)
	}
	return e.arn
}

var executeAPI = regexp.MustCompile(`^arn:[^:]+:execute-api:([^:]*):([^:]*):([^/]+)/([^/]+)/([^/]+)(/.*)?$`)

// http fills an http enrichment or target from an API destination or an
// API Gateway ARN and the HttpParameters.
func (m *mapper) http(o *omap, e endpoint, hp map[string]any, hpath string) {
	var rawURL, method string
	headers := map[string]string{}
	query := map[string]string{}
	switch e.kind {
	case "apidest":
		if e.res != nil {
			rpath := "Resources." + e.logical + ".Properties"
			rawURL = m.r.prop(e.res, "InvocationEndpoint", "Resources."+e.logical)
			method = unescape(m.r.prop(e.res, "HttpMethod", "Resources."+e.logical))
			if rawURL == "" {
				rawURL = m.r.envRef(envName(baseID(e.logical), "InvocationEndpoint"))
			}
			m.connection(mapping(e.res["Properties"])["ConnectionArn"], rpath+".ConnectionArn", headers, query)
			m.invocationRate(e, rpath)
		} else {
			id := envName(strings.Split(strings.TrimPrefix(e.resource, "api-destination/"), "/")[0])
			rawURL = m.r.envRef(id + "_URL")
			m.note(hpath, "the API destination %s is not in the file: its endpoint is read from %s_URL, its method taken as POST, and its connection's authorization must be added as a header", unescape(e.arn), id)
		}
	case "apigw":
		mm := executeAPI.FindStringSubmatch(e.arn)
		if mm == nil {
			m.drop(hpath, "the API Gateway ARN %s is not arn:aws:execute-api:region:account:api-id/stage/METHOD/path", unescape(e.arn))
			return
		}
		rawURL = "https://" + mm[3] + ".execute-api." + mm[1] + ".amazonaws.com/" + mm[4] + mm[6]
		method = mm[5]
		// Pipes calls API Gateway with the pipe's role: SigV4 for
		// execute-api, the region from the URL.
		o.set("auth", "aws_sigv4")
	}
	method = strings.ToUpper(method)
	switch method {
	case "GET", "POST", "PUT", "PATCH", "DELETE":
	case "", "*", "ANY":
		method = "POST"
	default:
		m.leftOut(hpath, "HTTP method %s is not one pipes sends; POST is used", method)
		method = "POST"
	}
	// PathParameterValues: "The path parameter values to be used to
	// populate API Gateway REST API or EventBridge ApiDestination path
	// wildcards ("*")." (API_PipeTargetHttpParameters)
	var pathParams []string
	for i, pv := range list(hp["PathParameterValues"]) {
		p := m.r.str(pv, fmt.Sprintf("%s.PathParameterValues[%d]", hpath, i))
		if isPath(p) {
			p = "<" + p + ">"
		}
		pathParams = append(pathParams, p)
	}
	if n := strings.Count(rawURL, "*"); len(pathParams) > 0 {
		switch {
		case n == len(pathParams):
			for _, p := range pathParams {
				j := strings.IndexByte(rawURL, '*')
				rawURL = rawURL[:j] + p + rawURL[j+1:]
			}
			pathParams = nil
		case strings.Contains(rawURL, "${"):
			// The endpoint is known only at run time: path_parameters
			// fill its `*` then, in order, as AWS does; pipes refuses to
			// start when their count differs.
		default:
			// Written as it is, the pipe would call the endpoint with a
			// literal '*' (or drop values AWS would send).
			m.invalid = append(m.invalid, Problem{Path: hpath + ".PathParameterValues", Msg: fmt.Sprintf("the endpoint has %d '*' for %d path parameters (each '*' takes one, in order); the pipe is not imported", n, len(pathParams))})
			pathParams = nil
		}
	}
	// The pipe's parameters "are merged with any InvocationParameters
	// specified on the Connection, with any values from the Connection
	// taking precedence" (PipeTargetHttpParameters): what the connection
	// set above (its authorization, its invocation parameters) stays.
	hm, qm := mapping(hp["HeaderParameters"]), mapping(hp["QueryStringParameters"])
	fromConnection := func(dst map[string]string, k string, fold bool) (string, bool) {
		for ck := range dst {
			if ck == k || fold && strings.EqualFold(ck, k) {
				return ck, true
			}
		}
		return "", false
	}
	for _, kd := range []struct {
		kind string
		src  map[string]any
		dst  map[string]string
		fold bool // header names are case-insensitive
	}{{"HeaderParameters", hm, headers, true}, {"QueryStringParameters", qm, query, false}} {
		set := maps.Clone(kd.dst)
		for _, k := range sortedKeys(kd.src) {
			kpath := hpath + "." + kd.kind + "." + k
			if ck, ok := fromConnection(set, k, kd.fold); ok {
				m.note(kpath, "the connection sets %s too, and its value takes precedence (AWS merges the two, the connection's values winning): the pipe's value is not used", ck)
				continue
			}
			kd.dst[k] = m.r.str(kd.src[k], kpath)
		}
	}
	o.set("url", rawURL)
	o.set("method", method)
	if len(headers) > 0 {
		o.set("headers", strMap(headers))
	}
	if len(query) > 0 {
		o.set("query", strMap(query))
	}
	if len(pathParams) > 0 {
		seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle}
		for _, p := range pathParams {
			seq.Content = append(seq.Content, scalar(p))
		}
		o.set("path_parameters", seq)
	}
}

// isPath reports whether v is a bare JSON path (a dynamic parameter).
func isPath(v string) bool {
	return v == "$" || strings.HasPrefix(v, "$.") || strings.HasPrefix(v, "$[")
}

// connection adds an EventBridge connection's authorization to headers
// (values from the environment: the secrets are never in the file) and
// its invocation parameters to headers and query.
func (m *mapper) connection(v any, path string, headers, query map[string]string) {
	if v == nil {
		return
	}
	id, _ := m.r.resourceRef(v)
	res := m.r.resources[id]
	if resType(res) != "AWS::Events::Connection" {
		m.note(path, "the connection is not in the file: add its authorization as a header (headers: {Authorization: ${TOKEN}})")
		return
	}
	props := mapping(res["Properties"])
	cpath := "Resources." + id + ".Properties"
	auth := mapping(props["AuthParameters"])
	prefix := envName(baseID(id))
	switch t, _ := props["AuthorizationType"].(string); t {
	case "API_KEY":
		name := unescape(m.r.str(mapping(auth["ApiKeyAuthParameters"])["ApiKeyName"], cpath+".AuthParameters.ApiKeyAuthParameters.ApiKeyName"))
		if name == "" {
			name = "x-api-key"
		}
		headers[name] = m.r.envRef(prefix + "_API_KEY")
	case "BASIC":
		headers["Authorization"] = "Basic " + m.r.envRef(prefix+"_BASIC_AUTH")
		m.note(cpath+".AuthParameters.BasicAuthParameters", "%s_BASIC_AUTH is the base64 of user:password", prefix)
	case "OAUTH_CLIENT_CREDENTIALS":
		headers["Authorization"] = "Bearer " + m.r.envRef(prefix+"_TOKEN")
		m.note(cpath+".AuthParameters.OAuthParameters", "pipes does not fetch OAuth tokens: %s_TOKEN is sent as a bearer token", prefix)
	}
	ip := mapping(auth["InvocationHttpParameters"])
	for _, kd := range []struct {
		kind string
		dst  map[string]string
	}{{"HeaderParameters", headers}, {"QueryStringParameters", query}} {
		kind, dst := kd.kind, kd.dst
		for i, p := range list(ip[kind]) {
			pm := mapping(p)
			ppath := fmt.Sprintf("%s.AuthParameters.InvocationHttpParameters.%s[%d]", cpath, kind, i)
			key := unescape(m.r.str(pm["Key"], ppath+".Key"))
			if isTrue(pm["IsValueSecret"]) {
				dst[key] = m.r.envRef(envName(baseID(id), key))
				continue
			}
			dst[key] = m.r.str(pm["Value"], ppath+".Value")
		}
	}
	if len(list(ip["BodyParameters"])) > 0 {
		m.leftOut(cpath+".AuthParameters.InvocationHttpParameters.BodyParameters", "body parameters of a connection have no pipes key")
	}
}

func (m *mapper) target(props map[string]any) *omap {
	path := m.at("Target")
	if props["Target"] == nil {
		m.drop(path, "the pipe has no Target")
		return nil
	}
	tp := mapping(props["TargetParameters"])
	tpath := m.at("TargetParameters")
	e := m.r.endpointOf(props["Target"], path)
	o := newMap()
	switch e.kind {
	case "sqs":
		o.set("type", "sqs")
		if e.res != nil {
			o.set("queue_url", m.r.resourceValue(e.logical, e.res, "QueueUrl", path))
		} else {
			o.set("queue_url", queueURL(e))
		}
		m.setRegion(o, e)
		qp := mapping(tp["SqsQueueParameters"])
		qpath := tpath + ".SqsQueueParameters"
		m.strKey(o, "message_group_id", qp, "MessageGroupId", qpath)
		m.strKey(o, "message_deduplication_id", qp, "MessageDeduplicationId", qpath)
	case "sns":
		o.set("type", "sns")
		o.set("topic_arn", m.r.text(&e))
		m.setRegion(o, e)
	case "bus":
		o.set("type", "eventbridge")
		if e.res != nil {
			o.set("event_bus_name", m.r.resourceValue(e.logical, e.res, "Name", path))
		} else {
			o.set("event_bus_name", m.r.text(&e))
		}
		m.setRegion(o, e)
		bp := mapping(tp["EventBridgeEventBusParameters"])
		bpath := tpath + ".EventBridgeEventBusParameters"
		m.strKey(o, "detail_type", bp, "DetailType", bpath)
		m.strKey(o, "source", bp, "Source", bpath)
		m.strKey(o, "endpoint_id", bp, "EndpointId", bpath)
		m.strKey(o, "time", bp, "Time", bpath)
		if rs := list(bp["Resources"]); len(rs) > 0 {
			seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
			for i, r := range rs {
				seq.Content = append(seq.Content, scalar(m.r.str(r, fmt.Sprintf("%s.Resources[%d]", bpath, i))))
			}
			o.set("resources", seq)
		}
	case "lambda":
		o.set("type", "lambda")
		o.set("function_name", m.functionName(e, path))
		m.setRegion(o, e)
		lp := mapping(tp["LambdaFunctionParameters"])
		switch it := m.r.str(lp["InvocationType"], tpath+".LambdaFunctionParameters.InvocationType"); it {
		case "", "REQUEST_RESPONSE":
		case "FIRE_AND_FORGET":
			o.set("invocation_type", "Event")
		default:
			m.leftOut(tpath+".LambdaFunctionParameters.InvocationType", "%q is not REQUEST_RESPONSE or FIRE_AND_FORGET; RequestResponse is used", it)
		}
	case "kinesis":
		o.set("type", "kinesis")
		o.set("stream", m.streamOf(e, path))
		m.setRegion(o, e)
		kp := mapping(tp["KinesisStreamParameters"])
		if kp["PartitionKey"] == nil {
			m.drop(tpath+".KinesisStreamParameters.PartitionKey", "a Kinesis target needs a PartitionKey")
			return nil
		}
		m.strKey(o, "partition_key", kp, "PartitionKey", tpath+".KinesisStreamParameters")
	case "firehose":
		// Pipes' Firehose target takes no parameters.
		o.set("type", "firehose")
		o.set("delivery_stream", m.streamOf(e, path))
		m.setRegion(o, e)
	case "states":
		o.set("type", "stepfunctions")
		o.set("state_machine_arn", m.stateMachineARN(e, path))
		m.setRegion(o, e)
		sp := mapping(tp["StepFunctionStateMachineParameters"])
		switch it := m.r.str(sp["InvocationType"], tpath+".StepFunctionStateMachineParameters.InvocationType"); it {
		case "", "REQUEST_RESPONSE": // pipes' default, as Pipes'
			m.standardWorkflow(e, path, "a REQUEST_RESPONSE target")
		case "FIRE_AND_FORGET":
			o.set("invocation_type", it)
		default:
			m.leftOut(tpath+".StepFunctionStateMachineParameters.InvocationType", "%q is not REQUEST_RESPONSE or FIRE_AND_FORGET; REQUEST_RESPONSE is used", it)
		}
	case "logs":
		o.set("type", "cloudwatch_logs")
		if e.res != nil {
			o.set("log_group_name", m.r.resourceValue(e.logical, e.res, "", path))
		} else {
			o.set("log_group_name", m.r.text(&e))
		}
		m.setRegion(o, e)
		lp := mapping(tp["CloudWatchLogsParameters"])
		lpath := tpath + ".CloudWatchLogsParameters"
		m.strKey(o, "log_stream_name", lp, "LogStreamName", lpath)
		m.strKey(o, "timestamp", lp, "Timestamp", lpath)
	case "apidest", "apigw":
		o.set("type", "http")
		m.http(o, e, mapping(tp["HttpParameters"]), tpath+".HttpParameters")
		// API destination and API Gateway targets take one event a call
		// (SPEC §6: they are not among the batch-capable targets).
		o.set("batch", false)
	default:
		m.unsupported(path, "target", "deliver to", e)
		return nil
	}
	if t, ok := tp["InputTemplate"]; ok {
		m.inputTemplate(o, t, tpath+".InputTemplate")
	}
	return o
}

// streamOf is the stream of a Kinesis or Firehose target: the stream's
// name when it is a resource of the template, else its ARN.
func (m *mapper) streamOf(e endpoint, path string) string {
	if e.res != nil {
		return m.r.resourceValue(e.logical, e.res, "", path)
	}
	return m.r.text(&e)
}

// setRegion writes `region:` into an AWS source, enrichment or target
// when the import was given the region (--param AWS::Region=...): the
// region of the endpoint's ARN when it names one, else that region. Without
// it the file leaves the region to the AWS configuration (AWS_REGION).
func (m *mapper) setRegion(o *omap, e endpoint) {
	if _, ok := m.r.params["AWS::Region"]; !ok {
		return
	}
	region := e.region
	if region == "" || strings.Contains(region, "${") {
		region, _ = m.r.pseudo("AWS::Region")
	}
	if region != "" {
		o.set("region", region)
	}
}

// invocationRate reads an API destination's InvocationRateLimitPerSecond
// (rpath is its Properties' path): the pipe's lowest becomes its source's
// rate_limit; one that is not a number is left out.
func (m *mapper) invocationRate(e endpoint, rpath string) {
	v, ok := mapping(e.res["Properties"])["InvocationRateLimitPerSecond"]
	if !ok {
		return
	}
	path := rpath + ".InvocationRateLimitPerSecond"
	s := unescape(m.r.str(v, path))
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		m.leftOut(path, "%q is not a whole number of invocations per second above 0, so no rate_limit is set", s)
		return
	}
	if m.rateLimit == 0 || n < m.rateLimit {
		m.rateLimit, m.rateFrom = n, path
	}
}

// queueURL builds an SQS queue's URL from its ARN.
func queueURL(e endpoint) string {
	if e.region == "" || e.account == "" || e.resource == "" {
		return e.arn
	}
	return "https://sqs." + e.region + ".amazonaws.com/" + e.account + "/" + e.resource
}

func (m *mapper) strKey(o *omap, key string, params map[string]any, prop, path string) {
	if v, ok := params[prop]; ok {
		if s := m.r.str(v, path+"."+prop); s != "" {
			o.set(key, s)
		}
	}
}

func (m *mapper) logging(props map[string]any) *omap {
	lc := mapping(props["LogConfiguration"])
	if lc == nil {
		return nil
	}
	path := m.at("LogConfiguration")
	o := newMap()
	switch lv := strings.ToLower(m.r.str(lc["Level"], path+".Level")); lv {
	case "off", "error", "info", "trace":
		o.set("level", lv)
	case "":
	default:
		m.leftOut(path+".Level", "%q is not OFF, ERROR, INFO or TRACE", lv)
	}
	for _, v := range list(lc["IncludeExecutionData"]) {
		if s, _ := v.(string); s == "ALL" {
			o.set("include_execution_data", true)
		}
	}
	for _, k := range []string{"CloudwatchLogsLogDestination", "FirehoseLogDestination", "S3LogDestination"} {
		if lc[k] != nil {
			m.note(path+"."+k, "pipes writes its execution logs to stderr, not to this destination")
		}
	}
	if o.empty() {
		return nil
	}
	return o
}

// cdkSuffix is the hash CDK appends to logical ids.
var cdkSuffix = regexp.MustCompile(`^(.*[a-z])[0-9A-F]{8}$`)

// baseID is a logical id without CDK's hash suffix ("OrdersQueue5A3F9C1B"
// → "OrdersQueue"), for names of pipes and variables.
func baseID(id string) string {
	if m := cdkSuffix.FindStringSubmatch(id); m != nil {
		return m[1]
	}
	return id
}
