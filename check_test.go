package pipes_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
)

// Registry.Check reports each problem a target or enrichment constructor
// finds at the key at fault, one config.Error a problem, none on several
// lines.
func TestCheckLocatesConstructorProblemsAtTheirKeys(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want []string // "line:col field: message start", in Check's order
	}{
		{
			"a kinesis partition key that does not parse",
			"target: {type: kinesis, stream: s, partition_key: \"$.body.\"}",
			[]string{`3:51 target.partition_key: partition key "$.body.": input template:`},
		},
		{
			"three cloudwatch logs problems, each at its key",
			"target:\n  type: cloudwatch_logs\n  log_group_name: has spaces\n  log_stream_name: a:b\n  timestamp: \"1\"",
			[]string{
				`5:19 target.log_group_name: log group "has spaces" is not`,
				`6:20 target.log_stream_name: log stream name "a:b" is not`,
				`7:14 target.timestamp: timestamp "1" is a constant`,
			},
		},
		{
			"a dead-letter target's key",
			"target: {type: stdout}\ndead_letter: {type: sqs, queue_url: \"https://sqs.eu-west-1.amazonaws.com/1/q\", message_group_id: \"<$.x\"}",
			[]string{`4:98 dead_letter.message_group_id: message group id "<$.x": input template:`},
		},
		{
			"an http target's header, query and path parameter",
			"target:\n  type: http\n  url: https://h.example.com/*\n  headers: {X-Id: $.body.}\n  query: {k: $.k.}\n  path_parameters: [$.a..b]",
			[]string{
				`8:21 target.path_parameters[0]: path parameter 1 "$.a..b": input template:`,
				`7:14 target.query.k: query parameter "k": the value starts with $. or $[`,
				`6:19 target.headers.X-Id: header "X-Id": the value starts with $. or $[`,
			},
		},
		{
			"an http enrichment's header",
			"enrichment: {type: http, url: \"https://h.example.com/x\", headers: {X-Id: \"$[x\"}}\ntarget: {type: stdout}",
			[]string{`3:74 enrichment.headers.X-Id: header "X-Id": the value starts with $. or $[`},
		},
		{
			"a literal header with a dollar inside is no problem",
			"target: {type: http, url: \"https://h.example.com/x\", headers: {Authorization: \"Bearer $x.y\"}}",
			nil,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps, err := config.Loader{}.Parse("p.yaml", []byte("name: p\nsource: {type: memory}\n"+tc.yaml+"\n"))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			err = pipes.NewRegistry().Check(ps)
			var errs config.Errors
			if err != nil && !errors.As(err, &errs) {
				t.Fatalf("Check: %v, want config.Errors", err)
			}
			if len(errs) != len(tc.want) {
				t.Fatalf("Check gave %d problems, want %d:\n%v", len(errs), len(tc.want), err)
			}
			for i, e := range errs {
				got := e.Pos.String() + " " + e.Field + ": " + e.Msg
				if !strings.HasPrefix(got, "p.yaml:"+tc.want[i]) || strings.Contains(e.Msg, "\n") {
					t.Errorf("problem %d:\n got %s\nwant p.yaml:%s…", i, got, tc.want[i])
				}
			}
		})
	}
}
