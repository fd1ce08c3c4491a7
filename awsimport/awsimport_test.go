package awsimport_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/awsimport"
	"github.com/pipesproject/pipes/config"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the importer's output")

// report is what the CLI prints on stderr, for the golden .stderr files.
func report(res *awsimport.Result) string {
	var b strings.Builder
	for _, p := range res.LeftOut {
		fmt.Fprintf(&b, "left out: %s\n", p)
	}
	for _, p := range res.Notes {
		fmt.Fprintf(&b, "note: %s\n", p)
	}
	if len(res.Env) > 0 {
		fmt.Fprintf(&b, "env: %s\n", strings.Join(res.Env, ", "))
	}
	return b.String()
}

// fakeEnv gives every variable an imported file reads a value of the
// right shape, as a user's environment would.
func fakeEnv(name string) (string, bool) {
	switch {
	case name == "AWS_REGION":
		return "us-east-1", true
	case name == "AWS_ACCOUNT_ID":
		return "123456789012", true
	case name == "PARTNER_WEBHOOK_URL":
		return "https://partner.example.com/orders/*/*", true
	case name == "PARTNER_LOOKUP_URL":
		return "https://partner.example.com/customers/*", true
	case strings.HasSuffix(name, "QUEUE_URL"):
		return "https://sqs.us-east-1.amazonaws.com/123456789012/q", true
	case strings.HasSuffix(name, "_URL"):
		return "https://api.example.com/x", true
	case strings.HasSuffix(name, "FLOW_ARN"): // a state machine's, in the goldens
		return "arn:aws:states:us-east-1:123456789012:stateMachine:flow", true
	case strings.HasSuffix(name, "_HOST"):
		return "broker.example.com", true
	case strings.HasSuffix(name, "_SCHEME"), strings.HasSuffix(name, "_PORT"):
		return "", false // their defaults apply
	}
	return "x", true
}

// Every input in testdata is a pipe definition written from the Pipes API
// reference (CreatePipe, DescribePipe, PipeSourceParameters,
// PipeTargetParameters) and the CloudFormation resource docs
// (AWS::Pipes::Pipe, AWS::SQS::Queue, AWS::Events::ApiDestination, ...);
// its import must match the golden pipeline file and report, and the file
// must pass `pipes validate` (config's loader with its warnings, and the
// registry's checks).
func TestImportMatchesGoldenFilesThatValidate(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.*")
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) < 11 {
		t.Fatalf("only %d inputs in testdata", len(inputs))
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), filepath.Ext(in))
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			opts := awsimport.Options{}
			if name == "cfn_sqs_to_sqs_short" {
				opts.Params = map[string]string{"AWS::Region": "eu-west-1"}
			}
			res, err := awsimport.Import(filepath.Base(in), data, opts)
			if err != nil {
				t.Fatalf("Import: %v", err)
			}
			goldenYAML := filepath.Join("testdata", "golden", name+".yaml")
			goldenReport := filepath.Join("testdata", "golden", name+".stderr")
			if *update {
				if err := os.MkdirAll(filepath.Dir(goldenYAML), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(goldenYAML, res.YAML, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(goldenReport, []byte(report(res)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(goldenYAML)
			if err != nil {
				t.Fatalf("reading golden file (run go test -update): %v", err)
			}
			if string(res.YAML) != string(want) {
				t.Errorf("pipeline file:\n%s\nwant (%s):\n%s", res.YAML, goldenYAML, want)
			}
			wantReport, err := os.ReadFile(goldenReport)
			if err != nil {
				t.Fatalf("reading golden file (run go test -update): %v", err)
			}
			if got := report(res); got != string(wantReport) {
				t.Errorf("report:\n%s\nwant (%s):\n%s", got, goldenReport, wantReport)
			}
			specs, warns, err := config.Loader{LookupEnv: fakeEnv}.Lint(goldenYAML)
			if err != nil {
				t.Fatalf("the imported file does not validate: %v", err)
			}
			for _, w := range warns {
				t.Logf("validate warns: %s", w)
			}
			if len(specs) != len(res.Pipes) {
				t.Errorf("%d pipes load, the import says %d", len(specs), len(res.Pipes))
			}
			if err := pipes.NewRegistry().Check(specs); err != nil {
				t.Errorf("the imported file does not pass the registry's checks: %v", err)
			}
		})
	}
}

// The short and long forms of every intrinsic give the same file: "!Ref
// logicalName" is {"Ref": logicalName}, "!GetAtt res.attr" is
// {"Fn::GetAtt": [res, attr]}, and every other "!Fn" is {"Fn::Fn": ...}
// (CloudFormation intrinsic function reference).
func TestShortAndLongIntrinsicFormsImportTheSame(t *testing.T) {
	resources := `
  Q:
    Type: AWS::SQS::Queue
    Properties: {QueueName: in}
  T:
    Type: AWS::SNS::Topic
    Properties: {TopicName: out}
`
	tests := []struct {
		name, short, long string
	}{
		{"Ref", `!Ref T`, `{Ref: T}`},
		{"GetAtt", `!GetAtt T.TopicArn`, `{"Fn::GetAtt": [T, TopicArn]}`},
		{"Sub without variables", `!Sub "arn:aws:sns:${AWS::Region}:${AWS::AccountId}:out"`, `{"Fn::Sub": "arn:aws:sns:${AWS::Region}:${AWS::AccountId}:out"}`},
		{"Sub with variables", `!Sub ["arn:aws:sns:${R}:${AWS::AccountId}:${N}", {R: eu-west-1, N: !GetAtt T.TopicName}]`,
			`{"Fn::Sub": ["arn:aws:sns:${R}:${AWS::AccountId}:${N}", {R: eu-west-1, N: {"Fn::GetAtt": [T, TopicName]}}]}`},
		{"Join", `!Join [":", [arn, aws, sns, !Ref "AWS::Region", "123456789012", out]]`,
			`{"Fn::Join": [":", [arn, aws, sns, {Ref: "AWS::Region"}, "123456789012", out]]}`},
		{"Select of Split", `!Select [2, !Split [",", "a,b,arn:aws:sns:us-east-1:123456789012:out"]]`,
			`{"Fn::Select": [2, {"Fn::Split": [",", "a,b,arn:aws:sns:us-east-1:123456789012:out"]}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var outs []string
			for _, target := range []string{tt.short, tt.long} {
				doc := "Resources:" + resources + `
  P:
    Type: AWS::Pipes::Pipe
    Properties:
      Source: !GetAtt Q.Arn
      Target: ` + target + "\n"
				res, err := awsimport.Import("t.yaml", []byte(doc), awsimport.Options{})
				if err != nil {
					t.Fatalf("Import: %v", err)
				}
				if len(res.LeftOut) > 0 {
					t.Fatalf("left out: %v", res.LeftOut)
				}
				outs = append(outs, string(res.YAML))
			}
			if outs[0] != outs[1] {
				t.Errorf("short form gives\n%s\nlong form gives\n%s", outs[0], outs[1])
			}
			if !strings.Contains(outs[0], "type: sns") || !strings.Contains(outs[0], ":out\n") {
				t.Errorf("the target is not the topic:\n%s", outs[0])
			}
		})
	}
}

// How values resolve: --param first, then the template's parameters
// (Default) and resources, else an environment variable.
func TestValuesResolveFromParamsTemplateAndEnvironment(t *testing.T) {
	doc := `
Parameters:
  Out: {Type: String, Default: from-default}
  Bare: {Type: String}
Resources:
  Q: {Type: AWS::SQS::Queue, Properties: {QueueName: in}}
  P:
    Type: AWS::Pipes::Pipe
    Properties:
      Name: !Sub "${AWS::StackName}-copy"
      Source: !GetAtt Q.Arn
      Target: !Sub "arn:aws:sns:${AWS::Region}:111122223333:${Out}-${Bare}"
`
	tests := []struct {
		name     string
		params   map[string]string
		wantName string
		want     string
		wantEnv  string
	}{
		{"defaults and environment", nil, "copy", "topic_arn: arn:aws:sns:${AWS_REGION}:111122223333:from-default-${BARE}", "AWS_REGION,BARE"},
		{"params win", map[string]string{"Out": "o", "Bare": "b", "AWS::Region": "eu-west-1", "AWS::StackName": "shop"}, "shop-copy", "topic_arn: arn:aws:sns:eu-west-1:111122223333:o-b", ""},
		{"the environment at run time", nil, "copy", "topic_arn: arn:aws:sns:us-west-2:111122223333:from-default-b", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := awsimport.Options{Params: tt.params}
			if tt.name == "the environment at run time" {
				opts.LookupEnv = func(k string) (string, bool) {
					v, ok := map[string]string{"AWS_REGION": "us-west-2", "BARE": "b"}[k]
					return v, ok
				}
			}
			res, err := awsimport.Import("t.yaml", []byte(doc), opts)
			if err != nil {
				t.Fatal(err)
			}
			out := string(res.YAML)
			if !strings.Contains(out, "name: "+tt.wantName+"\n") || !strings.Contains(out, tt.want+"\n") {
				t.Errorf("got\n%s\nwant name %s and %s", out, tt.wantName, tt.want)
			}
			if got := strings.Join(res.Env, ","); got != tt.wantEnv {
				t.Errorf("env = %s, want %s", got, tt.wantEnv)
			}
		})
	}
}

// Fn::ImportValue names another stack's output: --param gives it by its
// export name, else an environment variable does.
func TestImportValueResolvesFromParamsByExportName(t *testing.T) {
	doc := `{"Resources": {"P": {"Type": "AWS::Pipes::Pipe", "Properties": {
  "Source": {"Fn::ImportValue": "shared-orders-queue-arn"},
  "Target": {"Fn::ImportValue": {"Fn::Sub": "${AWS::Region}-bus-arn"}}}}}}`
	res, err := awsimport.Import("t.json", []byte(doc), awsimport.Options{Params: map[string]string{
		"shared-orders-queue-arn": "arn:aws:sqs:us-east-1:123456789012:orders",
		"AWS::Region":             "us-east-1",
		"us-east-1-bus-arn":       "arn:aws:events:us-east-1:123456789012:event-bus/shop",
	}})
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.YAML)
	if !strings.Contains(out, "queue_arn: arn:aws:sqs:us-east-1:123456789012:orders") || !strings.Contains(out, "event_bus_name: arn:aws:events:us-east-1:123456789012:event-bus/shop") {
		t.Errorf("got\n%s", out)
	}
	res, err = awsimport.Import("t.json", []byte(doc), awsimport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.LeftOut) != 2 || !strings.Contains(res.LeftOut[0].Msg, "known only at deploy time (${SHARED_ORDERS_QUEUE_ARN})") {
		t.Errorf("left out %v, want the source and the target known only at deploy time", res.LeftOut)
	}
}

func TestInputsThatAreNoPipeDefinitionAreRefused(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"empty", "", "empty"},
		{"not YAML", "{", "not JSON or YAML"},
		{"a list", "[1]", "at the top"},
		{"a template without pipes", "Resources: {Q: {Type: AWS::SQS::Queue}}", "no AWS::Pipes::Pipe"},
		{"neither", "Foo: 1", "neither a template"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := awsimport.Import("t.yaml", []byte(tt.doc), awsimport.Options{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Import = %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// FuzzImport: any input either is refused with an error or gives YAML that
// parses; the importer never panics.
func FuzzImport(f *testing.F) {
	inputs, _ := filepath.Glob("testdata/*.*")
	for _, in := range inputs {
		if data, err := os.ReadFile(in); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"Source": {"Fn::Sub": "${"}, "Target": {"Fn::Select": [9, []]}}`))
	f.Add([]byte("Resources: {P: {Type: AWS::Pipes::Pipe, Properties: {Source: !GetAtt P.Arn, Target: !Ref P}}}"))
	// Conditions that refer to each other, an Fn::If in place of an
	// object, and keys a pipe does not have.
	f.Add([]byte(`Conditions: {A: {Condition: B}, B: !Not [{Condition: A}], C: !Equals [!Ref X, x]}
Parameters: {X: {Type: String, Default: x}}
Resources:
  Q: {Type: AWS::SQS::Queue, Condition: A, Properties: {QueueName: !If [C, q, !Ref AWS::NoValue]}}
  P: {Type: AWS::Pipes::Pipe, Condition: C, Properties: {Source: !GetAtt Q.Arn, Target: !GetAtt Q.Arn,
      SourceParameters: !If [C, {SqsQueueParameters: {BatchSze: 1}}, {}], FilterCriteria: {Filters: []}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		type out struct {
			res *awsimport.Result
			err error
		}
		ch := make(chan out, 1)
		go func() {
			res, err := awsimport.Import("fuzz.yaml", data, awsimport.Options{})
			if err == nil && res.YAML != nil {
				_, _ = config.Loader{LookupEnv: fakeEnv}.Parse("out.yaml", res.YAML)
			}
			ch <- out{res, err}
		}()
		var o out
		select {
		case o = <-ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("Import (and loading its output) of %q takes more than 5s", data)
		}
		res, err := o.res, o.err
		if err != nil || res.YAML == nil {
			return
		}
		var v any
		if err := yaml.Unmarshal(res.YAML, &v); err != nil {
			t.Fatalf("the output does not parse: %v\n%s", err, res.YAML)
		}
	})
}

// YAML aliases that expand exponentially ("billion laughs") are refused,
// not expanded.
func TestAliasBombsAreRefused(t *testing.T) {
	doc := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for i := range 8 {
		name := fmt.Sprintf("l%d", i)
		doc += fmt.Sprintf("%s: &%s [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n", name, name, prev, prev, prev, prev, prev, prev, prev, prev, prev, prev)
		prev = name
	}
	start := time.Now()
	_, err := awsimport.Import("bomb.yaml", []byte(doc), awsimport.Options{})
	if err == nil || !strings.Contains(err.Error(), "aliases") {
		t.Errorf("Import = %v, want the alias expansion refused", err)
	}
	t.Logf("refused in %s", time.Since(start))
}

// Secrets written in a template (a connection's API key and secret
// invocation parameters, basic-auth passwords, a broker's secret) never
// reach the pipeline file or the report: they are read from the
// environment at run time.
func TestSecretsOfTheTemplateAreNeverCopied(t *testing.T) {
	for _, name := range []string{"cdk.json", "multi_pipes.yaml", "create_pipe.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		res, err := awsimport.Import(name, data, awsimport.Options{})
		if err != nil {
			t.Fatal(err)
		}
		all := string(res.YAML) + report(res)
		for _, secret := range []string{"s3cr3t", "{{resolve:secretsmanager", "Password", "secret:rmq-creds"} {
			if strings.Contains(all, secret) {
				t.Errorf("%s: %q is in the output:\n%s", name, secret, all)
			}
		}
	}
}

// --param AWS::Region writes the region into every AWS stage, so that the
// imported file runs without AWS_REGION: the template's queues take it,
// an ARN keeps its own.
func TestRegionParamIsWrittenIntoTheAWSStages(t *testing.T) {
	doc := `
Resources:
  In: {Type: AWS::SQS::Queue, Properties: {QueueName: in}}
  P:
    Type: AWS::Pipes::Pipe
    Properties:
      Source: !GetAtt In.Arn
      Enrichment: arn:aws:lambda:us-west-2:123456789012:function:enrich
      Target: arn:aws:sns:ap-south-1:123456789012:out
`
	res, err := awsimport.Import("t.yaml", []byte(doc), awsimport.Options{Params: map[string]string{"AWS::Region": "eu-west-1", "AWS::AccountId": "123456789012"}})
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Source, Enrichment, Target map[string]any
	}
	if err := yaml.Unmarshal(res.YAML, &p); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		stage  string
		got    any
		region string
	}{{"source", p.Source["region"], "eu-west-1"}, {"enrichment", p.Enrichment["region"], "us-west-2"}, {"target", p.Target["region"], "ap-south-1"}} {
		if c.got != c.region {
			t.Errorf("%s region = %v, want %s\n%s", c.stage, c.got, c.region, res.YAML)
		}
	}
	// The file loads and builds with no AWS_REGION: the region is in it.
	specs, err := config.Loader{LookupEnv: func(string) (string, bool) { return "", false }}.Parse("t.yaml", res.YAML)
	if err != nil {
		t.Fatal(err)
	}
	if specs[0].Source.Region != "eu-west-1" {
		t.Errorf("loaded source region %q", specs[0].Source.Region)
	}
	res, err = awsimport.Import("t.yaml", []byte(doc), awsimport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(res.YAML), "region:") {
		t.Errorf("without --param AWS::Region the region is the AWS configuration's, got\n%s", res.YAML)
	}
}

// An API destination's InvocationRateLimitPerSecond is the source's
// rate_limit (messages received per second: one call each, batch: false),
// said in a note; one that is not a number is named as left out.
func TestInvocationRateLimitBecomesTheSourcesRateLimit(t *testing.T) {
	doc := func(rate string) string {
		return `
Parameters:
  Rate: {Type: String}
Resources:
  In: {Type: AWS::SQS::Queue, Properties: {QueueName: in}}
  Dest:
    Type: AWS::Events::ApiDestination
    Properties: {HttpMethod: POST, InvocationEndpoint: "https://api.example.com/x", InvocationRateLimitPerSecond: ` + rate + `}
  P:
    Type: AWS::Pipes::Pipe
    Properties: {Source: !GetAtt In.Arn, Target: !GetAtt Dest.Arn}
`
	}
	res, err := awsimport.Import("t.yaml", []byte(doc("25")), awsimport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	specs, err := config.Loader{}.Parse("t.yaml", res.YAML)
	if err != nil {
		t.Fatal(err)
	}
	if got := specs[0].Source.RateLimit; got != 25 {
		t.Errorf("rate_limit = %v, want 25\n%s", got, res.YAML)
	}
	if specs[0].Target.Batch || len(res.LeftOut) != 0 {
		t.Errorf("batch %v, left out %v", specs[0].Target.Batch, res.LeftOut)
	}
	if !strings.Contains(report(res), "InvocationRateLimitPerSecond: the API destination's 25 invocations per second are the source's rate_limit") {
		t.Errorf("no note of the rate limit:\n%s", report(res))
	}
	res, err = awsimport.Import("t.yaml", []byte(doc("!Ref Rate")), awsimport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(res.YAML), "rate_limit") || len(res.LeftOut) != 1 || !strings.HasSuffix(res.LeftOut[0].Path, "InvocationRateLimitPerSecond") {
		t.Errorf("a rate known at deploy time: left out %v, file\n%s", res.LeftOut, res.YAML)
	}
}

// At run time (LookupEnv) a template parameter is read from the variable
// of its own name or its upper-case name, over the parameter's Default;
// --param wins over both.
func TestTemplateParametersComeFromTheEnvironmentAtRunTime(t *testing.T) {
	doc := `
Parameters:
  QueueUrl: {Type: String, Default: "https://sqs.us-east-1.amazonaws.com/123456789012/default"}
  TopicArn: {Type: String, Default: "arn:aws:sns:us-east-1:123456789012:default"}
Resources:
  P:
    Type: AWS::Pipes::Pipe
    Properties: {Source: !Sub "arn:aws:sqs:us-east-1:123456789012:in", Target: !Ref TopicArn}
`
	env := map[string]string{"TopicArn": "arn:aws:sns:us-east-1:123456789012:from-env", "TOPIC_ARN": "arn:aws:sns:us-east-1:123456789012:upper"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, tt := range []struct {
		name   string
		params map[string]string
		lookup func(string) (string, bool)
		want   string
	}{
		{"the default without the environment", nil, nil, "default"},
		{"the variable of the parameter's name", nil, lookup, "from-env"},
		{"the upper-case variable", nil, func(k string) (string, bool) {
			if k == "TOPIC_ARN" {
				return env[k], true
			}
			return "", false
		}, "upper"},
		{"--param over the environment", map[string]string{"TopicArn": "arn:aws:sns:us-east-1:123456789012:param"}, lookup, "param"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := awsimport.Import("t.yaml", []byte(doc), awsimport.Options{Params: tt.params, LookupEnv: tt.lookup})
			if err != nil {
				t.Fatal(err)
			}
			if want := "topic_arn: arn:aws:sns:us-east-1:123456789012:" + tt.want + "\n"; !strings.Contains(string(res.YAML), want) {
				t.Errorf("got\n%s\nwant %s", res.YAML, want)
			}
		})
	}
}

// A STANDARD workflow run synchronously (an enrichment, a
// REQUEST_RESPONSE target: Pipes' default) is imported with a note, since
// Step Functions refuses StartSyncExecution for it; an EXPRESS one, or a
// FIRE_AND_FORGET target, gets none. SAM's AWS::Serverless::StateMachine
// names the kind Type, not StateMachineType.
func TestAStandardWorkflowRunSynchronouslyIsNoted(t *testing.T) {
	const cfn, sam = "AWS::StepFunctions::StateMachine", "AWS::Serverless::StateMachine"
	for _, tt := range []struct {
		name, kind, role, params string
		resource                 string
		noted                    bool
	}{
		{"a standard enrichment", "STANDARD", "Enrichment", "", cfn, true},
		{"an enrichment of the default type, standard", "", "Enrichment", "", cfn, true},
		{"an express enrichment", "EXPRESS", "Enrichment", "", cfn, false},
		{"a standard target of the default invocation type", "STANDARD", "Target", "", cfn, true},
		{"a standard fire-and-forget target", "STANDARD", "Target", "StepFunctionStateMachineParameters: {InvocationType: FIRE_AND_FORGET}", cfn, false},
		{"a SAM express enrichment", "EXPRESS", "Enrichment", "", sam, false},
		{"a SAM express target", "EXPRESS", "Target", "", sam, false},
		{"a SAM standard enrichment", "STANDARD", "Enrichment", "", sam, true},
		{"a SAM enrichment of the default type, standard", "", "Enrichment", "", sam, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			target := "!GetAtt Q.Arn"
			enrichment := "!Ref Flow"
			if tt.role == "Target" {
				target, enrichment = "!Ref Flow", `""`
			}
			kindKey := "StateMachineType"
			if tt.resource == sam {
				kindKey = "Type"
			}
			doc := fmt.Sprintf(`Resources:
  Q: {Type: AWS::SQS::Queue, Properties: {QueueName: q}}
  Flow: {Type: %s, Properties: {Name: flow, StateMachineName: flow, %s: %q}}
  P:
    Type: AWS::Pipes::Pipe
    Properties:
      Source: !GetAtt Q.Arn
      Enrichment: %s
      Target: %s
      TargetParameters: {%s}
`, tt.resource, kindKey, tt.kind, enrichment, target, tt.params)
			res, err := awsimport.Import("t.yaml", []byte(doc), awsimport.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(report(res), "STANDARD workflow"); got != tt.noted || len(res.Pipes) != 1 {
				t.Errorf("noted %v, want %v; %d pipes:\n%s", got, tt.noted, len(res.Pipes), report(res))
			}
		})
	}
}

// A CDK logical id keeps the short name pipes gives it (its 8-hex hash
// dropped) unless another pipe would get the same name: then both keep
// their whole logical id.
func TestCDKPipesKeepTheirWholeLogicalIDWhenShortNamesClash(t *testing.T) {
	doc := `
Resources:
  In: {Type: AWS::SQS::Queue, Properties: {QueueName: in}}
  OrdersPipe7793F8A1:
    Type: AWS::Pipes::Pipe
    Properties: {Source: !GetAtt In.Arn, Target: arn:aws:sns:us-east-1:123456789012:a}
  OrdersPipe0B1C2D3E:
    Type: AWS::Pipes::Pipe
    Properties: {Source: !GetAtt In.Arn, Target: arn:aws:sns:us-east-1:123456789012:b}
  RefundsPipe5A6B7C8D:
    Type: AWS::Pipes::Pipe
    Properties: {Source: !GetAtt In.Arn, Target: arn:aws:sns:us-east-1:123456789012:c}
`
	res, err := awsimport.Import("t.yaml", []byte(doc), awsimport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(res.Pipes, ","), "OrdersPipe0B1C2D3E,OrdersPipe7793F8A1,RefundsPipe"; got != want {
		t.Errorf("names %s, want %s", got, want)
	}
	if len(res.LeftOut) > 0 || strings.Contains(report(res), "an earlier pipe") {
		t.Errorf("report:\n%s", report(res))
	}
}

// `!Sub` of `${Res.Attr}` or `${Res}` alone names the resource as GetAtt
// and Ref do, also through a variable of the list form; a Sub with more
// text is an ARN to read.
func TestSubOfAResourceAttributeResolvesAsGetAtt(t *testing.T) {
	resources := `
Resources:
  Root: {Type: AWS::SQS::Queue, Properties: {QueueName: root, FifoQueue: true}}
  Out: {Type: AWS::SNS::Topic, Properties: {TopicName: out}}
`
	for _, tt := range []struct{ name, source, want string }{
		{"GetAtt", "!GetAtt Root.Arn", "queue_name: root.fifo"},
		{"short Sub", `!Sub "${Root.Arn}"`, "queue_name: root.fifo"},
		{"long Sub", `{"Fn::Sub": "${Root.Arn}"}`, "queue_name: root.fifo"},
		{"Sub of Ref", `!Sub "${Root}"`, "queue_name: root.fifo"},
		{"Sub list form", `{"Fn::Sub": ["${Q}", {Q: !GetAtt Root.Arn}]}`, "queue_name: root.fifo"},
		{"Sub with text", `!Sub "arn:aws:sqs:us-east-1:123456789012:${Root.QueueName}"`, "queue_arn: arn:aws:sqs:us-east-1:123456789012:root.fifo"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			doc := resources + `  P:
    Type: AWS::Pipes::Pipe
    Properties: {Source: ` + tt.source + `, Target: !Sub "${Out.TopicArn}"}
`
			res, err := awsimport.Import("t.yaml", []byte(doc), awsimport.Options{Params: map[string]string{"AWS::AccountId": "123456789012", "AWS::Region": "us-east-1"}})
			if err != nil {
				t.Fatal(err)
			}
			if out := string(res.YAML); !strings.Contains(out, tt.want+"\n") || !strings.Contains(out, "topic_arn: arn:aws:sns:us-east-1:123456789012:out\n") || len(res.LeftOut) > 0 {
				t.Errorf("got\n%s%s\nwant %s", out, report(res), tt.want)
			}
		})
	}
}

// A template or filter pattern made with a !Sub variable is judged by the
// text it has without its variables: the check of the written pipe leaves
// a value made with a variable alone (a placeholder until deploy time), so
// a template over 8192 characters would be written and only refused by
// validate once the variable is set.
func TestAnInputOverTheLimitsWithoutItsVariablesIsLeftOut(t *testing.T) {
	long := strings.Repeat("z", 9000)
	for _, tt := range []struct {
		name, params string
		leftOut      string // "" when the pipe is imported
	}{
		{"a target template over 8192 with a variable", `TargetParameters: {InputTemplate: !Sub '{"stage": "${Stage}", "pad": "` + long + `"}'}`, "TargetParameters.InputTemplate: the input template is 9024 characters long without its variables"},
		{"an enrichment template over 8192 with a variable", `Enrichment: arn:aws:lambda:us-east-1:123456789012:function:f
      EnrichmentParameters: {InputTemplate: !Sub '{"stage": "${Stage}", "pad": "` + long + `"}'}`, "EnrichmentParameters.InputTemplate: the input template is 9024 characters long without its variables"},
		{"a template under the limit whose variable may make it longer", `TargetParameters: {InputTemplate: !Sub '{"stage": "${Stage}", "pad": "` + long[:8000] + `"}'}`, ""},
		{"a pattern over 4096 with a variable", `SourceParameters: {FilterCriteria: {Filters: [{Pattern: !Sub '{"stage": ["${Stage}"], "pad": ["` + long[:5000] + `"]}'}]}}`, "Pattern: the pattern is 5025 characters long as JSON; at most 4096"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			doc := `Parameters: {Stage: {Type: String}}
Resources:
  Q: {Type: AWS::SQS::Queue, Properties: {QueueName: q}}
  P:
    Type: AWS::Pipes::Pipe
    Properties:
      Source: !GetAtt Q.Arn
      Target: arn:aws:sns:us-east-1:123456789012:t
      ` + tt.params + "\n"
			res, err := awsimport.Import("t.yaml", []byte(doc), awsimport.Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := report(res)
			if tt.leftOut == "" {
				if len(res.Pipes) != 1 || len(res.LeftOut) != 0 {
					t.Errorf("want the pipe imported; got %d pipes:\n%s", len(res.Pipes), got)
				}
				return
			}
			if len(res.Pipes) != 0 || !strings.Contains(got, tt.leftOut) {
				t.Errorf("want the pipe left out with %q; got %d pipes:\n%s", tt.leftOut, len(res.Pipes), got)
			}
		})
	}
}

// PathParameterValues fill the '*' of an endpoint the file gives, in
// order; when their count differs the pipe would call a literal '*', so it
// is left out, named at its PathParameterValues.
func TestPathParametersThatDoNotMatchTheEndpointLeaveThePipeOut(t *testing.T) {
	for _, tt := range []struct {
		name, endpoint, values string
		wantURL, leftOut       string
	}{
		{"as many values as '*'", "https://api.example.com/customers/*/orders/*", `[$.body.c, "o-1"]`, "url: https://api.example.com/customers/<$.body.c>/orders/o-1", ""},
		{"fewer values than '*'", "https://api.example.com/customers/*/orders/*", `[$.body.c]`, "", "HttpParameters.PathParameterValues: the endpoint has 2 '*' for 1 path parameters"},
		{"more values than '*'", "https://api.example.com/customers/*", `[a, b]`, "", "HttpParameters.PathParameterValues: the endpoint has 1 '*' for 2 path parameters"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			doc := fmt.Sprintf(`Resources:
  Q: {Type: AWS::SQS::Queue, Properties: {QueueName: q}}
  Conn:
    Type: AWS::Events::Connection
    Properties: {AuthorizationType: API_KEY, AuthParameters: {ApiKeyAuthParameters: {ApiKeyName: X-Key, ApiKeyValue: secret}}}
  Dest:
    Type: AWS::Events::ApiDestination
    Properties: {ConnectionArn: !GetAtt Conn.Arn, HttpMethod: POST, InvocationEndpoint: %q}
  P:
    Type: AWS::Pipes::Pipe
    Properties:
      Source: !GetAtt Q.Arn
      Target: !GetAtt Dest.Arn
      TargetParameters: {HttpParameters: {PathParameterValues: %s}}
`, tt.endpoint, tt.values)
			res, err := awsimport.Import("t.yaml", []byte(doc), awsimport.Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := report(res)
			if tt.leftOut == "" {
				if len(res.Pipes) != 1 || !strings.Contains(string(res.YAML), tt.wantURL) {
					t.Errorf("want the pipe imported with %q; got:\n%s\n%s", tt.wantURL, res.YAML, got)
				}
				return
			}
			if len(res.Pipes) != 0 || !strings.Contains(got, tt.leftOut) {
				t.Errorf("want the pipe left out with %q; got %d pipes:\n%s", tt.leftOut, len(res.Pipes), got)
			}
		})
	}
}

// A pipe that validate refuses for one of its target's or enrichment's
// parameters is left out at the parameter of the input it was made from,
// not at the Target or Enrichment.
func TestAParameterThatDoesNotValidateIsLeftOutAtItsInputPath(t *testing.T) {
	const src = `"Source": "arn:aws:sqs:us-east-1:123456789012:in", `
	const hook = `"arn:aws:events:us-east-1:123456789012:api-destination/hook/0a1b2c3d"`
	for _, tc := range []struct {
		name, input string
		want        []string
	}{
		{
			"a kinesis partition key",
			`{"Name": "p", ` + src + `"Target": "arn:aws:kinesis:us-east-1:123456789012:stream/s", "TargetParameters": {"KinesisStreamParameters": {"PartitionKey": "$.body."}}}`,
			[]string{"TargetParameters.KinesisStreamParameters.PartitionKey: the imported target.partition_key does not validate: partition key"},
		},
		{
			"a log stream name and a timestamp",
			`{"Name": "p", ` + src + `"Target": "arn:aws:logs:us-east-1:123456789012:log-group:/a/b:*", "TargetParameters": {"CloudWatchLogsParameters": {"LogStreamName": "a:b", "Timestamp": "12345"}}}`,
			[]string{
				"TargetParameters.CloudWatchLogsParameters.LogStreamName: the imported target.log_stream_name does not validate: log stream name",
				"TargetParameters.CloudWatchLogsParameters.Timestamp: the imported target.timestamp does not validate: timestamp",
			},
		},
		{
			"an sqs message group id",
			`{"Name": "p", ` + src + `"Target": "arn:aws:sqs:us-east-1:123456789012:out.fifo", "TargetParameters": {"SqsQueueParameters": {"MessageGroupId": "<$.body.g"}}}`,
			[]string{"TargetParameters.SqsQueueParameters.MessageGroupId: the imported target.message_group_id does not validate: message group id"},
		},
		{
			"an event bus's second resource and its time",
			`{"Name": "p", ` + src + `"Target": "arn:aws:events:us-east-1:123456789012:event-bus/b", "TargetParameters": {"EventBridgeEventBusParameters": {"Resources": ["arn:aws:s3:::a", "<$.body.r"], "Time": "$.body..t"}}}`,
			[]string{
				"TargetParameters.EventBridgeEventBusParameters.Resources[1]: the imported target.resources[1] does not validate: resources[1]",
				"TargetParameters.EventBridgeEventBusParameters.Time: the imported target.time does not validate: time",
			},
		},
		{
			"an http target's query parameter and header",
			`{"Name": "p", ` + src + `"Target": ` + hook + `, "TargetParameters": {"HttpParameters": {"HeaderParameters": {"X-Id": "$.body."}, "QueryStringParameters": {"k": "$.body..k"}}}}`,
			[]string{
				`TargetParameters.HttpParameters.QueryStringParameters.k: the imported target.query.k does not validate: query parameter "k": the value starts with $. or $[`,
				`TargetParameters.HttpParameters.HeaderParameters.X-Id: the imported target.headers.X-Id does not validate: header "X-Id": the value starts with $. or $[`,
			},
		},
		{
			"an http enrichment's path parameter, its endpoint from a variable",
			`{"Name": "p", ` + src + `"Enrichment": ` + hook + `, "EnrichmentParameters": {"HttpParameters": {"PathParameterValues": ["$.body..id"]}}, "Target": "arn:aws:sqs:us-east-1:123456789012:out"}`,
			[]string{`EnrichmentParameters.HttpParameters.PathParameterValues[0]: the imported enrichment.path_parameters[0] does not validate: path parameter 1 "<$.body..id>"`},
		},
		{
			"an sqs source's batch size, at SqsQueueParameters",
			`{"Resources": {"P": {"Type": "AWS::Pipes::Pipe", "Properties": {` + src + `"SourceParameters": {"SqsQueueParameters": {"BatchSize": 100}}, "Target": "arn:aws:sqs:us-east-1:123456789012:out"}}}}`,
			[]string{"Resources.P.Properties.SourceParameters.SqsQueueParameters.BatchSize: the imported source.batch_size does not validate: batch_size > 10 needs batch_window"},
		},
		{
			"a FIFO sqs source's batch window, at MaximumBatchingWindowInSeconds",
			`{"Name": "p", "Source": "arn:aws:sqs:us-east-1:123456789012:in.fifo", "SourceParameters": {"SqsQueueParameters": {"MaximumBatchingWindowInSeconds": 5}}, "Target": "arn:aws:sqs:us-east-1:123456789012:out"}`,
			[]string{"SourceParameters.SqsQueueParameters.MaximumBatchingWindowInSeconds: the imported source.batch_window does not validate: batching window is not supported for FIFO queues"},
		},
		{
			"a rabbitmq source's batch size, at RabbitMQBrokerParameters",
			`{"Name": "p", "Source": "arn:aws:mq:us-east-1:123456789012:broker:b:b-1", "SourceParameters": {"RabbitMQBrokerParameters": {"QueueName": "q", "BatchSize": 20000, "Credentials": {"BasicAuth": "arn:aws:secretsmanager:us-east-1:123456789012:secret:s"}}}, "Target": "arn:aws:sqs:us-east-1:123456789012:out"}`,
			[]string{"SourceParameters.RabbitMQBrokerParameters.BatchSize: the imported source.batch_size does not validate: "},
		},
		{
			"a CloudFormation pipe's header, at its resource",
			`{"Resources": {"P": {"Type": "AWS::Pipes::Pipe", "Properties": {` + src + `"Enrichment": ` + hook + `, "EnrichmentParameters": {"HttpParameters": {"HeaderParameters": {"X-Id": "$[x"}}}, "Target": "arn:aws:sqs:us-east-1:123456789012:out"}}}}`,
			[]string{`Resources.P.Properties.EnrichmentParameters.HttpParameters.HeaderParameters.X-Id: the imported enrichment.headers.X-Id does not validate: header "X-Id"`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := awsimport.Import("p.json", []byte(tc.input), awsimport.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.LeftOut) != len(tc.want) {
				t.Fatalf("left out %d, want %d:\n%s", len(res.LeftOut), len(tc.want), report(res))
			}
			for i, p := range res.LeftOut {
				if !strings.HasPrefix(p.String(), tc.want[i]) {
					t.Errorf("left out:\n got %s\nwant %s…", p, tc.want[i])
				}
			}
		})
	}
}

// An API destination's connection sets headers and query values (its
// authorization, its InvocationHttpParameters); the pipe's HttpParameters
// are merged with them, "with any values from the Connection taking
// precedence" (PipeTargetHttpParameters): a pipe's value for the same
// name (a header's in any case) is not used, and a note says so.
func TestTheConnectionsHTTPValuesWinOverThePipes(t *testing.T) {
	doc := `Resources:
  Src: {Type: AWS::SQS::Queue, Properties: {QueueName: src}}
  Conn:
    Type: AWS::Events::Connection
    Properties:
      AuthorizationType: API_KEY
      AuthParameters:
        ApiKeyAuthParameters: {ApiKeyName: x-api-key, ApiKeyValue: secret}
        InvocationHttpParameters:
          HeaderParameters: [{Key: x-tenant, Value: from-connection}]
          QueryStringParameters: [{Key: v, Value: conn}]
  Dest:
    Type: AWS::Events::ApiDestination
    Properties: {ConnectionArn: !GetAtt Conn.Arn, HttpMethod: POST, InvocationEndpoint: https://api.example.com/orders}
  P:
    Type: AWS::Pipes::Pipe
    Properties:
      Source: !GetAtt Src.Arn
      Target: !GetAtt Dest.Arn
      TargetParameters:
        HttpParameters:
          HeaderParameters: {X-Tenant: from-pipe, X-Api-Key: from-pipe, x-extra: pipe-only}
          QueryStringParameters: {v: pipe, w: pipe-only}
`
	res, err := awsimport.Import("t.yaml", []byte(doc), awsimport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, got := string(res.YAML), report(res)
	for _, want := range []string{"x-api-key: ${CONN_API_KEY}", "x-tenant: from-connection", "x-extra: pipe-only", "v: conn", "w: pipe-only"} {
		if !strings.Contains(out, want) {
			t.Errorf("the pipe lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "from-pipe") || strings.Contains(out, "v: pipe\n") {
		t.Errorf("a pipe's value beat the connection's:\n%s", out)
	}
	for _, want := range []string{
		"HttpParameters.HeaderParameters.X-Api-Key: the connection sets x-api-key too, and its value takes precedence",
		"HttpParameters.HeaderParameters.X-Tenant: the connection sets x-tenant too",
		"HttpParameters.QueryStringParameters.v: the connection sets v too",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks %q:\n%s", want, got)
		}
	}
}

// The template's Conditions are evaluated from --param, then the
// parameters' Default, then the pseudo parameters: Fn::If takes the branch
// its condition picks (AWS::NoValue removes the property), and a pipe or a
// resource whose Condition is false is not imported, with a note. A
// condition that cannot be decided is named once, and what depends on it
// is a variable named after its resource and property.
func TestConditionsDecideFnIfAndWhichResourcesExist(t *testing.T) {
	doc := `
Parameters:
  Stage: {Type: String, Default: dev}
  UseFifo: {Type: String, Default: "true"}
  Tier: {Type: String}
Conditions:
  IsFifo: !Equals [!Ref UseFifo, "true"]
  IsProd: !Equals [!Ref Stage, prod]
  NotProd: !Not [!Condition IsProd]
  FifoProd: !And [!Condition IsFifo, !Condition IsProd]
  ProdOrGold: !Or [!Condition IsProd, !Equals [!Ref Tier, gold]]
  InEU: !Equals [!Ref "AWS::Region", eu-west-1]
  Loop: !Not [!Condition Loop]
Resources:
  Src: {Type: AWS::SQS::Queue, Properties: {QueueName: src}}
  Dst:
    Type: AWS::SQS::Queue
    Properties:
      QueueName: !If [IsFifo, !Sub "${Stage}-out.fifo", !Sub "${Stage}-out"]
      FifoQueue: !If [IsFifo, true, !Ref AWS::NoValue]
  Other:
    Type: AWS::SQS::Queue
    Properties:
      QueueName: !If [ProdOrGold, gold, !If [InEU, eu, plain]]
  P:
    Type: AWS::Pipes::Pipe
    Properties:
      Source: !GetAtt Src.Arn
      Target: !GetAtt Dst.Arn
      TargetParameters:
        SqsQueueParameters:
          MessageGroupId: !If [IsFifo, $.body.customerId, !Ref AWS::NoValue]
  OnlyInProd:
    Type: AWS::Pipes::Pipe
    Condition: IsProd
    Properties: {Source: !GetAtt Src.Arn, Target: !GetAtt Dst.Arn}
  NotInProd:
    Type: AWS::Pipes::Pipe
    Condition: NotProd
    Properties: {Source: !GetAtt Src.Arn, Target: !GetAtt Other.Arn}
  ToFifoProd:
    Type: AWS::Pipes::Pipe
    Condition: FifoProd
    Properties: {Source: !GetAtt Src.Arn, Target: !GetAtt Dst.Arn}
  Looping:
    Type: AWS::Pipes::Pipe
    Condition: Loop
    Properties: {Source: !GetAtt Src.Arn, Target: !GetAtt Other.Arn}
`
	tests := []struct {
		name    string
		params  map[string]string
		pipes   string
		want    []string // in the file
		notWant []string // not in the file
		notes   []string // among the notes, once each
		wantEnv string
	}{
		{
			name:  "the parameters' defaults",
			pipes: "Looping,NotInProd,P",
			want:  []string{"/dev-out.fifo\n", "message_group_id: $.body.customerId\n", "/${OTHER_QUEUE_NAME}\n"},
			notes: []string{
				"Resources.OnlyInProd: its Condition IsProd is false with these parameters; not imported",
				"Resources.ToFifoProd: its Condition FifoProd is false with these parameters; not imported",
				"Conditions.Loop: cannot be decided with these parameters: condition Loop refers to itself",
				"Resources.Looping.Condition: the pipe exists in AWS only when condition Loop holds, which cannot be decided with these parameters; it is imported regardless",
				"Conditions.ProdOrGold: cannot be decided with these parameters: parameter Tier has no Default and no --param value",
				"Resources.Other.Properties.QueueName: Fn::If on condition ProdOrGold, which cannot be decided, is left as the environment variable OTHER_QUEUE_NAME",
			},
			wantEnv: "AWS_ACCOUNT_ID,AWS_REGION,OTHER_QUEUE_NAME",
		},
		{
			name:    "--param decides, and AWS::NoValue removes the key",
			params:  map[string]string{"Stage": "prod", "UseFifo": "false", "AWS::Region": "eu-west-1", "AWS::AccountId": "123456789012"},
			pipes:   "Looping,OnlyInProd,P",
			want:    []string{"/prod-out\n"},
			notWant: []string{"message_group_id", ".fifo"},
			notes:   []string{"Resources.NotInProd: its Condition NotProd is false with these parameters; not imported"},
		},
		{
			name:   "a pseudo parameter given decides a nested Fn::If",
			params: map[string]string{"Tier": "silver", "AWS::Region": "eu-west-1", "AWS::AccountId": "123456789012"},
			pipes:  "Looping,NotInProd,P",
			want:   []string{"/eu\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := awsimport.Import("t.yaml", []byte(doc), awsimport.Options{Params: tt.params})
			if err != nil {
				t.Fatal(err)
			}
			out := string(res.YAML)
			if got := strings.Join(sorted(res.Pipes), ","); got != tt.pipes {
				t.Errorf("pipes %s, want %s\n%s", got, tt.pipes, report(res))
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("the file has no %q:\n%s", w, out)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(out, w) {
					t.Errorf("the file has %q:\n%s", w, out)
				}
			}
			for _, n := range tt.notes {
				if c := strings.Count(report(res), "note: "+n+"\n"); c != 1 {
					t.Errorf("note %q is there %d times:\n%s", n, c, report(res))
				}
			}
			if strings.Contains(report(res), "cannot be resolved here") {
				t.Errorf("an Fn::If is noted as unresolvable:\n%s", report(res))
			}
			if tt.wantEnv != "" {
				if got := strings.Join(res.Env, ","); got != tt.wantEnv {
					t.Errorf("env = %s, want %s", got, tt.wantEnv)
				}
			}
		})
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// A template queue whose name is left to CloudFormation is read from a
// variable; the source says what kind it is (FifoQueue), so that validate
// does not warn that its batch window is refused if the variable names a
// FIFO queue, and refuses the variable if it does name one.
func TestATemplateQueueNamedByAVariableSaysItsKind(t *testing.T) {
	tests := []struct {
		name, queue string
		want        string // "" for no fifo key
		wantWarn    bool
	}{
		{"no FifoQueue is a standard queue", `{}`, "fifo: false\n", false},
		{"FifoQueue false", `{FifoQueue: false}`, "fifo: false\n", false},
		{"a named queue needs no key", `{QueueName: orders}`, "", false},
		{"a name from a parameter without Default", `{QueueName: !Ref Name}`, "fifo: false\n", false},
		{"FifoQueue from a condition not decided", `{FifoQueue: !If [Fifo, true, false]}`, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := `
Parameters: {Name: {Type: String}, Kind: {Type: String}}
Conditions: {Fifo: !Equals [!Ref Kind, fifo]}
Resources:
  Src: {Type: AWS::SQS::Queue, Properties: ` + tt.queue + `}
  P:
    Type: AWS::Pipes::Pipe
    Properties:
      Source: !GetAtt Src.Arn
      SourceParameters: {SqsQueueParameters: {BatchSize: 10, MaximumBatchingWindowInSeconds: 10}}
      Target: arn:aws:lambda:us-east-1:123456789012:function:f
`
			res, err := awsimport.Import("t.yaml", []byte(doc), awsimport.Options{})
			if err != nil {
				t.Fatal(err)
			}
			out := string(res.YAML)
			if tt.want != "" && !strings.Contains(out, tt.want) || tt.want == "" && strings.Contains(out, "fifo:") {
				t.Errorf("got\n%s\nwant %q", out, tt.want)
			}
			rep := config.Loader{SkipEnv: true, LookupEnv: func(string) (string, bool) { return "", false }}.Report("p.yaml", res.YAML)
			if len(rep.Errors) > 0 {
				t.Errorf("validate: %v", rep.Errors)
			}
			if warned := len(rep.Warnings) > 0; warned != tt.wantWarn {
				t.Errorf("warnings %v, want a warning: %v", rep.Warnings, tt.wantWarn)
			}
		})
	}
}

// Ref of an AWS::ApiGateway::Stage is its StageName (CloudFormation's
// return value), as an execute-api ARN's stage is built in CDK's
// templates; without one it is left to the environment.
func TestRefOfAnAPIGatewayStageIsItsName(t *testing.T) {
	tests := []struct{ name, props, want string }{
		{"a literal StageName", `{StageName: prod, RestApiId: abc123}`, "url: https://abc123.execute-api.us-east-1.amazonaws.com/prod/books\n"},
		{"no StageName", `{RestApiId: abc123}`, "url: https://abc123.execute-api.us-east-1.amazonaws.com/${STAGE}/books\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := `
Resources:
  Stage: {Type: AWS::ApiGateway::Stage, Properties: ` + tt.props + `}
  P:
    Type: AWS::Pipes::Pipe
    Properties:
      Source: arn:aws:sqs:us-east-1:123456789012:in
      Target: !Join ["", ["arn:aws:execute-api:us-east-1:123456789012:abc123/", !Ref Stage, "/GET/books"]]
`
			res, err := awsimport.Import("t.yaml", []byte(doc), awsimport.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(res.YAML), tt.want) {
				t.Errorf("got\n%s\nwant %s%s", res.YAML, tt.want, report(res))
			}
		})
	}
}

func TestPropertiesPipesDoesNotHaveAreNamed(t *testing.T) {
	for _, tt := range []struct {
		name, props string
		imported    bool
		want        string
	}{
		{"a FilterCriteria outside SourceParameters", `FilterCriteria: {Filters: [{Pattern: '{"a": ["b"]}'}]}`, false,
			"Resources.P.Properties.FilterCriteria: FilterCriteria is not a property of AWS::Pipes::Pipe (Pipes has it at SourceParameters.FilterCriteria), so its filter would be lost and every message passed; the pipe is not imported"},
		{"a Filter key", `SourceParameters: {Filter: {Pattern: x}}`, false,
			"SourceParameters.Filter: Filter is not a property of SourceParameters (Pipes has filters at SourceParameters.FilterCriteria.Filters[].Pattern)"},
		{"a misspelt filter list", `SourceParameters: {FilterCriteria: {Filter: [{Pattern: x}]}}`, false,
			"SourceParameters.FilterCriteria.Filter: Filter is not a property of FilterCriteria (did you mean Filters?)"},
		{"a misspelt batch size", `SourceParameters: {SqsQueueParameters: {BatchSze: 5}}`, true,
			"SourceParameters.SqsQueueParameters.BatchSze: BatchSze is not a property of SqsQueueParameters (did you mean BatchSize?); it is ignored"},
		{"a key in the wrong case", `SourceParameters: {SqsQueueParameters: {batchSize: 5}}`, true,
			"batchSize is not a property of SqsQueueParameters (did you mean BatchSize?)"},
		{"a misspelt parameters object", `TargetParameters: {SqsQueueParameter: {MessageGroupId: g}}`, true,
			"TargetParameters.SqsQueueParameter: SqsQueueParameter is not a property of TargetParameters (did you mean SqsQueueParameters?)"},
		{"an unknown key with nothing close", `Colour: blue`, true, "Resources.P.Properties.Colour: Colour is not a property of AWS::Pipes::Pipe; it is ignored"},
		{"Fn::If in place of an object is read where it stands", `SourceParameters: {'Fn::If': [C, {SqsQueueParameters: {BatchSize: 5}}, !Ref AWS::NoValue]}`, true, ""},
		{"free-form maps are not judged", `Tags: {anything: goes}
      TargetParameters: {HttpParameters: {HeaderParameters: {X-Any: v}}}`, true, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			doc := `Conditions: {C: !Equals [a, a]}
Resources:
  Q: {Type: AWS::SQS::Queue, Properties: {QueueName: q}}
  P:
    Type: AWS::Pipes::Pipe
    Properties:
      Source: !GetAtt Q.Arn
      Target: !GetAtt Q.Arn
      ` + tt.props + "\n"
			res, err := awsimport.Import("t.yaml", []byte(doc), awsimport.Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := report(res)
			if (len(res.Pipes) == 1) != tt.imported {
				t.Errorf("imported %d pipes, want imported=%v:\n%s", len(res.Pipes), tt.imported, got)
			}
			if tt.want == "" && strings.Contains(got, "is not a property") || !strings.Contains(got, tt.want) {
				t.Errorf("report:\n%s\nwant %q", got, tt.want)
			}
		})
	}
}

func TestOnlyTheVariablesTheFileReadsAreListed(t *testing.T) {
	doc := `Resources:
  Q: {Type: AWS::SQS::Queue, Properties: {QueueName: src}}
  S: {Type: AWS::Kinesis::Stream, Properties: {ShardCount: 1}}
  P:
    Type: AWS::Pipes::Pipe
    Properties:
      Source: !GetAtt Q.Arn
      Target: !GetAtt S.Arn
      TargetParameters: {KinesisStreamParameters: {PartitionKey: pk}}
`
	res, err := awsimport.Import("t.yaml", []byte(doc), awsimport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Env, []string{"S_NAME"}) || !strings.Contains(string(res.YAML), "${S_NAME}") {
		t.Errorf("env %v, want [S_NAME], the one the file reads:\n%s", res.Env, res.YAML)
	}
}

// A pipe that names a resource the file does not hold (a snippet, or
// another stack's resource) says so and how to give its ARN, and imports
// once given.
func TestAResourceNotInTheFileIsNamedWithTheParamThatGivesIt(t *testing.T) {
	doc := `Resources:
  P:
    Type: AWS::Pipes::Pipe
    Properties:
      Source: !GetAtt OrderQueue.Arn
      Target: !Ref Flow
`
	res, err := awsimport.Import("t.yaml", []byte(doc), awsimport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := report(res)
	for _, want := range []string{
		"Resources.P.Properties.Source: the source names OrderQueue, which is not a resource of this file, so its kind is not known: give its ARN with --param (OrderQueue=arn:… for a Ref, OrderQueue.Arn=arn:… for a GetAtt)",
		"Resources.P.Properties.Target: the target names Flow, which is not a resource of this file",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	res, err = awsimport.Import("t.yaml", []byte(doc), awsimport.Options{Params: map[string]string{
		"OrderQueue.Arn": "arn:aws:sqs:us-east-1:123456789012:orders",
		"Flow":           "arn:aws:states:us-east-1:123456789012:stateMachine:flow",
	}})
	if err != nil || len(res.Pipes) != 1 {
		t.Fatalf("with the params: %v, %d pipes:\n%s", err, len(res.Pipes), report(res))
	}
}
