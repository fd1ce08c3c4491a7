package config

import (
	"cmp"
	"slices"
	"strings"
)

// Warning is something in a valid pipeline file that would only show at run
// time (a visibility timeout shorter than the target can take, a template
// that renders a JSON object inside a string, ...). `pipes validate` prints
// warnings and exits 0, or 3 with --deny-warnings. Messages never hold
// environment variable values or header values.
type Warning struct {
	Pos Pos
	// Field is the dotted path of the field, as in Error.
	Field string
	Msg   string
}

// String formats w as `file:line:col: warning: field: message`.
func (w *Warning) String() string {
	var b strings.Builder
	b.WriteString(w.Pos.String())
	b.WriteString(": warning")
	if w.Field != "" {
		b.WriteString(": ")
		b.WriteString(w.Field)
	}
	b.WriteString(": ")
	b.WriteString(w.Msg)
	return b.String()
}

// Warnings is every warning of one Lint, sorted by file, line and column.
type Warnings []*Warning

func (ws Warnings) sort() {
	slices.SortStableFunc(ws, func(a, b *Warning) int {
		return cmp.Or(
			cmp.Compare(a.Pos.File, b.Pos.File),
			cmp.Compare(a.Pos.Line, b.Pos.Line),
			cmp.Compare(a.Pos.Column, b.Pos.Column),
			cmp.Compare(a.Field, b.Field),
			cmp.Compare(a.Msg, b.Msg),
		)
	})
}
