package sqstarget

import (
	"fmt"
	"strings"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/template"
)

// param is a target parameter: a constant, or a template rendered per
// event (SPEC.md §5.1, dynamic path parameters).
type param struct {
	text string
	tmpl *template.Template
}

// parseParam reads a parameter: a Pipes dynamic path (`$.body.id`, the
// whole value) or a value with `<$…>` / `<aws.…>` placeholders is a
// template; anything else is a constant.
func parseParam(name, v string) (param, error) {
	src := v
	switch {
	case v == "$" || strings.HasPrefix(v, "$.") || strings.HasPrefix(v, "$["):
		src = "<" + v + ">"
	case !strings.Contains(v, "<$") && !strings.Contains(v, "<aws."):
		return param{text: v}, nil
	}
	t, err := template.Parse(src)
	if err != nil {
		return param{}, fmt.Errorf("%s %q: %w", name, v, err)
	}
	return param{tmpl: t}, nil
}

// set reports whether the parameter was given.
func (p param) set() bool { return p.tmpl != nil || p.text != "" }

// String returns the parameter as configured, for errors.
func (p param) String() string {
	if p.tmpl != nil {
		return p.tmpl.String()
	}
	return p.text
}

// render returns the parameter's value for ev.
func (p param) render(ev *pipe.Event, vars template.Vars) string {
	if p.tmpl == nil {
		return p.text
	}
	out, err := p.tmpl.Render(ev, vars)
	if err != nil { // only for a nil event
		return ""
	}
	return string(out)
}

// recordView is ev seen as its source record: templates rendered against it
// see the record, whatever the payload has become.
func recordView(ev *pipe.Event) *pipe.Event {
	v := &pipe.Event{Message: ev.Message}
	v.SetBody(ev.Body())
	return v
}
