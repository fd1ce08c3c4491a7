package awsimport

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/internal/validation"
)

// checker runs on each imported pipe what `pipes validate` runs on a
// pipeline file (the loader, then the registry's checks), so that the
// importer never writes a pipe that validate refuses (a filter pattern
// over Pipes' 4096 characters, a template over 8192, ...).
type checker struct {
	reg    *pipes.Registry
	loader config.Loader
}

func newChecker(lookupEnv func(string) (string, bool)) *checker {
	if lookupEnv == nil {
		// `pipes import aws` reads no environment: a variable is a
		// placeholder, and what is made with one is not judged, as
		// `pipes validate --skip-env` does.
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	return &checker{reg: pipes.NewRegistry(), loader: config.Loader{SkipEnv: true, LookupEnv: lookupEnv}}
}

// check returns the problems of the pipe p, each at the part of the input
// m read it from.
func (c *checker) check(m *mapper, p *yaml.Node) ([]Problem, error) {
	data, err := yaml.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("writing pipe %s to check it: %w", m.name, err)
	}
	rep := c.loader.Report("imported.yaml", data)
	errs := append(rep.Errors, validation.Check(c.reg, &rep)...)
	var out []Problem
	for _, e := range errs {
		what := "the imported pipe"
		if e.Field != "" {
			what = "the imported " + e.Field
		}
		out = append(out, Problem{Path: m.inputPath(e.Field), Msg: fmt.Sprintf("%s does not validate: %s; the pipe is not imported", what, e.Msg)})
	}
	return out, nil
}

var patternField = regexp.MustCompile(`^filter\.patterns\[(\d+)\]`)

// inputPath is the part of the input a field of the imported pipe comes
// from.
func (m *mapper) inputPath(field string) string {
	if sm := patternField.FindStringSubmatch(field); sm != nil {
		i, _ := strconv.Atoi(sm[1])
		return m.at("SourceParameters", "FilterCriteria", "Filters", fmt.Sprintf("[%d]", i), "Pattern")
	}
	section, _, _ := strings.Cut(field, ".")
	section, _, _ = strings.Cut(section, "[")
	switch {
	case field == "enrichment.input_template":
		return m.at("EnrichmentParameters", "InputTemplate")
	case field == "target.input_template":
		return m.at("TargetParameters", "InputTemplate")
	case section == "source":
		return m.at("Source")
	case section == "filter":
		return m.at("SourceParameters", "FilterCriteria")
	case section == "enrichment":
		return m.at("Enrichment")
	case section == "target":
		return m.at("Target")
	case section == "logging":
		return m.at("LogConfiguration")
	case section == "name":
		return m.at("Name")
	}
	return m.base
}
