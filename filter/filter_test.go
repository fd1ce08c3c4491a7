package filter

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pipesproject/pipes/pipe"
)

func event(body string) *pipe.Event { return &pipe.Event{Message: testMessage(body)} }

func TestJQMatch(t *testing.T) {
	cases := []struct {
		name    string
		program string
		body    string
		want    bool
	}{
		{"passes when the first output is true", `.body.amount > 10`, `{"amount":11}`, true},
		{"fails when the first output is false", `.body.amount > 10`, `{"amount":9}`, false},
		{"fails when the first output is truthy but not true", `.body.amount`, `{"amount":11}`, false},
		{"fails when there is no output", `empty`, `{}`, false},
		{"only the first output counts", `true, false`, `{}`, true},
		{"sees the body as a string when it is not JSON", `.body == "plain text"`, `plain text`, true},
		{"sees every record field, including eventSource", `.eventSource == "aws:sqs" and .awsRegion == "us-east-2"`, `{}`, true},
		{"sees attributes", `.attributes.ApproximateReceiveCount == "1"`, `{}`, true},
		{"sees message attributes", `.messageAttributes.tenant.stringValue == "acme"`, `{}`, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j, err := CompileJQ(c.program)
			if err != nil {
				t.Fatal(err)
			}
			got, err := j.Match(context.Background(), event(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestJQCannotReadTheEnvironment(t *testing.T) {
	t.Setenv("PIPES_TEST_SECRET", "hunter2")
	for _, program := range []string{`$ENV.PIPES_TEST_SECRET`, `env.PIPES_TEST_SECRET`, `$ENV | length`, `env | tostring`} {
		t.Run(program, func(t *testing.T) {
			j, err := CompileJQ(program)
			if err != nil {
				t.Fatal(err)
			}
			out, err := j.Run(context.Background(), event(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != 1 || !(out[0] == nil || out[0] == 0 || out[0] == "{}") {
				t.Errorf("got %#v, want nothing from the environment", out)
			}
		})
	}
}

func TestJQRejectsInputsAndModules(t *testing.T) {
	for _, program := range []string{`input`, `[inputs]`, `import "x" as x; .`, `include "x"; .`} {
		t.Run(program, func(t *testing.T) {
			if _, err := CompileJQ(program); err == nil {
				t.Errorf("CompileJQ(%q) compiled; want an error", program)
			}
		})
	}
}

func TestJQRuntimeErrorFailsThatEventAlone(t *testing.T) {
	j, err := CompileJQ(`.body.n + 1 > 2`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Match(context.Background(), event(`{"n":"text"}`)); err == nil || !strings.Contains(err.Error(), "running jq filter on message 059f36b4") {
		t.Errorf("got %v, want a run-time error naming the message", err)
	}
	if ok, err := j.Match(context.Background(), event(`{"n":5}`)); !ok || err != nil {
		t.Errorf("the next event: got %v, %v; want true, nil", ok, err)
	}
}

func TestJQRunReturnsAllOutputs(t *testing.T) {
	j, err := CompileJQ(`.body.items[] | .id`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := j.Run(context.Background(), event(`{"items":[{"id":"a"},{"id":"b"}]}`))
	if err != nil || len(out) != 2 || out[0] != "a" || out[1] != "b" {
		t.Fatalf("got %#v, %v", out, err)
	}
}

func TestJQStopsWhenTheContextIsDone(t *testing.T) {
	j, err := CompileJQ(`[range(1e9)] | length > 0`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := j.Match(ctx, event(`{}`)); err == nil {
		t.Error("got no error from a cancelled run")
	}
}

func TestExprMatch(t *testing.T) {
	cases := []struct {
		name string
		src  string
		body string
		want bool
	}{
		{"reads body fields and attributes in lower camel case", `body.amount > 10 && attributes.ApproximateReceiveCount == "1"`, `{"amount":11}`, true},
		{"false when the condition fails", `body.amount > 10`, `{"amount":10}`, false},
		{"sees a plain body as a string", `body startsWith "hello"`, `hello world`, true},
		{"reads message attributes", `messageAttributes.tenant.stringValue == "acme" && messageAttributes.blob.binaryValue == "aGk="`, `{}`, true},
		{"reads every record field", `messageId != "" && eventSource == "aws:sqs" && eventSourceARN endsWith "my-queue" && awsRegion == "us-east-2" && md5OfBody != ""`, `{}`, true},
		{"uses builtins", `len(body.items) == 2 && all(body.items, {# > 0})`, `{"items":[1,2]}`, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x, err := CompileExpr(c.src)
			if err != nil {
				t.Fatal(err)
			}
			got, err := x.Match(context.Background(), event(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestCompileExprRejectsMistakes(t *testing.T) {
	for _, c := range []struct{ name, src string }{
		{"an unknown field", `bodyy.amount > 10`},
		{"an unknown attribute field", `messageAttributes.tenant.value == "x"`},
		{"Go field names instead of record names", `MessageID == "x"`},
		{"a result that is not a boolean", `messageId`},
		{"a syntax error", `body.amount >`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := CompileExpr(c.src); err == nil {
				t.Errorf("CompileExpr(%q) compiled; want an error", c.src)
			}
		})
	}
}

func TestExprRuntimeErrorFailsThatEventAlone(t *testing.T) {
	x, err := CompileExpr(`body.n > 1`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.Match(context.Background(), event(`{"n":"text"}`)); err == nil {
		t.Error("got no error comparing a string with a number")
	}
	if ok, err := x.Match(context.Background(), event(`{"n":2}`)); !ok || err != nil {
		t.Errorf("the next event: got %v, %v; want true, nil", ok, err)
	}
}

func TestNew(t *testing.T) {
	f, err := New(Spec{})
	if f != nil || err != nil {
		t.Fatalf("New(empty): got %v, %v; want nil, nil", f, err)
	}
	f, err = New(Spec{
		Patterns: []string{`{"body":{"kind":["order"]}}`},
		Expr:     `body.amount > 10`,
		JQ:       `.body.currency == "EUR"`,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, body string
		want       bool
	}{
		{"every part passes", `{"kind":"order","amount":11,"currency":"EUR"}`, true},
		{"the pattern fails", `{"kind":"refund","amount":11,"currency":"EUR"}`, false},
		{"expr fails", `{"kind":"order","amount":1,"currency":"EUR"}`, false},
		{"jq fails", `{"kind":"order","amount":11,"currency":"USD"}`, false},
	} {
		got, err := f.Match(context.Background(), event(c.body))
		if err != nil || got != c.want {
			t.Errorf("%s: got %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}

func TestNewNamesThePartThatIsWrong(t *testing.T) {
	for _, c := range []struct {
		name   string
		spec   Spec
		prefix string
	}{
		{"a pattern", Spec{Patterns: []string{`{"a":["x"]}`, `{"a":"x"}`}}, "patterns[1]: a: the value of a field"},
		{"too many patterns", Spec{Patterns: make([]string, 6)}, "patterns: at most 5"},
		{"jq", Spec{JQ: `.a |`}, "jq: parsing jq program: "},
		{"expr", Spec{Expr: `nope`}, "expr: compiling expr expression: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(c.spec)
			if err == nil || !strings.HasPrefix(err.Error(), c.prefix) {
				t.Errorf("got %v, want an error starting with %q", err, c.prefix)
			}
		})
	}
}

func TestNewSharesTheDecodedBodyWithLaterStages(t *testing.T) {
	f, err := New(Spec{Patterns: []string{`{"body":{"kind":["order"]}}`}})
	if err != nil {
		t.Fatal(err)
	}
	ev := event(`{"kind":"order","n":1.5,"s":"caf\u00e9"}`)
	if ok, err := f.Match(context.Background(), ev); !ok || err != nil {
		t.Fatalf("got %v, %v", ok, err)
	}
	body, isJSON := ev.Body()
	m, _ := body.(map[string]any)
	if !isJSON || m["n"] != 1.5 || m["s"] != "café" {
		t.Errorf("the event's body: %#v, %v", body, isJSON)
	}
}

func TestFiltersAreSafeForConcurrentUse(t *testing.T) {
	f, err := New(Spec{
		Patterns: []string{`{"body":{"n":[{"numeric":[">",0]}]}}`, `{"body":{"n":[7]}}`},
		Expr:     `body.n > 0`,
		JQ:       `.body.n > 0`,
	})
	if err != nil {
		t.Fatal(err)
	}
	ev := event(`{"n":7}`) // one event shared by every goroutine
	done := make(chan error)
	for range 8 {
		go func() {
			for range 50 {
				ok, err := f.Match(context.Background(), ev)
				if err == nil && !ok {
					err = errNoMatch
				}
				if err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

var errNoMatch = errors.New("no match")

// A jq program that does not parse, or an expr expression that does not
// compile, says where: the offending token's byte offset, line and column.
func TestSyntaxErrorsSayWhere(t *testing.T) {
	tests := []struct {
		name, src string
		compile   func(string) error
		at        string // the text from the offset on
		line, col int
	}{
		{"jq: a stray token", ".a | | .b", jqErr, "| .b", 1, 6},
		{"jq: on the third line", ".a\n| .b\n| ]", jqErr, "]", 3, 3},
		{"jq: after a character of two bytes", `"é" | ]`, jqErr, "]", 1, 7},
		{"jq: an unexpected end", ".a | (", jqErr, "", 1, 7},
		{"expr: on the second line", "body.a > 1 &&\n  body.b ==", exprErr, "=", 2, 11},
		{"expr: an unknown name", "bodyy.a > 1", exprErr, "bodyy.a > 1", 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.compile(tt.src)
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error %v (%T): want a *SyntaxError", err, err)
			}
			if tt.src[se.Offset:] != tt.at || se.Line != tt.line || se.Column != tt.col {
				t.Errorf("at offset %d (%q), line %d, column %d; want %q, line %d, column %d", se.Offset, tt.src[se.Offset:], se.Line, se.Column, tt.at, tt.line, tt.col)
			}
		})
	}
}

func jqErr(src string) error   { _, err := CompileJQ(src); return err }
func exprErr(src string) error { _, err := CompileExpr(src); return err }
