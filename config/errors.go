package config

import (
	"cmp"
	"slices"
	"strings"
)

// Error is one problem in a pipeline file: where it is, which field, and
// what is wrong. Messages never hold environment variable values or header
// values.
type Error struct {
	Pos Pos
	// Field is the dotted path of the field, like `source.batch_size` in a
	// one-pipe file or `pipes[1].source.batch_size` (0-based index) in a file
	// with `pipes:`. It is empty for problems of the whole file (YAML syntax).
	Field string
	Msg   string
}

// Error formats e as `file:line:col: field: message`.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Pos.String())
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in the pipeline files of one Load or Parse,
// sorted by file, line and column. errors.As(err, &config.Errors{}) tells an
// invalid configuration (exit code 2) from a file that could not be read.
type Errors []*Error

// Error gives one problem per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap gives the problems to errors.Is and errors.As.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

func (es Errors) sort() { slices.SortStableFunc(es, compareProblems) }

// compareProblems orders problems by file, line, column, field and message.
func compareProblems(a, b *Error) int {
	return cmp.Or(
		cmp.Compare(a.Pos.File, b.Pos.File),
		cmp.Compare(a.Pos.Line, b.Pos.Line),
		cmp.Compare(a.Pos.Column, b.Pos.Column),
		cmp.Compare(a.Field, b.Field),
		cmp.Compare(a.Msg, b.Msg),
	)
}

// UnknownKey is the problem of a key that is not one of known, worded as
// the loader words it in pipeline files: "unknown key; did you mean
// outcome?" (or the known keys listed). It is for the other YAML files of
// pipes (test files), so that their errors read like validate's.
func UnknownKey(pos Pos, field, key string, known []string) *Error {
	return &Error{Pos: pos, Field: field, Msg: "unknown key" + suggest(key, known)}
}
