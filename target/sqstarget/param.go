package sqstarget

import (
	tparam "github.com/pipesproject/pipes/internal/kit/param"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/template"
)

// param is a target parameter (see internal/kit/param) with its template at
// hand: tmpl is nil for a constant.
type param struct {
	tparam.Param
	tmpl *template.Template
}

// parseParam reads a parameter with tparam.Parse.
func parseParam(name, v string) (param, error) {
	p, err := tparam.Parse(name, v)
	if err != nil {
		return param{}, err
	}
	return param{Param: p, tmpl: p.Template()}, nil
}

// render returns the parameter's value for ev.
func (p param) render(ev *pipe.Event, vars template.Vars) string { return p.Render(ev, vars) }
