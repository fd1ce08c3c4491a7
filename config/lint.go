package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Placeholder is the value Loader.SkipEnv gives an unset variable without
// a default: "placeholder-" and the name in lower case with '-' for '_',
// which reads as a host, a queue name or a plain word.
func Placeholder(name string) string {
	return "placeholder-" + strings.ReplaceAll(strings.ToLower(name), "_", "-")
}

// skipAt leaves out the problems reported at pos (a value made with a
// placeholder).
func (d *decoder) skipAt(pos Pos, field string) {
	if d.skip == nil {
		d.skip = map[Pos]string{}
	}
	d.skip[pos] = field
}

// Report is everything Loader.Reports found in one pipeline file.
type Report struct {
	// File is the file's path as given.
	File string
	// Pipes are the pipes the decoder made of the file, also when it has
	// errors: a field in error then holds its default or zero value.
	// Checks beyond the loader's (compiling filters and templates) may run
	// on them to report more problems at once.
	Pipes []Pipe
	// Paths are the field paths of Pipes in the file: "" for a file of one
	// pipe, "pipes[1]" for the second of a pipes: list. Checks beyond the
	// loader's prefix their fields with them.
	Paths []string
	// Errors and Warnings are the file's own, sorted; duplicate pipe names
	// across the files of one Reports call are errors of the later file.
	Errors   Errors
	Warnings Warnings
	// Placeholders are where the values made with a placeholder for an
	// unset variable are (Loader.SkipEnv), and their fields: checks
	// beyond the loader's should leave their problems out too.
	Placeholders map[Pos]string
}

// Reports reads each file on its own and gives what it found in each, in
// order: unlike Load it keeps going past invalid files, keeps the pipes
// of invalid files and gives warnings of every file. A file that cannot
// be read gets that as its one error.
func (l Loader) Reports(files ...string) []Report {
	out := make([]Report, 0, len(files))
	var all []parsed
	var owner []int // index in out of each parsed pipe
	for _, f := range files {
		r := Report{File: f}
		data, err := os.ReadFile(f)
		if err != nil {
			msg := err.Error()
			var pe *os.PathError
			if errors.As(err, &pe) {
				msg = pe.Err.Error()
			}
			r.Errors = Errors{{Pos: Pos{File: f}, Msg: "cannot be read: " + msg}}
			out = append(out, r)
			continue
		}
		ps := l.report(&r, data)
		for _, p := range ps {
			all = append(all, p)
			owner = append(owner, len(out))
		}
		out = append(out, r)
	}
	for _, e := range duplicateNames(all) {
		for i, p := range all {
			if p.namePos == e.Pos {
				out[owner[i]].Errors = append(out[owner[i]].Errors, e)
				break
			}
		}
	}
	for i := range out {
		out[i].Errors.sort()
		out[i].Warnings.sort()
	}
	return out
}

// Report is Reports of one file's contents, data, read from name (which
// errors and positions name): what the loader found in it, its
// duplicate pipe names included. It does no I/O beyond LookupEnv (and
// reading the files a pipeline file points to).
func (l Loader) Report(name string, data []byte) Report {
	r := Report{File: name}
	ps := l.report(&r, data)
	r.Errors = append(r.Errors, duplicateNames(ps)...)
	r.Errors.sort()
	r.Warnings.sort()
	return r
}

// report fills r from data and returns the pipes it parsed.
func (l Loader) report(r *Report, data []byte) []parsed {
	ps, errs, warns, skip := l.parseAll(r.File, data)
	r.Errors, r.Warnings, r.Placeholders = errs, warns, skip
	for _, p := range ps {
		r.Pipes = append(r.Pipes, p.pipe)
		r.Paths = append(r.Paths, strings.TrimSuffix(strings.TrimSuffix(p.nameField, "name"), "."))
	}
	return ps
}

func (l Loader) parseAll(name string, data []byte) ([]parsed, Errors, Warnings, map[Pos]string) {
	lookup := l.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	d := &decoder{file: name, lookup: lookup, targetTypes: l.TargetTypes}
	if l.SkipEnv {
		d.lookup = func(v string) (string, bool) {
			if val, ok := lookup(v); ok {
				return val, true
			}
			d.placeholder = true
			return Placeholder(v), true
		}
	}
	ps := d.parseFile(data, dirOf(name))
	return ps, d.errs, d.warns, d.skip
}

// lintPipe gives the warnings of one decoded pipe: what is valid but
// would only show at run time. sb and tb are its source and target blocks
// (nil when absent or not mappings).
func (d *decoder) lintPipe(p Pipe, sb, tb *block) {
	if sb == nil {
		return
	}
	vis := p.Source.VisibilityTimeout
	if tb != nil && sb.has("visibility_timeout") && tb.has("timeout") && vis > 0 && vis < 6*p.Target.Timeout {
		d.warnf(sb.at("visibility_timeout"), sb.field("visibility_timeout"),
			"is %s, less than 6 × the target's timeout (%s at %s): a batch that takes the target long comes back to another poller if the heartbeat cannot extend it (AWS advises at least 6 × the function timeout)",
			vis, p.Target.Timeout, tb.at("timeout"))
	}
	// `fifo: false` says the queue is a standard one: no warning.
	if sb.has("batch_window") && p.Source.BatchWindow > 0 && !p.Source.IsFIFO() && !sb.has("fifo") {
		for _, k := range []string{"queue_url", "queue_arn", "queue_name"} {
			if n := deref(sb.vals[k]); n != nil && strings.Contains(n.Value, "${") {
				d.warnf(sb.at("batch_window"), sb.field("batch_window"),
					"is %s and %s comes from a variable: if it names a FIFO queue (.fifo), the batch window is refused when the variable is set (FIFO queues take no batching window); fifo: false says it is a standard queue",
					p.Source.BatchWindow.Round(time.Millisecond), k)
				break
			}
		}
	}
}

// String formats the report's problems, one per line, errors first.
func (r *Report) String() string {
	var b strings.Builder
	for _, e := range r.Errors {
		fmt.Fprintln(&b, e.Error())
	}
	for _, w := range r.Warnings {
		fmt.Fprintln(&b, w.String())
	}
	return b.String()
}

// dirOf is the absolute folder of a pipeline file, against which its
// relative paths are resolved.
func dirOf(name string) string {
	dir, err := filepath.Abs(filepath.Dir(name))
	if err != nil {
		return filepath.Dir(name)
	}
	return dir
}
