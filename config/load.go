package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Loader reads pipeline files. The zero value is ready to use and reads
// the process environment. A Loader holds no state: it is safe for
// concurrent use.
type Loader struct {
	// LookupEnv gives ${NAME} its value; nil means os.LookupEnv. Tests and
	// embedders set it to interpolate from somewhere else.
	LookupEnv func(string) (string, bool)
	// SkipEnv makes a variable that is unset and has no default a
	// placeholder (see Placeholder) instead of an error, and leaves out
	// the problems of the values made with one: `pipes validate
	// --skip-env` checks files without their deployment's environment.
	SkipEnv bool
	// TargetTypes are target type names accepted beside the built-in ones:
	// the types an embedder registered (pipes.Registry.TargetTypes). A
	// target block of such a type takes the keys every target may have
	// (url, headers, input_template, retry, …); its factory reads them
	// from the spec and says what is missing. Names already built in
	// change nothing.
	TargetTypes []string
}

// Load is Loader{}.Load: it reads pipeline files with the process
// environment.
func Load(paths ...string) ([]Pipe, error) {
	return Loader{}.Load(paths...)
}

// Load reads every pipe of the given paths, in order. A path is a file, or a
// folder whose *.yaml and *.yml files are read in name order (not its
// sub-folders). A file named twice is read once. Pipe names must be unique
// across all files.
//
// When the files are invalid the error is Errors, holding every problem of
// every file; a file or folder that cannot be read gives a wrapped
// filesystem error instead. Load blocks on file reads only.
func (l Loader) Load(paths ...string) ([]Pipe, error) {
	if len(paths) == 0 {
		return nil, errors.New("loading pipelines: no file or folder given")
	}
	files, err := pipelineFiles(paths)
	if err != nil {
		return nil, err
	}
	var all []parsed
	var errs Errors
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("reading pipeline file: %w", err)
		}
		ps, es := l.parse(f, data)
		all = append(all, ps...)
		errs = append(errs, es...)
	}
	errs = append(errs, duplicateNames(all)...)
	if len(errs) > 0 {
		errs.sort()
		return nil, errs
	}
	return pipes(all), nil
}

// Parse decodes one pipeline file's bytes; name is the file's path, used in
// error positions and for Pipe.Dir. When the file is invalid the error is
// Errors, holding every problem.
func (l Loader) Parse(name string, data []byte) ([]Pipe, error) {
	ps, errs := l.parse(name, data)
	errs = append(errs, duplicateNames(ps)...)
	if len(errs) > 0 {
		errs.sort()
		return nil, errs
	}
	return pipes(ps), nil
}

func (l Loader) parse(name string, data []byte) ([]parsed, Errors) {
	ps, errs, _ := l.parseWarn(name, data)
	return ps, errs
}

// Lint is Load that also gives the warnings of valid files: things
// `pipes validate` reports that would only show at run time. Warnings are
// given only when there are no errors.
func (l Loader) Lint(paths ...string) ([]Pipe, Warnings, error) {
	if len(paths) == 0 {
		return nil, nil, errors.New("loading pipelines: no file or folder given")
	}
	files, err := pipelineFiles(paths)
	if err != nil {
		return nil, nil, err
	}
	var all []parsed
	var errs Errors
	var warns Warnings
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, fmt.Errorf("reading pipeline file: %w", err)
		}
		ps, es, ws := l.parseWarn(f, data)
		all = append(all, ps...)
		errs = append(errs, es...)
		warns = append(warns, ws...)
	}
	errs = append(errs, duplicateNames(all)...)
	if len(errs) > 0 {
		errs.sort()
		return nil, nil, errs
	}
	warns.sort()
	return pipes(all), warns, nil
}

func (l Loader) parseWarn(name string, data []byte) ([]parsed, Errors, Warnings) {
	ps, errs, warns, _ := l.parseAll(name, data)
	return ps, errs, warns
}

// pipelineFiles expands folders to their pipeline files and drops repeats.
func pipelineFiles(paths []string) ([]string, error) {
	var files []string
	seen := map[string]bool{}
	add := func(f string) {
		key := f
		if abs, err := filepath.Abs(f); err == nil {
			key = abs
		}
		if !seen[key] {
			seen[key] = true
			files = append(files, f)
		}
	}
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("reading pipeline file: %w", err)
		}
		if !info.IsDir() {
			add(p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, fmt.Errorf("reading pipeline folder: %w", err)
		}
		found := false
		for _, e := range entries {
			ext := strings.ToLower(filepath.Ext(e.Name()))
			if e.IsDir() || (ext != ".yaml" && ext != ".yml") {
				continue
			}
			add(filepath.Join(p, e.Name()))
			found = true
		}
		if !found {
			return nil, fmt.Errorf("reading pipeline folder %s: no *.yaml or *.yml file in it", p)
		}
	}
	return files, nil
}

// duplicateNames reports every pipe whose name an earlier pipe has.
func duplicateNames(ps []parsed) Errors {
	var errs Errors
	first := map[string]Pos{}
	for _, p := range ps {
		if p.pipe.Name == "" {
			continue
		}
		if at, dup := first[p.pipe.Name]; dup {
			errs = append(errs, &Error{Pos: p.namePos, Field: p.nameField,
				Msg: fmt.Sprintf("duplicate pipe name %q, first defined at %s", p.pipe.Name, at)})
			continue
		}
		first[p.pipe.Name] = p.namePos
	}
	return errs
}

func pipes(ps []parsed) []Pipe {
	out := make([]Pipe, len(ps))
	for i, p := range ps {
		out[i] = p.pipe
	}
	return out
}
