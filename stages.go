package pipes

import (
	"errors"
	"fmt"
	"strings"

	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/enrich"
	"github.com/pipesproject/pipes/filter"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/template"
)

// checkStages compiles a pipe's filter and templates and reports what is
// wrong with the file, line and field, as config does.
func checkStages(s config.Pipe) config.Errors {
	var errs config.Errors
	if f := s.Filter; f != nil {
		if len(f.Patterns) > 0 {
			if _, err := filter.CompilePatterns(f.Patterns); err != nil {
				pos, field, msg := s.Pos, "filter.patterns", err.Error()
				var pe *filter.PatternError
				if errors.As(err, &pe) && pe.Index >= 0 && pe.Index < len(f.PatternsPos) {
					pos = f.PatternsPos[pe.Index]
					field = fmt.Sprintf("filter.patterns[%d]", pe.Index)
					msg = strings.TrimPrefix(msg, fmt.Sprintf("patterns[%d]: ", pe.Index))
				}
				errs = append(errs, &config.Error{Pos: pos, Field: field, Msg: msg})
			}
		}
		if f.JQ != "" {
			if _, err := filter.CompileJQ(f.JQ); err != nil {
				errs = append(errs, &config.Error{Pos: f.JQPos, Field: "filter.jq", Msg: err.Error()})
			}
		}
		if f.Expr != "" {
			if _, err := filter.CompileExpr(f.Expr); err != nil {
				errs = append(errs, &config.Error{Pos: f.ExprPos, Field: "filter.expr", Msg: err.Error()})
			}
		}
	}
	if e := s.Enrichment; e != nil {
		switch {
		case e.Type != "jq":
			errs = append(errs, &config.Error{Pos: e.Pos, Field: "enrichment.type",
				Msg: fmt.Sprintf("enrichment type %q is not available in this build yet (have jq)", e.Type)})
		case e.InputTemplate != "":
			errs = append(errs, &config.Error{Pos: e.Pos, Field: "enrichment.input_template",
				Msg: "a jq enrichment takes no input_template: the jq program is the transformation"})
		default:
			if _, err := enrich.NewJQ(e.JQ); err != nil {
				errs = append(errs, &config.Error{Pos: e.Pos, Field: "enrichment.jq", Msg: err.Error()})
			}
		}
	}
	if src := s.Target.InputTemplate; src != "" {
		if _, err := template.Parse(src); err != nil {
			errs = append(errs, &config.Error{Pos: s.Target.Pos, Field: "target.input_template", Msg: err.Error()})
		}
	}
	return errs
}

// templateVars are the reserved variables of a pipe's templates. Without
// AWS ARNs, pipes gives its own identifiers, "pipes:<pipe>[:part]".
func templateVars(s config.Pipe) template.Vars {
	v := template.Vars{
		PipeName:  s.Name,
		PipeARN:   "pipes:" + s.Name,
		SourceARN: s.Source.QueueARN,
		TargetARN: "pipes:" + s.Name + ":target",
	}
	if v.SourceARN == "" {
		v.SourceARN = "pipes:" + s.Name + ":source"
	}
	if s.Enrichment != nil {
		v.EnrichmentARN = "pipes:" + s.Name + ":enrichment"
	}
	return v
}

// Enricher makes a pipe's enrichment stage (nil when the file has none).
func Enricher(s config.Pipe) (pipe.Enricher, error) {
	e := s.Enrichment
	if e == nil {
		return nil, nil
	}
	if e.Type != "jq" {
		return nil, fmt.Errorf("enrichment type %q is not available", e.Type)
	}
	j, err := enrich.NewJQ(e.JQ)
	if err != nil {
		return nil, fmt.Errorf("enrichment.jq: %w", err)
	}
	return j, nil
}

// Stages makes a pipe's filter and target transformer (nil when the file
// has none), as `pipes run` uses them; `pipes test` runs them offline.
func Stages(s config.Pipe) (pipe.Filter, pipe.Transformer, error) {
	var flt pipe.Filter
	if f := s.Filter; f != nil {
		var err error
		flt, err = filter.New(filter.Spec{Patterns: f.Patterns, JQ: f.JQ, Expr: f.Expr})
		if err != nil {
			return nil, nil, fmt.Errorf("filter: %w", err)
		}
	}
	var tr pipe.Transformer
	if src := s.Target.InputTemplate; src != "" {
		t, err := template.Parse(src)
		if err != nil {
			return nil, nil, fmt.Errorf("target.input_template: %w", err)
		}
		tr = template.NewTransformer(t, templateVars(s))
	}
	return flt, tr, nil
}
