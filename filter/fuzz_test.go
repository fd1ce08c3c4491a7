package filter

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/pipesproject/pipes/pipe"
)

var fuzzPatterns = []string{
	`{"source":["aws.ec2"],"detail":{"state":["running","stopped"]}}`,
	`{"a":[{"prefix":"x"},{"suffix":{"equals-ignore-case":"Y"}},{"equals-ignore-case":"z"}]}`,
	`{"a":[{"anything-but":{"wildcard":["*/lib/*","a\\*b"]}},{"anything-but":[1,2]}]}`,
	`{"n":[{"numeric":[">",0,"<=",5]},{"numeric":["=",3.0e2]}],"e":[{"exists":false}]}`,
	`{"ip":[{"cidr":"10.0.0.0/24"},{"cidr":"2001:db8::/32"}],"w":[{"wildcard":"a*b\\\\*c"}]}`,
	`{"$or":[{"a":["1"]},{"$or":[{"b":[null]},{"c":[true,""]}]}]}`,
	`{"body":{"items":{"sku":[{"wildcard":"SKU-*"}]}},"attributes":{"ApproximateReceiveCount":["1"]}}`,
	`{"a":[{"numeric":["=>",5]}]}`,
	`{"a":[{"wildcard":"a**"}]}`,
	`[1,2`,
}

var fuzzEvents = []string{
	`{"source":"aws.ec2","detail":{"state":"running"}}`,
	`{"a":["xa","Ay",{"b":1},[["z"]]],"n":[0,5,300],"ip":"10.0.0.1"}`,
	`[{"a":"1"},{"b":null},{"c":""}]`,
	`{"body":{"items":[{"sku":"SKU-1"}]}}`,
	`"plain"`,
	`null`,
}

// FuzzCompilePattern checks that compiling any input neither panics nor
// hangs, and that a compiled pattern can match any value.
func FuzzCompilePattern(f *testing.F) {
	for _, p := range fuzzPatterns {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, src string) {
		p, err := CompilePattern(src)
		if err != nil {
			if p != nil {
				t.Fatal("a pattern and an error")
			}
			return
		}
		for _, e := range fuzzEvents {
			var v any
			_ = json.Unmarshal([]byte(e), &v)
			p.MatchValue(v)
		}
	})
}

// FuzzMatch matches any pattern against any event (as a value and as an SQS
// record body): no panic, and a record's body decode stays the event's.
func FuzzMatch(f *testing.F) {
	for i, p := range fuzzPatterns {
		f.Add(p, fuzzEvents[i%len(fuzzEvents)])
	}
	f.Fuzz(func(t *testing.T, src, event string) {
		ps, err := CompilePatterns([]string{src})
		if err != nil {
			return
		}
		var v any
		if json.Unmarshal([]byte(event), &v) == nil {
			ps.list[0].MatchValue(v)
			var n any
			d := json.NewDecoder(strings.NewReader(event))
			d.UseNumber()
			if d.Decode(&n) == nil {
				ps.list[0].MatchValue(n)
			}
		}
		if _, err := ps.Match(context.Background(), &pipe.Event{Message: testMessage(event)}); err != nil {
			t.Fatal(err)
		}
	})
}
