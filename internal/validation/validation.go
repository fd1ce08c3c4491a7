// Package validation is what `pipes validate` checks in a pipeline file
// beyond the loader, shared by the commands and by the AWS importer, which
// checks what it writes the same way.
package validation

import (
	"errors"
	"slices"
	"strings"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
)

// Check returns the problems the registry's checks find in the pipes
// of r (compiling filters, templates, targets), less those about a field
// the loader already found wrong or one made with a --skip-env
// placeholder, or about the block or a key of such a field (they would
// repeat the problem, or be about a placeholder).
func Check(reg *pipes.Registry, r *config.Report) config.Errors {
	var out config.Errors
	for i, p := range r.Pipes {
		var bad []string
		for _, e := range r.Errors {
			if pipeOf(r.Pipes, e.Pos) == i {
				bad = append(bad, PipeField(e.Field, e.Msg))
			}
		}
		for pos, field := range r.Placeholders {
			if pipeOf(r.Pipes, pos) == i {
				bad = append(bad, PipeField(field, ""))
			}
		}
		if p.Source.Type == "" {
			bad = append(bad, "source")
		}
		if p.Target.Type == "" {
			bad = append(bad, "target")
		}
		err := reg.Check([]config.Pipe{p})
		var errs config.Errors
		if !errors.As(err, &errs) {
			if err != nil {
				out = append(out, &config.Error{Pos: p.Pos, Msg: err.Error()})
			}
			continue
		}
		for _, e := range errs {
			f := PipeField(e.Field, e.Msg)
			if slices.ContainsFunc(bad, func(b string) bool { return Related(b, f) }) {
				continue
			}
			if i < len(r.Paths) && r.Paths[i] != "" {
				e = &config.Error{Pos: e.Pos, Field: join(r.Paths[i], e.Field), Msg: e.Msg}
			}
			out = append(out, e)
		}
	}
	return out
}

// pipeOf is the index of the pipe pos is in: the last one beginning at or
// before it (-1 before the first).
func pipeOf(ps []config.Pipe, pos config.Pos) int {
	at := -1
	for i, p := range ps {
		if p.Pos.Line < pos.Line || (p.Pos.Line == pos.Line && p.Pos.Column <= pos.Column) {
			at = i
		}
	}
	return at
}

// PipeField is a field's path inside its pipe ("source.batch_size" of
// pipes[1].source.batch_size, indexes dropped); a pipe's "X is required"
// is about X.
func PipeField(field, msg string) string {
	if strings.HasPrefix(field, "pipes[") {
		if _, rest, ok := strings.Cut(field, "]."); ok {
			field = rest
		} else {
			field = ""
		}
	}
	if field == "" {
		if what, ok := strings.CutSuffix(msg, " is required"); ok {
			return what
		}
		return ""
	}
	var b strings.Builder
	for part := range strings.SplitSeq(field, ".") {
		part, _, _ = strings.Cut(part, "[")
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(part)
	}
	return b.String()
}

// Related reports whether one field is the other or under it.
func Related(a, b string) bool {
	if a == "" || b == "" {
		return a == b
	}
	return a == b || strings.HasPrefix(a, b+".") || strings.HasPrefix(b, a+".")
}

// join appends field to a pipe's path.
func join(path, field string) string {
	if field == "" {
		return path
	}
	return path + "." + field
}
