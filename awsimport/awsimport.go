// Package awsimport turns Amazon EventBridge Pipes definitions into pipes
// pipeline files: the JSON of `aws pipes describe-pipe`, a CreatePipe
// request body, and CloudFormation, SAM or CDK-synthesized templates (YAML
// or JSON) with every AWS::Pipes::Pipe resource in them.
//
// Field names follow the Pipes API reference (CreatePipe,
// PipeSourceParameters, PipeTargetParameters, PipeEnrichmentParameters)
// and the AWS::Pipes::Pipe resource, which uses the same names.
// Intrinsics (Ref, Fn::GetAtt, Fn::Sub, Fn::Join, Fn::Select, Fn::Split, in
// short or long form) are resolved from Options.Params, then from the
// template's own parameters and resources, and otherwise left as `${ENV}`
// references that the pipes loader reads from the environment. The
// template's Conditions (Fn::Equals, Fn::And, Fn::Or, Fn::Not, Condition)
// are evaluated from the same values: Fn::If takes the branch its
// condition picks (AWS::NoValue removes the property), and a pipe or
// resource whose Condition is false is not imported, with a note.
//
// What pipes cannot run (Step Functions, Kinesis and other targets;
// ActiveMQ, Kinesis, DynamoDB and Kafka sources; parameters with no pipes
// key) is left out and reported in Result.LeftOut with its path in the
// input; the rest imports. Each imported pipe is checked as `pipes
// validate` checks a pipeline file: one it would refuse (a filter pattern
// over Pipes' 4096 characters, a template over 8192, ...) is left out as
// well, with the reason, so that the file written always validates.
package awsimport

import (
	"bytes"
	"fmt"
	"maps"
	"sort"
	"strings"
	"unicode"

	"gopkg.in/yaml.v3"
)

// Options tune an import.
type Options struct {
	// Params give values to template parameters, pseudo parameters
	// (AWS::Region, AWS::AccountId, AWS::StackName) and references: a key
	// is what a Ref names ("QueueUrl", "AWS::Region", "OrdersQueue") or
	// what a GetAtt names ("OrdersQueue.Arn"), or the export name of an
	// Fn::ImportValue.
	Params map[string]string
	// LookupEnv, when set, resolves at import time the values that would
	// otherwise be left as `${ENV}` references: a template parameter or a
	// pseudo parameter whose variable (as Result.Env names it) is set is
	// replaced by its value. A template parameter is also read from the
	// variable of its own name (QueueUrl as well as QUEUE_URL), and the
	// environment wins over the parameter's Default; Params win over the
	// environment. `pipes run --aws` sets it; `pipes import aws`
	// does not, so that the file it writes stays portable.
	LookupEnv func(string) (string, bool)
}

// Problem is something of the input, at Path (dotted, as in the input:
// "Resources.OrdersPipe.Properties.Target"), with what happened to it.
type Problem struct {
	Path string
	Msg  string
}

// String formats p as "path: message".
func (p Problem) String() string { return p.Path + ": " + p.Msg }

// Result is what an import gives.
type Result struct {
	// YAML is the pipeline file: one pipe at top level, or several under
	// `pipes:`, each with a comment naming where it came from. It is nil
	// when no pipe could be imported.
	YAML []byte
	// Pipes are the names of the imported pipes, in output order.
	Pipes []string
	// LeftOut are the parts of the input that were not imported: a whole
	// pipe whose source or target pipes cannot run, or a parameter with
	// no pipes key.
	LeftOut []Problem
	// Notes are things the user should know that change nothing of the
	// behaviour (a value left to the environment, a default taken).
	Notes []Problem
	// Env are the environment variables the YAML reads, sorted.
	Env []string
}

// Import converts the definitions in data (the file's name is file, used
// in comments) into a pipeline file. It fails only when data is not JSON or
// YAML, or holds no pipe definition; what it cannot map is in
// Result.LeftOut. It does no I/O (Options.LookupEnv aside), does not block,
// and is safe for concurrent use.
func Import(file string, data []byte, opts Options) (*Result, error) {
	doc, err := decode(data)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	root := mapping(doc)
	if root == nil {
		return nil, fmt.Errorf("reading %s: expected a JSON object or YAML mapping at the top", file)
	}
	res := &Result{}
	r := &resolver{
		params:    opts.Params,
		lookupEnv: opts.LookupEnv,
		tmplParam: mapping(root["Parameters"]),
		resources: map[string]map[string]any{},
		env:       map[string]bool{},
		notes:     &res.Notes,
		conds:     mapping(root["Conditions"]),
		condCache: map[string]*condition{},
		skipped:   map[string]string{},
	}
	if r.params == nil {
		r.params = map[string]string{}
	}
	var defs []def
	switch {
	case mapping(root["Resources"]) != nil:
		rs := mapping(root["Resources"])
		pipeResources := 0
		for _, id := range sortedKeys(rs) {
			m := mapping(rs[id])
			if m == nil {
				continue
			}
			if resType(m) == "AWS::Pipes::Pipe" {
				pipeResources++
			}
			if c, ok := m["Condition"].(string); ok {
				if holds, decided, _ := r.condition(c); decided && !holds {
					r.skipped[id] = c
					continue
				}
			}
			// Fn::If whose condition is decided is its branch from here on.
			if d, keep := r.decideIfs(m); keep {
				r.resources[id] = mapping(d)
			}
		}
		for _, id := range sortedKeys(rs) {
			if c, ok := r.skipped[id]; ok && resType(mapping(rs[id])) == "AWS::Pipes::Pipe" {
				res.Notes = append(res.Notes, Problem{Path: "Resources." + id, Msg: fmt.Sprintf("its Condition %s is false with these parameters; not imported", c)})
			}
			if resType(r.resources[id]) != "AWS::Pipes::Pipe" {
				continue
			}
			what := "AWS::Pipes::Pipe"
			if c, ok := r.resources[id]["Condition"].(string); ok {
				if _, decided, why := r.condition(c); !decided {
					r.noteCondition(c, why)
					res.Notes = append(res.Notes, Problem{Path: "Resources." + id + ".Condition", Msg: fmt.Sprintf("the pipe exists in AWS only when condition %s holds, which cannot be decided with these parameters; it is imported regardless", c)})
				}
			}
			if p, ok := mapping(r.resources[id]["Metadata"])["aws:cdk:path"].(string); ok {
				what += ", CDK path " + p
			}
			defs = append(defs, def{path: "Resources." + id, logical: id, what: what, props: mapping(r.resources[id]["Properties"])})
		}
		if pipeResources == 0 {
			return nil, fmt.Errorf("reading %s: the template has no AWS::Pipes::Pipe resource", file)
		}
	case root["Source"] != nil && root["Target"] != nil:
		what := "CreatePipe request"
		if root["Arn"] != nil || root["CurrentState"] != nil || root["CreationTime"] != nil {
			what = "describe-pipe output"
		}
		defs = append(defs, def{path: "", logical: "", what: what, props: root})
	default:
		return nil, fmt.Errorf("reading %s: neither a template with Resources nor a pipe with Source and Target (describe-pipe output or a CreatePipe request)", file)
	}

	var pipes []*yaml.Node
	names := map[string]bool{}
	chk := newChecker(opts.LookupEnv)
	wholeID := cdkClashes(r, res, defs)
	for i, d := range defs {
		m := &mapper{r: r, res: res, base: d.path, wholeID: wholeID[i]}
		envBefore := maps.Clone(r.env)
		notesBefore := len(res.Notes)
		p, name := m.pipe(d.props, d.logical)
		if p == nil {
			// What a left-out pipe needed is not asked for.
			r.env = envBefore
			res.Notes = res.Notes[:notesBefore]
			continue
		}
		for base, i := name, 2; names[name]; i++ {
			name = fmt.Sprintf("%s-%d", base, i)
			setName(p, name)
			if !names[name] {
				res.Notes = append(res.Notes, Problem{Path: d.path, Msg: fmt.Sprintf("an earlier pipe is named %q too; this one is named %q", base, name)})
			}
		}
		problems, err := chk.check(m, p)
		if err != nil {
			return nil, err
		}
		problems = append(m.invalid, problems...)
		if len(problems) > 0 {
			// What validate refuses is not written: the pipe is named as
			// left out, with the reason, at its place in the input.
			r.env = envBefore
			res.Notes = res.Notes[:notesBefore]
			res.LeftOut = append(res.LeftOut, problems...)
			continue
		}
		names[name] = true
		where := d.what
		if d.path != "" {
			where = d.path + " (" + d.what + ")"
		}
		p.HeadComment = commentText("imported from " + where + " of " + file)
		pipes = append(pipes, p)
		res.Pipes = append(res.Pipes, name)
	}
	if len(pipes) == 0 {
		return res, nil
	}
	out := pipes[0]
	if len(pipes) > 1 {
		out = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{
			scalar("pipes"), {Kind: yaml.SequenceNode, Tag: "!!seq", Content: pipes},
		}}
		out.HeadComment = commentText(fmt.Sprintf("%d pipes imported from %s", len(pipes), file))
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(out); err != nil {
		return nil, fmt.Errorf("writing the pipeline file: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("writing the pipeline file: %w", err)
	}
	res.YAML = b.Bytes()
	// The variables the written pipes read: resolving a value may record
	// one that the pipe does not use in the end (an account id in an ARN
	// of which only the name is written).
	for _, name := range r.sortedEnv() {
		if bytes.Contains(res.YAML, []byte("${"+name+"}")) || bytes.Contains(res.YAML, []byte("${"+name+":-")) {
			res.Env = append(res.Env, name)
		}
	}
	return res, nil
}

// def is one pipe definition of the input: its path there ("" at the
// top), logical id, what it is (for the comment) and properties.
type def struct {
	path, logical, what string
	props               map[string]any
}

// cdkClashes says which pipes keep their whole logical id as their name:
// those whose name would be their logical id less CDK's hash
// (Pipe7793F8A1 → Pipe) when another pipe would get that name too. It
// works the names out without leaving a trace in r or res.
func cdkClashes(r *resolver, res *Result, defs []def) []bool {
	env, notes := maps.Clone(r.env), len(res.Notes)
	defer func() { r.env, res.Notes = env, res.Notes[:notes] }()
	names := make([]string, len(defs))
	count := map[string]int{}
	for i, d := range defs {
		if d.props == nil {
			continue
		}
		m := &mapper{r: r, res: &Result{}, base: d.path}
		names[i] = m.pipeName(d.props, d.logical)
		count[names[i]]++
	}
	out := make([]bool, len(defs))
	for i, d := range defs {
		short := baseID(d.logical)
		out[i] = names[i] != "" && count[names[i]] > 1 && short != d.logical && names[i] == short
	}
	return out
}

// commentText is s fit for a YAML comment: a control character (a line
// break in a logical id or a file name) would end the comment or make the
// file unreadable, so each becomes '?'.
func commentText(s string) string {
	return strings.Map(func(c rune) rune {
		if unicode.IsControl(c) {
			return '?'
		}
		return c
	}, s)
}

func setName(p *yaml.Node, name string) {
	for i := 0; i+1 < len(p.Content); i += 2 {
		if p.Content[i].Value == "name" {
			p.Content[i+1].Value = name
		}
	}
}

// omap builds a YAML mapping in insertion order.
type omap struct{ n *yaml.Node }

func newMap() *omap { return &omap{n: &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}} }

func (m *omap) set(key string, v any) {
	var vn *yaml.Node
	switch x := v.(type) {
	case *yaml.Node:
		vn = x
	case *omap:
		vn = x.n
	case string:
		vn = scalar(x)
		if strings.Contains(x, "\n") {
			vn.Style = yaml.LiteralStyle
		}
	case int:
		vn = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: fmt.Sprint(x)}
	case bool:
		vn = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: fmt.Sprint(x)}
	default:
		panic(fmt.Sprintf("awsimport: omap.set of %T", v))
	}
	m.n.Content = append(m.n.Content, scalar(key), vn)
}

func (m *omap) empty() bool { return len(m.n.Content) == 0 }

func scalar(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

// strMap builds a mapping of sorted string keys.
func strMap(kv map[string]string) *omap {
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	m := newMap()
	for _, k := range keys {
		m.set(k, kv[k])
	}
	return m
}
