package pipes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/enrich"
	"github.com/pipesproject/pipes/filter"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/target/stepfunctions"
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
				errs = append(errs, &config.Error{Pos: inside(f.JQSpan, f.JQPos, err), Field: "filter.jq", Msg: err.Error()})
			}
		}
		if f.Expr != "" {
			if _, err := filter.CompileExpr(f.Expr); err != nil {
				errs = append(errs, &config.Error{Pos: inside(f.ExprSpan, f.ExprPos, err), Field: "filter.expr", Msg: err.Error()})
			}
		}
	}
	if e := s.Enrichment; e != nil {
		errs = append(errs, checkEnrichment(e)...)
	}
	if src := s.Target.InputTemplate; src != "" {
		if _, err := template.Parse(src); err != nil {
			errs = append(errs, &config.Error{Pos: inside(s.Target.InputTemplateSpan, s.Target.Pos, err), Field: "target.input_template", Msg: err.Error()})
		}
	}
	return errs
}

// inside is where in the file err, a jq, expr or template error at an
// offset of the text of span, is: its own line and column when the error
// says where, else where the text starts (or block, when unknown).
func inside(span config.Span, block config.Pos, err error) config.Pos {
	if span.Start.Line == 0 {
		return block
	}
	var fe *filter.SyntaxError
	var te *template.SyntaxError
	switch {
	case errors.As(err, &fe):
		return span.At(fe.Offset)
	case errors.As(err, &te):
		return span.At(te.Offset)
	}
	return span.Start
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

// checkEnrichment checks what config cannot: the jq program, the input
// template and the http enrichment's parameters.
func checkEnrichment(e *config.Enrichment) config.Errors {
	var errs config.Errors
	bad := func(field, msg string) {
		errs = append(errs, &config.Error{Pos: e.KeyPos.At(field, e.Pos), Field: "enrichment." + field, Msg: msg})
	}
	badAt := func(span config.Span, field string, err error) {
		errs = append(errs, &config.Error{Pos: inside(span, e.Pos, err), Field: "enrichment." + field, Msg: err.Error()})
	}
	if e.Type == "jq" {
		if e.InputTemplate != "" {
			bad("input_template", "a jq enrichment takes no input_template: the jq program is the transformation")
		} else if _, err := enrich.NewJQ(e.JQ); err != nil {
			badAt(e.JQSpan, "jq", err)
		}
		return errs
	}
	var tmpl *template.Template
	if e.InputTemplate != "" {
		t, err := template.Parse(e.InputTemplate)
		if err != nil {
			badAt(e.InputTemplateSpan, "input_template", err)
		}
		tmpl = t
	}
	switch e.Type {
	case "http":
		if _, err := enrich.NewHTTP(httpEnrichmentConfig(e, tmpl, template.Vars{}, nil)); err != nil {
			errs = append(errs, located(err, "enrichment", e.Pos, e.KeyPos)...)
		}
		if _, err := sigv4Sign(context.Background(), e.Auth, e.Region, e.URL, nil); err != nil {
			bad("auth", err.Error())
		}
	case "lambda":
		if e.FunctionName == "" {
			bad("function_name", "function_name is required for a lambda enrichment")
		}
	case "stepfunctions":
		if err := stepfunctions.CheckARN(e.StateMachineARN); err != nil {
			bad("state_machine_arn", err.Error())
		}
	default:
		bad("type", fmt.Sprintf("enrichment type %q is not available (have http, lambda, stepfunctions, jq)", e.Type))
	}
	return errs
}

func httpEnrichmentConfig(e *config.Enrichment, tmpl *template.Template, vars template.Vars, log *slog.Logger) enrich.HTTPConfig {
	return enrich.HTTPConfig{
		URL: e.URL, Method: e.Method, Batch: e.Batch, Headers: e.Headers, Query: e.Query, PathParameters: e.PathParameters, Timeout: e.Timeout,
		InsecureSkipVerify: e.InsecureSkipVerify, Logger: log, Template: tmpl, Vars: vars,
	}
}

// Enricher makes a pipe's enrichment stage (nil when the file has none),
// without a logger or metrics: see EnricherWith.
func Enricher(s config.Pipe) (pipe.Enricher, error) {
	return EnricherWith(context.Background(), s, nil)
}

// EnricherWith makes a pipe's enrichment stage (nil when the file has
// none). env gives the logger and the metrics that count Lambda calls; nil
// discards both. It does no network I/O (a lambda enrichment loads the AWS
// configuration from environment and files). An http enrichment holds
// idle connections until its Close.
func EnricherWith(ctx context.Context, s config.Pipe, env *Env) (pipe.Enricher, error) {
	e := s.Enrichment
	if e == nil {
		return nil, nil
	}
	log := slog.New(slog.DiscardHandler)
	var onCall func(string)
	if env != nil {
		if env.Logger != nil {
			log = env.Logger.With("pipe", s.Name, "stage", "enrichment")
		}
		if m := env.Metrics; m != nil {
			name := s.Name
			onCall = func(op string) { m.CountCall(name, op) }
		}
	}
	var tmpl *template.Template
	if e.InputTemplate != "" && e.Type != "jq" {
		t, err := template.Parse(e.InputTemplate)
		if err != nil {
			return nil, fmt.Errorf("enrichment.input_template: %w", err)
		}
		tmpl = t
	}
	vars := templateVars(s)
	switch e.Type {
	case "jq":
		if e.InputTemplate != "" {
			return nil, errors.New("enrichment.input_template: a jq enrichment takes no input_template")
		}
		j, err := enrich.NewJQ(e.JQ)
		if err != nil {
			return nil, fmt.Errorf("enrichment.jq: %w", err)
		}
		return j, nil
	case "http":
		cfg := httpEnrichmentConfig(e, tmpl, vars, log)
		sign, err := sigv4Sign(ctx, e.Auth, e.Region, e.URL, nil)
		if err != nil {
			return nil, fmt.Errorf("enrichment: %w", err)
		}
		cfg.Sign = sign
		h, err := enrich.NewHTTP(cfg)
		if err != nil {
			return nil, fmt.Errorf("enrichment: %w", err)
		}
		return h, nil
	case "lambda":
		l, err := enrich.NewLambda(ctx, enrich.LambdaConfig{
			FunctionName: e.FunctionName, Region: e.Region, Endpoint: e.Endpoint, Timeout: e.Timeout,
			OnCall: onCall, Logger: log, Template: tmpl, Vars: vars,
		})
		if err != nil {
			return nil, fmt.Errorf("enrichment: %w", err)
		}
		return l, nil
	case "stepfunctions":
		sf, err := enrich.NewStepFunctions(ctx, enrich.StepFunctionsConfig{
			StateMachineARN: e.StateMachineARN, Region: e.Region, Endpoint: e.Endpoint, Timeout: e.Timeout,
			OnCall: onCall, Logger: log, Template: tmpl, Vars: vars,
		})
		if err != nil {
			return nil, fmt.Errorf("enrichment: %w", err)
		}
		return sf, nil
	}
	return nil, fmt.Errorf("enrichment type %q is not available", e.Type)
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
