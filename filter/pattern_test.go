package filter

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// matchCase is one pattern matched against one event (both JSON).
type matchCase struct {
	name    string
	pattern string
	event   string
	want    bool
}

func runMatchCases(t *testing.T, cases []matchCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := CompilePattern(c.pattern)
			if err != nil {
				t.Fatalf("CompilePattern(%s): %v", c.pattern, err)
			}
			var ev any
			if err := json.Unmarshal([]byte(c.event), &ev); err != nil {
				t.Fatalf("bad test event %s: %v", c.event, err)
			}
			if got := p.MatchValue(ev); got != c.want {
				t.Errorf("pattern %s on event %s: got %v, want %v", c.pattern, c.event, got, c.want)
			}
		})
	}
}

// Doc sections cited in case names:
//   EB patterns      = EventBridge user guide, eb-event-patterns (SPEC B §4.1)
//   EB operators     = eb-create-pattern-operators (SPEC B §4.2)
//   ruler            = aws/event-ruler README (SPEC B §4.3)

func TestMatchExactValues(t *testing.T) {
	runMatchCases(t, []matchCase{
		{"EB patterns / values are matched exactly: same string matches", `{"source":["aws.ec2"]}`, `{"source":"aws.ec2"}`, true},
		{"EB patterns / values are matched exactly: no case folding", `{"source":["aws.ec2"]}`, `{"source":"AWS.EC2"}`, false},
		{"EB patterns / values are matched exactly: no trimming", `{"source":["aws.ec2"]}`, `{"source":" aws.ec2"}`, false},
		{"EB patterns / several values are OR-ed", `{"state":["running","stopped"]}`, `{"state":"stopped"}`, true},
		{"EB patterns / several values are OR-ed: none matches", `{"state":["running","stopped"]}`, `{"state":"pending"}`, false},
		{"EB patterns / several fields are AND-ed: all match", `{"a":["1"],"b":["2"]}`, `{"a":"1","b":"2"}`, true},
		{"EB patterns / several fields are AND-ed: one differs", `{"a":["1"],"b":["2"]}`, `{"a":"1","b":"3"}`, false},
		{"EB patterns / the event must contain every field named in the pattern", `{"a":["1"],"b":["2"]}`, `{"a":"1"}`, false},
		{"EB patterns / fields not named in the pattern are ignored", `{"a":["1"]}`, `{"a":"1","z":{"y":[1,2]}}`, true},
		{"EB patterns / true matches a boolean", `{"ok":[true]}`, `{"ok":true}`, true},
		{"EB patterns / true does not match the string true", `{"ok":[true]}`, `{"ok":"true"}`, false},
		{"EB patterns / false matches only false", `{"ok":[false]}`, `{"ok":true}`, false},
		{"EB operators / null matches null", `{"x":[null]}`, `{"x":null}`, true},
		{"EB operators / null does not match an absent field", `{"x":[null]}`, `{}`, false},
		{"EB operators / null does not match the empty string", `{"x":[null]}`, `{"x":""}`, false},
		{"EB operators / empty string matches the empty string", `{"x":[""]}`, `{"x":""}`, true},
		{"EB operators / empty string does not match null", `{"x":[""]}`, `{"x":null}`, false},
		{"EB patterns / a number matches the same number", `{"n":[300]}`, `{"n":300}`, true},
		{"EB patterns / a number does not match its text", `{"n":[300]}`, `{"n":"300"}`, false},
		{"EB patterns / a string does not match the number", `{"n":["300"]}`, `{"n":300}`, false},
		// SPEC B §4.1 says exact numbers compare by text; a decoded value
		// keeps no text, so MatchValue compares decoded numbers by value.
		// Records matched through Patterns.Match keep the text: see
		// TestRecordExactNumbersCompareText.
		{"SPEC §4.1 exact numbers on decoded values (float64 keeps no text) compare by value: 300 matches 300.0", `{"n":[300]}`, `{"n":300.0}`, true},
		{"EB patterns / nested objects match field by field", `{"detail":{"state":["running"]}}`, `{"detail":{"state":"running"}}`, true},
		{"EB patterns / nested objects: the nesting must be the same", `{"detail":{"state":["running"]}}`, `{"state":"running"}`, false},
		{"EB patterns / a leaf does not match an object value", `{"detail":["x"]}`, `{"detail":{"a":"x"}}`, false},
		{"EB patterns / a nested pattern does not match a scalar value", `{"detail":{"a":["x"]}}`, `{"detail":"x"}`, false},
		{"EB patterns / duplicate keys: the last one wins", `{"a":["1"],"a":["2"]}`, `{"a":"2"}`, true},
		{"EB patterns / duplicate keys: the first one is forgotten", `{"a":["1"],"a":["2"]}`, `{"a":"1"}`, false},
	})
}

func TestMatchArrays(t *testing.T) {
	runMatchCases(t, []matchCase{
		{"ruler / JSON array matching: an array field matches when one element matches", `{"resources":["arn:b"]}`, `{"resources":["arn:a","arn:b"]}`, true},
		{"ruler / JSON array matching: no element matches", `{"resources":["arn:c"]}`, `{"resources":["arn:a","arn:b"]}`, false},
		{"ruler / JSON array matching: the intersection of pattern and event values is enough", `{"r":["x","b"]}`, `{"r":["a","b"]}`, true},
		{"ruler / JSON array matching: an empty array matches no value", `{"r":["a"]}`, `{"r":[]}`, false},
		{"ruler / JSON array matching: nested arrays are flattened", `{"r":[2]}`, `{"r":[[1],[2]]}`, true},
		{"ruler / JSON array matching: an array of objects matches a nested pattern element by element", `{"items":{"sku":["b"]}}`, `{"items":[{"sku":"a"},{"sku":"b"}]}`, true},
		{"ruler / JSON array matching: fields matched together come from the same element", `{"items":{"sku":["a"],"qty":[2]}}`, `{"items":[{"sku":"a","qty":1},{"sku":"b","qty":2}]}`, false},
		{"ruler / JSON array matching: fields of one element match together", `{"items":{"sku":["b"],"qty":[2]}}`, `{"items":[{"sku":"a","qty":1},{"sku":"b","qty":2}]}`, true},
		{"ruler / JSON array matching: the top-level event may be an array", `{"a":["1"]}`, `[{"a":"2"},{"a":"1"}]`, true},
		{"ruler / JSON array matching: operators apply to each element", `{"n":[{"numeric":[">",10]}]}`, `{"n":[1,5,11]}`, true},
		{"ruler / JSON array matching: anything-but matches when any element differs", `{"s":[{"anything-but":"a"}]}`, `{"s":["a","b"]}`, true},
		{"ruler / JSON array matching: anything-but fails when every element is excluded", `{"s":[{"anything-but":"a"}]}`, `{"s":["a","a"]}`, false},
	})
}

func TestMatchPrefix(t *testing.T) {
	runMatchCases(t, []matchCase{
		{"EB operators / prefix matching: matches the start of a string", `{"region":[{"prefix":"ca-"}]}`, `{"region":"ca-central-1"}`, true},
		{"EB operators / prefix matching: another start does not match", `{"region":[{"prefix":"ca-"}]}`, `{"region":"us-east-1"}`, false},
		{"EB operators / prefix matching: is case sensitive", `{"region":[{"prefix":"ca-"}]}`, `{"region":"CA-central-1"}`, false},
		{"EB operators / prefix matching: the whole string is a prefix of itself", `{"region":[{"prefix":"ca-"}]}`, `{"region":"ca-"}`, true},
		{"ruler / prefix matching: only matches strings", `{"n":[{"prefix":"1"}]}`, `{"n":12}`, false},
		{"EB operators / prefix matching while ignoring case", `{"s":[{"prefix":{"equals-ignore-case":"EventB"}}]}`, `{"s":"eventbridge"}`, true},
		{"EB operators / prefix matching while ignoring case: another start does not match", `{"s":[{"prefix":{"equals-ignore-case":"EventB"}}]}`, `{"s":"event"}`, false},
		{"EB operators / prefix matching while ignoring case: non-ASCII letters fold", `{"s":[{"prefix":{"equals-ignore-case":"ÉTÉ"}}]}`, `{"s":"été-2024"}`, true},
	})
}

func TestMatchSuffix(t *testing.T) {
	runMatchCases(t, []matchCase{
		{"EB operators / suffix matching: matches the end of a string", `{"key":[{"suffix":".png"}]}`, `{"key":"dir/a.png"}`, true},
		{"EB operators / suffix matching: another end does not match", `{"key":[{"suffix":".png"}]}`, `{"key":"dir/a.jpg"}`, false},
		{"EB operators / suffix matching: is case sensitive", `{"key":[{"suffix":".png"}]}`, `{"key":"a.PNG"}`, false},
		{"ruler / suffix matching: only matches strings", `{"n":[{"suffix":"0"}]}`, `{"n":10}`, false},
		{"EB operators / suffix matching while ignoring case", `{"s":[{"suffix":{"equals-ignore-case":"tBridge"}}]}`, `{"s":"EventBRIDGE"}`, true},
		{"EB operators / suffix matching while ignoring case: another end does not match", `{"s":[{"suffix":{"equals-ignore-case":"tBridge"}}]}`, `{"s":"bridges"}`, false},
	})
}

func TestMatchEqualsIgnoreCase(t *testing.T) {
	runMatchCases(t, []matchCase{
		{"EB operators / equals-ignore-case: matches whatever the case", `{"name":[{"equals-ignore-case":"alice"}]}`, `{"name":"ALiCe"}`, true},
		{"EB operators / equals-ignore-case: the whole string must be equal", `{"name":[{"equals-ignore-case":"alice"}]}`, `{"name":"alice2"}`, false},
		{"ruler / equals-ignore-case: only matches strings", `{"b":[{"equals-ignore-case":"true"}]}`, `{"b":true}`, false},
	})
}

func TestMatchAnythingBut(t *testing.T) {
	runMatchCases(t, []matchCase{
		{"EB operators / anything-but matching: a different string matches", `{"state":[{"anything-but":"initializing"}]}`, `{"state":"running"}`, true},
		{"EB operators / anything-but matching: the excluded string does not", `{"state":[{"anything-but":"initializing"}]}`, `{"state":"initializing"}`, false},
		{"EB operators / anything-but matching: an absent field does not match", `{"state":[{"anything-but":"initializing"}]}`, `{}`, false},
		{"EB operators / anything-but matching: a list of strings excludes each", `{"state":[{"anything-but":["stopped","overloaded"]}]}`, `{"state":"overloaded"}`, false},
		{"EB operators / anything-but matching: a list of strings lets others through", `{"state":[{"anything-but":["stopped","overloaded"]}]}`, `{"state":"running"}`, true},
		{"EB operators / anything-but matching: a number", `{"x":[{"anything-but":100}]}`, `{"x":100}`, false},
		{"EB operators / anything-but matching: another number matches", `{"x":[{"anything-but":100}]}`, `{"x":101}`, true},
		{"EB operators / anything-but matching: a list of numbers", `{"x":[{"anything-but":[100,200,300]}]}`, `{"x":200}`, false},
		{"EB operators / anything-but matching: a string passes a list of numbers", `{"x":[{"anything-but":[100,200]}]}`, `{"x":"100"}`, true},
		{"EB operators / anything-but matching: null passes a list of strings", `{"x":[{"anything-but":["a"]}]}`, `{"x":null}`, true},
		{"EB operators / anything-but prefix: a string with the prefix does not match", `{"s":[{"anything-but":{"prefix":"init"}}]}`, `{"s":"initializing"}`, false},
		{"EB operators / anything-but prefix: a string without the prefix matches", `{"s":[{"anything-but":{"prefix":"init"}}]}`, `{"s":"running"}`, true},
		{"ruler / anything-but prefix: a list of prefixes", `{"s":[{"anything-but":{"prefix":["a","b"]}}]}`, `{"s":"bx"}`, false},
		{"ruler / anything-but prefix: only matches strings", `{"s":[{"anything-but":{"prefix":"a"}}]}`, `{"s":5}`, false},
		{"EB operators / anything-but suffix: a string with the suffix does not match", `{"s":[{"anything-but":{"suffix":".txt"}}]}`, `{"s":"a.txt"}`, false},
		{"EB operators / anything-but suffix: a string without the suffix matches", `{"s":[{"anything-but":{"suffix":".txt"}}]}`, `{"s":"a.png"}`, true},
		{"EB operators / anything-but equals-ignore-case: any case is excluded", `{"s":[{"anything-but":{"equals-ignore-case":["Stopped","x"]}}]}`, `{"s":"STOPPED"}`, false},
		{"EB operators / anything-but equals-ignore-case: others match", `{"s":[{"anything-but":{"equals-ignore-case":"stopped"}}]}`, `{"s":"running"}`, true},
		{"EB operators / anything-but wildcard: a string the wildcard matches is excluded", `{"s":[{"anything-but":{"wildcard":"*/lib/*"}}]}`, `{"s":"/usr/lib/x"}`, false},
		{"EB operators / anything-but wildcard: others match", `{"s":[{"anything-but":{"wildcard":"*/lib/*"}}]}`, `{"s":"/usr/bin/x"}`, true},
	})
}

func TestMatchNumeric(t *testing.T) {
	runMatchCases(t, []matchCase{
		{"EB operators / numeric matching: = compares by value", `{"n":[{"numeric":["=",300]}]}`, `{"n":3.0e2}`, true},
		{"EB operators / numeric matching: = another value", `{"n":[{"numeric":["=",300]}]}`, `{"n":301}`, false},
		{"EB operators / numeric matching: > excludes the bound", `{"n":[{"numeric":[">",0]}]}`, `{"n":0}`, false},
		{"EB operators / numeric matching: > above the bound", `{"n":[{"numeric":[">",0]}]}`, `{"n":0.5}`, true},
		{"EB operators / numeric matching: >= includes the bound", `{"n":[{"numeric":[">=",10]}]}`, `{"n":10}`, true},
		{"EB operators / numeric matching: < excludes the bound", `{"n":[{"numeric":["<",10]}]}`, `{"n":10}`, false},
		{"EB operators / numeric matching: <= includes the bound", `{"n":[{"numeric":["<=",10]}]}`, `{"n":10}`, true},
		{"EB operators / numeric matching: a range, inside", `{"n":[{"numeric":[">",0,"<=",5]}]}`, `{"n":5}`, true},
		{"EB operators / numeric matching: a range, below", `{"n":[{"numeric":[">",0,"<=",5]}]}`, `{"n":0}`, false},
		{"EB operators / numeric matching: a range, above", `{"n":[{"numeric":[">",0,"<=",5]}]}`, `{"n":5.01}`, false},
		{"EB operators / numeric matching: a range written upper bound first", `{"n":[{"numeric":["<",10,">=",5]}]}`, `{"n":5}`, true},
		{"EB operators / numeric matching: negative values", `{"n":[{"numeric":["<",-1.5]}]}`, `{"n":-2}`, true},
		{"EB operators / numeric matching: only matches numbers, not their text", `{"n":[{"numeric":[">",0]}]}`, `{"n":"5"}`, false},
		{"ruler / numeric matching: full double range", `{"n":[{"numeric":[">",5e9]}]}`, `{"n":1e300}`, true},
	})
}

func TestMatchExists(t *testing.T) {
	runMatchCases(t, []matchCase{
		{"EB operators / exists matching: true on a present field", `{"c":[{"exists":true}]}`, `{"c":"x"}`, true},
		{"EB operators / exists matching: true on an absent field", `{"c":[{"exists":true}]}`, `{"d":"x"}`, false},
		{"EB operators / exists matching: false on an absent field", `{"c":[{"exists":false}]}`, `{"d":"x"}`, true},
		{"EB operators / exists matching: false on a present field", `{"c":[{"exists":false}]}`, `{"c":"x"}`, false},
		{"ruler / exists matching: null is a value", `{"c":[{"exists":true}]}`, `{"c":null}`, true},
		{"ruler / exists matching: leaf nodes only, so true does not match an object", `{"c":[{"exists":true}]}`, `{"c":{"d":1}}`, false},
		{"ruler / exists matching: false matches when the path ends at an object", `{"c":[{"exists":false}]}`, `{"c":{"d":1}}`, true},
		{"ruler / exists matching: false on a deeper absent path", `{"a":{"b":[{"exists":false}]}}`, `{"x":1}`, true},
		{"ruler / exists matching: false on a deeper path under a scalar", `{"a":{"b":[{"exists":false}]}}`, `{"a":1}`, true},
		{"ruler / exists matching: an empty array holds no value", `{"a":[{"exists":false}]}`, `{"a":[]}`, true},
		{"ruler / exists matching: true on an array with values", `{"a":[{"exists":true}]}`, `{"a":[1]}`, true},
		{"EB operators / exists matching: OR-ed with a value", `{"c":[{"exists":false},"x"]}`, `{"c":"x"}`, true},
	})
}

func TestMatchWildcard(t *testing.T) {
	runMatchCases(t, []matchCase{
		{"EB operators / wildcard matching: * matches zero or more characters", `{"f":[{"wildcard":"dir/*.png"}]}`, `{"f":"dir/a/b.png"}`, true},
		{"EB operators / wildcard matching: * matches zero characters", `{"f":[{"wildcard":"dir/*.png"}]}`, `{"f":"dir/.png"}`, true},
		{"EB operators / wildcard matching: the rest must match exactly", `{"f":[{"wildcard":"dir/*.png"}]}`, `{"f":"dir/a.jpg"}`, false},
		{"EB operators / wildcard matching: several stars", `{"f":[{"wildcard":"*/lib/*.so"}]}`, `{"f":"/usr/lib/x.so"}`, true},
		{"EB operators / wildcard matching: several stars in order", `{"f":[{"wildcard":"a*b*c"}]}`, `{"f":"acb"}`, false},
		{"EB operators / wildcard matching: prefix and suffix do not overlap", `{"f":[{"wildcard":"ab*ba"}]}`, `{"f":"aba"}`, false},
		{"EB operators / wildcard matching: no star means equality", `{"f":[{"wildcard":"abc"}]}`, `{"f":"abc"}`, true},
		{"ruler / wildcard matching: \\* is a literal star", `{"f":[{"wildcard":"a\\*b"}]}`, `{"f":"a*b"}`, true},
		{"ruler / wildcard matching: \\* is not a wildcard", `{"f":[{"wildcard":"a\\*b"}]}`, `{"f":"axb"}`, false},
		{"ruler / wildcard matching: \\\\ is a literal backslash", `{"f":[{"wildcard":"a\\\\*"}]}`, `{"f":"a\\bc"}`, true},
		{"ruler / wildcard matching: only matches strings", `{"f":[{"wildcard":"1*"}]}`, `{"f":12}`, false},
	})
}

func TestMatchCIDR(t *testing.T) {
	runMatchCases(t, []matchCase{
		{"EB operators / IP address matching: IPv4 inside the block", `{"ip":[{"cidr":"10.0.0.0/24"}]}`, `{"ip":"10.0.0.255"}`, true},
		{"EB operators / IP address matching: IPv4 outside the block", `{"ip":[{"cidr":"10.0.0.0/24"}]}`, `{"ip":"10.0.1.0"}`, false},
		{"EB operators / IP address matching: IPv6 inside the block", `{"ip":[{"cidr":"2001:db8::/32"}]}`, `{"ip":"2001:db8:1::5"}`, true},
		{"EB operators / IP address matching: IPv6 outside the block", `{"ip":[{"cidr":"2001:db8::/32"}]}`, `{"ip":"2001:db9::5"}`, false},
		{"EB operators / IP address matching: a non-IP string does not match", `{"ip":[{"cidr":"10.0.0.0/8"}]}`, `{"ip":"hello"}`, false},
		{"EB operators / IP address matching: an IPv4 address does not match an IPv6 block", `{"ip":[{"cidr":"2001:db8::/32"}]}`, `{"ip":"10.0.0.1"}`, false},
		{"EB operators / IP address matching: host bits in the block are ignored", `{"ip":[{"cidr":"10.0.0.7/24"}]}`, `{"ip":"10.0.0.9"}`, true},
	})
}

func TestMatchOr(t *testing.T) {
	runMatchCases(t, []matchCase{
		{"EB operators / $or matching: the first alternative matches", `{"$or":[{"a":["1"]},{"b":["2"]}]}`, `{"a":"1"}`, true},
		{"EB operators / $or matching: the second alternative matches", `{"$or":[{"a":["1"]},{"b":["2"]}]}`, `{"b":"2"}`, true},
		{"EB operators / $or matching: no alternative matches", `{"$or":[{"a":["1"]},{"b":["2"]}]}`, `{"a":"2","b":"1"}`, false},
		{"EB operators / $or matching: AND-ed with the other fields", `{"s":["x"],"$or":[{"a":["1"]},{"b":["2"]}]}`, `{"a":"1"}`, false},
		{"EB operators / $or matching: AND-ed with the other fields, all there", `{"s":["x"],"$or":[{"a":["1"]},{"b":["2"]}]}`, `{"s":"x","b":"2"}`, true},
		{"EB operators / $or matching: inside a nested object", `{"d":{"$or":[{"n":[{"numeric":[">",10]}]},{"c":["x"]}]}}`, `{"d":{"n":11}}`, true},
		{"EB operators / $or matching: alternatives with several fields", `{"$or":[{"a":["1"],"b":["1"]},{"c":["1"]}]}`, `{"a":"1","b":"2"}`, false},
		{"EB operators / $or matching: nested $or", `{"$or":[{"a":["1"]},{"$or":[{"b":["2"]},{"c":["3"]}]}]}`, `{"c":"3"}`, true},
		{"ruler / $or with one element is a plain field name", `{"$or":["x"]}`, `{"$or":"x"}`, true},
		{"ruler / $or whose objects hold operators is a plain field name", `{"$or":[{"prefix":"a"},{"suffix":"b"}]}`, `{"$or":"axb"}`, true},
	})
}

// errorCase is a pattern that must not compile, with its exact message.
type errorCase struct {
	name    string
	pattern string
	want    string
}

func TestCompilePatternRejectsInvalidPatterns(t *testing.T) {
	cases := []errorCase{
		{"not JSON", `{"a":`, `invalid JSON: unexpected EOF`},
		{"trailing data after the pattern", `{"a":["x"]} {}`, `invalid JSON: unexpected data after the pattern`},
		{"a pattern that is not an object", `["a"]`, `a pattern must be a JSON object, not an array`},
		{"an empty pattern", `{}`, `an object in a pattern must have at least one field`},
		{"an empty nested object", `{"a":{}}`, `a: an object in a pattern must have at least one field`},
		{"a leaf that is not an array", `{"detail":{"state":"running"}}`, `detail.state: the value of a field must be an array of values or an object, not a string`},
		{"a leaf that is a number", `{"n":5}`, `n: the value of a field must be an array of values or an object, not a number`},
		{"an empty array of values", `{"a":[]}`, `a: an array of values must not be empty`},
		{"an array inside the values", `{"a":[["x"]]}`, `a: a value must not be an array`},
		{"an unknown operator", `{"a":[{"contains":"x"}]}`, `a: contains: unknown operator (want one of prefix, suffix, equals-ignore-case, anything-but, numeric, exists, cidr, wildcard)`},
		{"two operators in one object", `{"a":[{"prefix":"x","suffix":"y"}]}`, `a: an operator object must have exactly one key, not 2 (prefix, suffix)`},
		{"an empty operator object", `{"a":[{}]}`, `a: an operator object must not be empty`},
		{"prefix with a number", `{"a":[{"prefix":5}]}`, `a: prefix: must be a string or {"equals-ignore-case": string}, not 5`},
		{"prefix with another operator inside", `{"a":[{"prefix":{"suffix":"x"}}]}`, `a: prefix: must be a string or {"equals-ignore-case": string}, not an object`},
		{"suffix with a list", `{"a":[{"suffix":["x"]}]}`, `a: suffix: must be a string or {"equals-ignore-case": string}, not an array`},
		{"equals-ignore-case with a number", `{"a":[{"equals-ignore-case":1}]}`, `a: equals-ignore-case: must be a string, not 1`},
		{"numeric with a wrong operator", `{"detail":{"price":[{"numeric":["=>",5]}]}}`, `detail.price: numeric: operator "=>" is not one of =, <, <=, >, >=`},
		{"numeric with a string value", `{"n":[{"numeric":[">","5"]}]}`, `n: numeric: the value after ">" must be a number, not "5"`},
		{"numeric with an odd length", `{"n":[{"numeric":[">",5,"<"]}]}`, `n: numeric: must be [operator, number] or [lower operator, number, upper operator, number]`},
		{"numeric that is not an array", `{"n":[{"numeric":5}]}`, `n: numeric: must be [operator, number] or [lower operator, number, upper operator, number]`},
		{"numeric = with another operator", `{"n":[{"numeric":["=",5,"<",6]}]}`, `n: numeric: "=" cannot be combined with another operator`},
		{"numeric with two lower bounds", `{"n":[{"numeric":[">",5,">=",6]}]}`, `n: numeric: has two lower bounds; a range needs one lower (> or >=) and one upper (< or <=) bound`},
		{"numeric with an empty range", `{"n":[{"numeric":[">",10,"<",5]}]}`, `n: numeric: the lower bound 10 is greater than the upper bound 5`},
		{"numeric out of the double range", `{"n":[{"numeric":[">",1e400]}]}`, `n: numeric: number 1e400 is out of range`},
		{"exists with a string", `{"a":[{"exists":"yes"}]}`, `a: exists: must be true or false, not "yes"`},
		{"cidr that is not a block", `{"ip":[{"cidr":"10.0.0.300/24"}]}`, `ip: cidr: "10.0.0.300/24" is not an IPv4 or IPv6 CIDR block (e.g. 10.0.0.0/24)`},
		{"cidr with a number", `{"ip":[{"cidr":10}]}`, `ip: cidr: must be a string, not 10`},
		{"wildcard with consecutive stars", `{"f":[{"wildcard":"a**b"}]}`, `f: wildcard: consecutive wildcard characters "**" are not allowed in "a**b"`},
		{"wildcard with an invalid escape", `{"f":[{"wildcard":"a\\nb"}]}`, `f: wildcard: invalid escape "\n" in "a\\nb" (only \* and \\ may be escaped)`},
		{"wildcard ending with a backslash", `{"f":[{"wildcard":"a\\"}]}`, `f: wildcard: "a\\" ends with an unfinished escape "\"`},
		{"wildcard with a number", `{"f":[{"wildcard":1}]}`, `f: wildcard: must be a string, not 1`},
		{"anything-but with an empty list", `{"a":[{"anything-but":[]}]}`, `a: anything-but: the list must not be empty`},
		{"anything-but with a mixed list", `{"a":[{"anything-but":["x",1]}]}`, `a: anything-but: a list must hold only strings or only numbers`},
		{"anything-but with a boolean", `{"a":[{"anything-but":true}]}`, `a: anything-but: must be a string, a number, a non-empty list of strings or of numbers, or an object with prefix, suffix, equals-ignore-case or wildcard, not true`},
		{"anything-but with numeric inside", `{"a":[{"anything-but":{"numeric":[">",1]}}]}`, `a: anything-but: "numeric" cannot be used inside anything-but (want prefix, suffix, equals-ignore-case or wildcard)`},
		{"anything-but prefix with a number", `{"a":[{"anything-but":{"prefix":1}}]}`, `a: anything-but: prefix must be a string or a non-empty list of strings, not 1`},
		{"anything-but wildcard with consecutive stars", `{"a":[{"anything-but":{"wildcard":"**"}}]}`, `a: anything-but: wildcard: consecutive wildcard characters "**" are not allowed in "**"`},
		{"an invalid value inside $or", `{"$or":[{"a":["1"]},{"b":"2"}]}`, `b: the value of a field must be an array of values or an object, not a string`},
		{"$or expanding to more than 1000 combinations", orBomb(), `$or: the pattern expands to more than 1000 combinations`},
		{"a pattern longer than 4096 characters", `{"a":["` + strings.Repeat("x", 4100) + `"]}`, `the pattern is 4110 characters long, more than 4096`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := CompilePattern(c.pattern)
			if err == nil {
				t.Fatalf("CompilePattern(%s) compiled; want error %q", c.pattern, c.want)
			}
			if got := err.Error(); got != c.want {
				t.Errorf("CompilePattern(%s):\n got  %s\n want %s", c.pattern, got, c.want)
			}
		})
	}
}

// orBomb is a pattern of four `$or`s of six alternatives: 6^4 = 1296
// combinations.
func orBomb() string {
	alt := `[{"a":["1"]},{"b":["1"]},{"c":["1"]},{"d":["1"]},{"e":["1"]},{"f":["1"]}]`
	return `{"w":{"$or":` + alt + `},"x":{"$or":` + alt + `},"y":{"$or":` + alt + `},"z":{"$or":` + alt + `}}`
}

func TestCompilePatternAcceptsExactly1000Combinations(t *testing.T) {
	alt := `[{"a":["1"]},{"b":["1"]},{"c":["1"]},{"d":["1"]},{"e":["1"]},{"f":["1"]},{"g":["1"]},{"h":["1"]},{"i":["1"]},{"j":["1"]}]`
	src := `{"x":{"$or":` + alt + `},"y":{"$or":` + alt + `},"z":{"$or":` + alt + `}}`
	if _, err := CompilePattern(src); err != nil {
		t.Fatalf("10×10×10 $or combinations: %v", err)
	}
}

func TestPatternErrorNamesThePatternPathAndOperator(t *testing.T) {
	_, err := CompilePatterns([]string{`{"a":["x"]}`, `{"detail":{"price":[1,{"numeric":["=>",5]}]}}`})
	var pe *PatternError
	if !errors.As(err, &pe) {
		t.Fatalf("got %v, want a *PatternError", err)
	}
	want := PatternError{Index: 1, Field: "detail.price", Path: "detail.price[1].numeric", Operator: "numeric", Msg: `operator "=>" is not one of =, <, <=, >, >=`}
	if *pe != want {
		t.Errorf("got %+v, want %+v", *pe, want)
	}
	if got, wantText := err.Error(), `patterns[1]: detail.price: numeric: operator "=>" is not one of =, <, <=, >, >=`; got != wantText {
		t.Errorf("got %q, want %q", got, wantText)
	}
}

func TestCompilePatternsRejectsMoreThanFivePatterns(t *testing.T) {
	p := `{"a":["x"]}`
	_, err := CompilePatterns([]string{p, p, p, p, p, p})
	if err == nil || err.Error() != "at most 5 patterns are allowed, got 6" {
		t.Fatalf("got %v", err)
	}
}

func TestMatchValueComparesJSONNumbersByText(t *testing.T) {
	p, err := CompilePattern(`{"n":[300]}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		event string
		want  bool
	}{{`{"n":300}`, true}, {`{"n":300.0}`, false}, {`{"n":3.0e2}`, false}} {
		v, ok := decodeJSON(c.event, true)
		if !ok {
			t.Fatalf("bad test event %s", c.event)
		}
		if got := p.MatchValue(v); got != c.want {
			t.Errorf("SPEC §4.1 exact numbers compare by text with json.Number values: %s: got %v, want %v", c.event, got, c.want)
		}
	}
}
