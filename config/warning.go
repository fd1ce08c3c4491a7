package config

import "slices"

// Warning is something in a valid pipeline file that would only show at run
// time (a visibility timeout shorter than the target can take, a template
// that renders a JSON object inside a string, ...). `pipes validate` prints
// warnings and exits 0, or 3 with --deny-warnings. It has Error's fields
// (Pos, Field, Msg); messages never hold environment variable values or
// header values.
type Warning Error

// String formats w as `file:line:col: warning: field: message`.
func (w *Warning) String() string {
	e := Error(*w)
	e.Field = "warning"
	if w.Field != "" {
		e.Field += ": " + w.Field
	}
	return e.Error()
}

// Warnings is every warning of one Lint, sorted by file, line and column.
type Warnings []*Warning

func (ws Warnings) sort() {
	slices.SortStableFunc(ws, func(a, b *Warning) int { return compareProblems((*Error)(a), (*Error)(b)) })
}
