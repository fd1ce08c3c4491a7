package filter

import (
	"context"
	"fmt"

	"github.com/itchyny/gojq"

	"github.com/pipesproject/pipes/pipe"
)

var _ pipe.Filter = (*JQ)(nil)

// JQ is a compiled jq program (gojq) run on an event's record. It is
// immutable and safe for concurrent use.
//
// The program cannot reach outside the record: `$ENV` and `env` are empty,
// `input` and `inputs` are rejected when compiling, and there is no module
// loader, so `import` and `include` cannot read files.
type JQ struct {
	code *gojq.Code
}

// CompileJQ parses and compiles a jq program once.
func CompileJQ(src string) (*JQ, error) {
	q, err := gojq.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("parsing jq program: %w", err)
	}
	code, err := gojq.Compile(q, gojq.WithEnvironLoader(func() []string { return nil }))
	if err != nil {
		return nil, fmt.Errorf("compiling jq program: %w", err)
	}
	return &JQ{code: code}, nil
}

// Match runs the program on the event's record (RecordValue) and passes
// the event when the first output is exactly true. An error while running
// fails this event alone. It blocks until the first output or ctx is done.
func (j *JQ) Match(ctx context.Context, ev *pipe.Event) (bool, error) {
	it := j.code.RunWithContext(ctx, RecordValue(ev))
	v, ok := it.Next()
	if !ok {
		return false, nil
	}
	if err, isErr := v.(error); isErr {
		return false, fmt.Errorf("running jq filter on message %s: %w", ev.ID(), err)
	}
	b, isBool := v.(bool)
	return isBool && b, nil
}

// Run runs the program on the event's record and returns all its outputs,
// in the generic JSON form gojq uses (map[string]any, []any, string,
// float64/int/*big.Int, bool, nil). The outputs may share values with the
// event's decoded body: callers must not modify them. An error stops the
// run. It blocks until the program ends or ctx is done.
func (j *JQ) Run(ctx context.Context, ev *pipe.Event) ([]any, error) {
	it := j.code.RunWithContext(ctx, RecordValue(ev))
	var out []any
	for {
		v, ok := it.Next()
		if !ok {
			return out, nil
		}
		if err, isErr := v.(error); isErr {
			return nil, fmt.Errorf("running jq program on message %s: %w", ev.ID(), err)
		}
		out = append(out, v)
	}
}
