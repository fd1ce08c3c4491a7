package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
)

type validateFlags struct {
	files        []string
	envFile      string
	skipEnv      bool
	denyWarnings bool
}

func newValidateCmd(stdout, stderr io.Writer) *cobra.Command {
	var f validateFlags
	cmd := &cobra.Command{
		Use:   "validate -f FILE|FOLDER|FOLDER/... [--env-file FILE] [--skip-env] [--deny-warnings]",
		Short: "Check pipeline files without touching any queue: every problem of every file at once, file:line:col: field: message",
		Long: `Checks pipeline files without touching any queue and prints every problem
of every file at once, one per line on standard error:

  file:line:col: field: message             an error
  file:line:col: warning: field: message    valid, but would only show at run time

Errors are the loader's (keys, types, ranges, ${VAR}s) and those of compiling
each pipe's filters, templates, enrichment and target (patterns, jq, expr,
input templates, header and URL placeholders), gathered together: a bad
pattern shows next to a bad batch_size. A folder (or FOLDER/...) is walked
recursively for *.yaml and *.yml files, leaving out test files (*_test.yaml,
*_test.yml) and hidden folders.

--env-file FILE reads KEY=VALUE lines (blank lines and # comments skipped,
"export " allowed, values optionally in single or double quotes) whose
variables come before the process environment's. --skip-env makes a variable
that is unset and has no default a placeholder (placeholder-<name>), and
leaves out the problems of the values made with one.

Warnings: a visibility_timeout below 6 × the target's timeout when both are in
the file; a batch_window on a queue whose URL, ARN or name comes from a
variable (refused if it names a FIFO queue); and those other checks add.

Exit 0 when there is no error (a summary on standard output), 2 when there
is any, 3 with --deny-warnings when there are warnings and no error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return validate(f, stdout, stderr)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&f.files, "file", "f", nil, "pipeline file or folder, walked recursively; FOLDER/... too (repeatable)")
	fl.StringVar(&f.envFile, "env-file", "", "file of KEY=VALUE lines giving ${KEY} its value (before the process environment)")
	fl.BoolVar(&f.skipEnv, "skip-env", false, "unset variables without a default become placeholders instead of errors")
	fl.BoolVar(&f.denyWarnings, "deny-warnings", false, "exit 3 when there are warnings")
	return cmd
}

func validate(f validateFlags, stdout, stderr io.Writer) error {
	if len(f.files) == 0 {
		return usageErr(errors.New("no pipeline file: give one or more with -f FILE or -f FOLDER"))
	}
	loader := config.Loader{SkipEnv: f.skipEnv}
	if f.envFile != "" {
		data, err := os.ReadFile(f.envFile)
		if err != nil {
			return usageErr(fmt.Errorf("--env-file: %w", err))
		}
		vars, err := parseEnvFile(f.envFile, data)
		if err != nil {
			return usageErr(err)
		}
		loader.LookupEnv = func(name string) (string, bool) {
			if v, ok := vars[name]; ok {
				return v, true
			}
			return os.LookupEnv(name)
		}
	}
	files, walkErrs := validateFiles(f.files)
	reports := loader.Reports(files...)
	reg := pipes.NewRegistry()
	nErr, nWarn, nPipes := len(walkErrs), 0, 0
	for _, e := range walkErrs {
		fmt.Fprintln(stderr, e)
	}
	for i := range reports {
		r := &reports[i]
		r.Errors = append(r.Errors, compileErrors(reg, r)...)
		sortErrors(r.Errors)
		fmt.Fprint(stderr, r.String())
		nErr += len(r.Errors)
		nWarn += len(r.Warnings)
		nPipes += len(r.Pipes)
	}
	if nErr > 0 {
		return usageErr(fmt.Errorf("%s and %s in %s", plural(nErr, "error"), plural(nWarn, "warning"), plural(len(files), "file")))
	}
	fmt.Fprintf(stdout, "ok: %s in %s, %s\n", plural(nPipes, "pipe"), plural(len(files), "file"), plural(nWarn, "warning"))
	if f.denyWarnings && nWarn > 0 {
		return &exitError{code: 3, err: fmt.Errorf("%s and --deny-warnings", plural(nWarn, "warning"))}
	}
	return nil
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// compileErrors are the problems the registry's checks find in the pipes
// of r (compiling filters, templates, targets), less those about a field
// the loader already found wrong or one made with a --skip-env
// placeholder, or about the block or a key of such a field (they would
// repeat the problem, or be about a placeholder).
func compileErrors(reg *pipes.Registry, r *config.Report) config.Errors {
	var out config.Errors
	for i, p := range r.Pipes {
		var bad []string
		for _, e := range r.Errors {
			if pipeOf(r.Pipes, e.Pos) == i {
				bad = append(bad, pipeField(e.Field, e.Msg))
			}
		}
		for pos, field := range r.Placeholders {
			if pipeOf(r.Pipes, pos) == i {
				bad = append(bad, pipeField(field, ""))
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
			f := pipeField(e.Field, e.Msg)
			if slices.ContainsFunc(bad, func(b string) bool { return related(b, f) }) {
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

// pipeField is a field's path inside its pipe ("source.batch_size" of
// pipes[1].source.batch_size, indexes dropped); a pipe's "X is required"
// is about X.
func pipeField(field, msg string) string {
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

// related reports whether one field is the other or under it.
func related(a, b string) bool {
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

func sortErrors(es config.Errors) {
	slices.SortStableFunc(es, func(a, b *config.Error) int {
		return cmp.Or(
			cmp.Compare(a.Pos.Line, b.Pos.Line),
			cmp.Compare(a.Pos.Column, b.Pos.Column),
			cmp.Compare(a.Field, b.Field),
			cmp.Compare(a.Msg, b.Msg),
		)
	})
}

// validateFiles expands the -f arguments: a file is itself, a folder (or
// FOLDER/...) its *.yaml and *.yml files at any depth, in name order,
// less test files and hidden folders. A path named twice is checked once.
// Arguments that give no file are reported.
func validateFiles(args []string) ([]string, []string) {
	var files, problems []string
	seen := map[string]bool{}
	add := func(p string) {
		key := p
		if abs, err := filepath.Abs(p); err == nil {
			key = abs
		}
		if !seen[key] {
			seen[key] = true
			files = append(files, p)
		}
	}
	for _, arg := range args {
		root := arg
		if r, ok := strings.CutSuffix(arg, "/..."); ok {
			root = r
			if root == "" {
				root = "/"
			}
		} else if arg == "..." {
			root = "."
		}
		info, err := os.Stat(root)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: cannot be read: %v", arg, unwrapPath(err)))
			continue
		case !info.IsDir():
			add(root)
			continue
		}
		found := false
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: cannot be read: %v", p, unwrapPath(err)))
				return nil
			}
			name := d.Name()
			if d.IsDir() {
				if p != root && (strings.HasPrefix(name, ".") || name == "node_modules") {
					return filepath.SkipDir
				}
				return nil
			}
			ext := strings.ToLower(filepath.Ext(name))
			if (ext != ".yaml" && ext != ".yml") || strings.HasSuffix(strings.TrimSuffix(name, filepath.Ext(name)), "_test") {
				return nil
			}
			found = true
			add(p)
			return nil
		})
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", arg, err))
		}
		if !found {
			problems = append(problems, fmt.Sprintf("%s: no *.yaml or *.yml pipeline file in it", arg))
		}
	}
	return files, problems
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// parseEnvFile reads KEY=VALUE lines: blank lines and lines starting with
// # are skipped, "export " may lead, a value may be in double quotes (with
// \n, \t, \", \\ escapes) or single quotes (as written), an unquoted value
// is trimmed and ends at " #". Errors name the file and line, never a
// value.
func parseEnvFile(name string, data []byte) (map[string]string, error) {
	vars := map[string]string{}
	var errs []error
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		key, value, ok := strings.Cut(line, "=")
		key = strings.TrimSpace(key)
		if !ok || !envName(key) {
			errs = append(errs, fmt.Errorf("%s:%d: want KEY=VALUE, KEY being letters, digits and _", name, i+1))
			continue
		}
		v, err := envValue(strings.TrimSpace(value))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %s: %w", name, i+1, key, err))
			continue
		}
		vars[key] = v
	}
	return vars, errors.Join(errs...)
}

func envName(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, c := range []byte(s) {
		if c != '_' && !(c >= 'A' && c <= 'Z') && !(c >= 'a' && c <= 'z') && !(c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func envValue(v string) (string, error) {
	switch {
	case strings.HasPrefix(v, "'"):
		end := strings.IndexByte(v[1:], '\'')
		if end < 0 {
			return "", errors.New("the single quote is not closed")
		}
		if rest := strings.TrimSpace(v[end+2:]); rest != "" && !strings.HasPrefix(rest, "#") {
			return "", errors.New("text after the closing quote")
		}
		return v[1 : end+1], nil
	case strings.HasPrefix(v, `"`):
		var b strings.Builder
		for i := 1; i < len(v); i++ {
			c := v[i]
			switch {
			case c == '"':
				if rest := strings.TrimSpace(v[i+1:]); rest != "" && !strings.HasPrefix(rest, "#") {
					return "", errors.New("text after the closing quote")
				}
				return b.String(), nil
			case c == '\\' && i+1 < len(v):
				i++
				switch v[i] {
				case 'n':
					b.WriteByte('\n')
				case 't':
					b.WriteByte('\t')
				case 'r':
					b.WriteByte('\r')
				default:
					b.WriteByte(v[i])
				}
			default:
				b.WriteByte(c)
			}
		}
		return "", errors.New("the double quote is not closed")
	}
	if i := strings.Index(v, " #"); i >= 0 {
		v = strings.TrimSpace(v[:i])
	}
	return v, nil
}
