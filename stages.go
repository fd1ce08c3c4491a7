package pipes

import (
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/pipe"
)

// checkStages compiles a pipe's filter and templates to report problems
// with their positions.
func checkStages(s config.Pipe) config.Errors {
	var errs config.Errors
	if s.Filter != nil {
		errs = append(errs, &config.Error{Pos: s.Pos, Field: "filter", Msg: "filters are not available in this build yet"})
	}
	if s.Target.InputTemplate != "" {
		errs = append(errs, &config.Error{Pos: s.Target.Pos, Field: "target.input_template", Msg: "input templates are not available in this build yet"})
	}
	return errs
}

// buildStages makes a pipe's filter and target transformer.
func buildStages(s config.Pipe) (pipe.Filter, pipe.Transformer, error) {
	return nil, nil, nil
}
