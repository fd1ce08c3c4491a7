package main

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/internal/validation"
)

type validateFlags struct {
	files        []string
	exclude      []string
	envFile      string
	skipEnv      bool
	denyWarnings bool
}

func newValidateCmd(stdout, stderr io.Writer) *cobra.Command {
	var f validateFlags
	cmd := &cobra.Command{
		Use:   "validate -f FILE|FOLDER|FOLDER/... [--exclude GLOB] [--env-file FILE] [--skip-env] [--deny-warnings]",
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
*_test.yml), hidden folders and node_modules. A file whose YAML documents
all carry apiVersion and kind is a Kubernetes manifest, not a pipeline: it
is skipped with a note. --exclude GLOB (repeatable) leaves out the files and
folders whose name, or path under the folder given, matches GLOB (*, ?,
[...] as in Go's path.Match): --exclude '*.k8s.yaml' --exclude 'vendor'.

--env-file FILE reads KEY=VALUE lines (blank lines and # comments skipped,
"export " allowed, values optionally in single or double quotes) whose
variables come before the process environment's. --skip-env makes a variable
that is unset and has no default a placeholder (placeholder-<name>), and
leaves out the problems of the values made with one.

Warnings: a visibility_timeout below 6 × the target's timeout when both are in
the file; a batch_window on a queue whose URL, ARN or name comes from a
variable (refused if it names a FIFO queue); and those other checks add.

Exit 0 when there is no error (a summary on standard output), 2 when there
is any ("7 errors in 1 of 7 files"), 3 with --deny-warnings when there are
warnings and no error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return validate(f, stdout, stderr)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&f.files, "file", "f", nil, "pipeline file or folder, walked recursively; FOLDER/... too (repeatable)")
	fl.StringArrayVar(&f.exclude, "exclude", nil, "leave out the files and folders whose name or path under the folder matches GLOB (*, ?, [...]; repeatable)")
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
	w, err := walkPipelineFiles(f.files, f.exclude)
	if err != nil {
		return usageErr(err)
	}
	files := w.files
	for _, n := range w.notes {
		fmt.Fprintln(stderr, n)
	}
	reports := loader.Reports(files...)
	reg := pipes.NewRegistry()
	nErr, nWarn, nPipes, bad := len(w.problems), 0, 0, 0
	for _, e := range w.problems {
		fmt.Fprintln(stderr, e)
	}
	for i := range reports {
		r := &reports[i]
		r.Errors = append(r.Errors, validation.Check(reg, r)...)
		sortErrors(r.Errors)
		fmt.Fprint(stderr, r.String())
		nErr += len(r.Errors)
		nWarn += len(r.Warnings)
		nPipes += len(r.Pipes)
		if len(r.Errors) > 0 {
			bad++
		}
	}
	if nErr > 0 {
		what := plural(nErr, "error")
		if nWarn > 0 {
			what += " and " + plural(nWarn, "warning")
		}
		return usageErr(fmt.Errorf("%s in %s", what, someOf(bad, len(files))))
	}
	fmt.Fprintf(stdout, "ok: %s in %s, %s%s\n", plural(nPipes, "pipe"), plural(len(files), "file"), plural(nWarn, "warning"), w.skipped())
	if f.denyWarnings && nWarn > 0 {
		return &exitError{code: 3, err: fmt.Errorf("%s and --deny-warnings", plural(nWarn, "warning"))}
	}
	return nil
}

// someOf says how many of the files checked had errors: "1 of 7 files",
// "1 file" when there was one, "7 files" when they all did.
func someOf(bad, files int) string {
	if bad == files || files == 1 {
		return plural(files, "file")
	}
	return strconv.Itoa(bad) + " of " + plural(files, "file")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
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

// walked is what the -f arguments come to: the pipeline files to check,
// the arguments that gave none (problems), and notes on the files left out
// that a user might have expected checked (Kubernetes manifests).
type walked struct {
	files, problems, notes []string
	manifests, excluded    int
}

// skipped says, after the "ok:" summary, what was left out.
func (w walked) skipped() string {
	var parts []string
	if w.manifests > 0 {
		parts = append(parts, plural(w.manifests, "Kubernetes manifest")+" skipped")
	}
	if w.excluded > 0 {
		parts = append(parts, strconv.Itoa(w.excluded)+" excluded")
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// validateFiles is walkPipelineFiles without exclusions or notes.
func validateFiles(args []string) ([]string, []string) {
	w, _ := walkPipelineFiles(args, nil)
	return w.files, w.problems
}

// walkPipelineFiles expands the -f arguments: a file is itself, a folder
// (or FOLDER/...) its *.yaml and *.yml files at any depth, in name order,
// less test files, hidden folders and node_modules. A file or folder whose
// name or path under the folder matches a glob of exclude is left out; so
// is a Kubernetes manifest (every YAML document carries apiVersion and
// kind), with a note. A path named twice is checked once. Arguments that
// give no file are problems; a glob that is not one is an error.
func walkPipelineFiles(args, exclude []string) (walked, error) {
	var w walked
	for _, g := range exclude {
		if _, err := path.Match(g, ""); err != nil {
			return w, fmt.Errorf("--exclude %q: %w", g, err)
		}
	}
	excluded := func(name, rel string) bool {
		for _, g := range exclude {
			if ok, _ := path.Match(g, name); ok {
				return true
			}
			if ok, _ := path.Match(g, rel); ok {
				return true
			}
		}
		return false
	}
	seen := map[string]bool{}
	add := func(p string) {
		key := p
		if abs, err := filepath.Abs(p); err == nil {
			key = abs
		}
		if seen[key] {
			return
		}
		seen[key] = true
		if isManifest(p) {
			w.manifests++
			w.notes = append(w.notes, fmt.Sprintf("note: %s: skipped: a Kubernetes manifest (apiVersion and kind), not a pipeline file", p))
			return
		}
		w.files = append(w.files, p)
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
			w.problems = append(w.problems, fmt.Sprintf("%s: cannot be read: %v", arg, unwrapPath(err)))
			continue
		case !info.IsDir():
			if excluded(filepath.Base(root), filepath.ToSlash(root)) {
				w.excluded++
				continue
			}
			add(root)
			continue
		}
		found := false
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				w.problems = append(w.problems, fmt.Sprintf("%s: cannot be read: %v", p, unwrapPath(err)))
				return nil
			}
			name := d.Name()
			rel, _ := filepath.Rel(root, p)
			if d.IsDir() {
				if p != root && (strings.HasPrefix(name, ".") || name == "node_modules") {
					return filepath.SkipDir
				}
				if p != root && excluded(name, filepath.ToSlash(rel)) {
					w.excluded++
					return filepath.SkipDir
				}
				return nil
			}
			ext := strings.ToLower(filepath.Ext(name))
			if (ext != ".yaml" && ext != ".yml") || strings.HasSuffix(strings.TrimSuffix(name, filepath.Ext(name)), "_test") {
				return nil
			}
			found = true
			if excluded(name, filepath.ToSlash(rel)) {
				w.excluded++
				return nil
			}
			add(p)
			return nil
		})
		if err != nil {
			w.problems = append(w.problems, fmt.Sprintf("%s: %v", arg, err))
		}
		if !found {
			w.problems = append(w.problems, fmt.Sprintf("%s: no *.yaml or *.yml pipeline file in it", arg))
		}
	}
	if len(w.files) == 0 && len(w.problems) == 0 && len(args) > 0 {
		w.problems = append(w.problems, fmt.Sprintf("%s: no pipeline file left to check%s", strings.Join(args, ", "), w.skipped()))
	}
	return w, nil
}

// isManifest reports whether the file is a Kubernetes manifest: it holds
// YAML documents, each a mapping with apiVersion and kind at its top. A
// file that cannot be read or parsed is not one (the loader says what is
// wrong with it).
func isManifest(name string) bool {
	data, err := os.ReadFile(name)
	if err != nil {
		return false
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	docs := 0
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			return errors.Is(err, io.EOF) && docs > 0
		}
		if len(doc.Content) == 0 {
			continue
		}
		root := doc.Content[0]
		if root.Kind != yaml.MappingNode {
			return false
		}
		keys := map[string]bool{}
		for i := 0; i+1 < len(root.Content); i += 2 {
			keys[root.Content[i].Value] = true
		}
		if !keys["apiVersion"] || !keys["kind"] {
			return false
		}
		docs++
	}
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
