package filter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

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

// SyntaxError is a jq program that does not parse, or an expr expression
// that does not compile, and where: CompileJQ's and CompileExpr's errors
// wrap one when the place is known, so that a caller can point at it in its
// own file (errors.As).
type SyntaxError struct {
	// Offset is the byte offset of the offending token in the program
	// (0-based; the program's length for an unexpected end).
	Offset int
	// Line and Column locate it in the program (1-based; columns count
	// characters).
	Line, Column int
	// Err is the parser's own error (gojq's, expr's), saying what is wrong.
	Err error
}

// Error says what is wrong, as the parser does.
func (e *SyntaxError) Error() string { return e.Err.Error() }

// Unwrap gives the parser's error.
func (e *SyntaxError) Unwrap() error { return e.Err }

// syntaxError places gojq's parse error at the start of its token.
func syntaxError(src string, err error) error {
	var pe *gojq.ParseError
	if !errors.As(err, &pe) {
		return err
	}
	off := min(max(pe.Offset, 0), len(src))
	if n := len(pe.Token); n > 0 && off >= n && src[off-n:off] == pe.Token {
		off -= n
	}
	return newSyntaxError(src, off, err)
}

// newSyntaxError is err at byte offset off of src.
func newSyntaxError(src string, off int, err error) *SyntaxError {
	start := strings.LastIndexByte(src[:off], '\n') + 1
	return &SyntaxError{
		Offset: off, Line: 1 + strings.Count(src[:off], "\n"),
		Column: 1 + utf8.RuneCountInString(src[start:off]), Err: err,
	}
}

// CompileJQ parses and compiles a jq program once. A program that does
// not parse fails with an error wrapping a *SyntaxError.
func CompileJQ(src string) (*JQ, error) {
	q, err := gojq.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("parsing jq program: %w", syntaxError(src, err))
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
