// Package param holds the templated parameters of pipes' AWS targets: a
// message group id, a bus name, a detail type… given as a constant, a Pipes
// dynamic path or an input template, and rendered per event (SPEC.md §5.1,
// dynamic path parameters).
package param

import (
	"fmt"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/template"
)

// Param is a target parameter: a constant, or a template rendered per
// event. The zero Param is an unset constant. It is immutable and safe for
// concurrent use.
type Param struct {
	text string
	tmpl *template.Template
}

// Parse reads a parameter: a Pipes dynamic path (`$.body.id`, the whole
// value) or a value with `<$…>` / `<aws.…>` placeholders is a template;
// anything else is a constant. name says which parameter it is, for errors.
func Parse(name, v string) (Param, error) {
	t, err := template.ParseParameter(v)
	switch {
	case err != nil:
		return Param{}, fmt.Errorf("%s %q: %w", name, v, err)
	case t == nil:
		return Param{text: v}, nil
	}
	return Param{tmpl: t}, nil
}

// Set reports whether the parameter was given.
func (p Param) Set() bool { return p.tmpl != nil || p.text != "" }

// Template returns the parameter's template, nil for a constant.
func (p Param) Template() *template.Template { return p.tmpl }

// String returns the parameter as configured, for errors.
func (p Param) String() string {
	if p.tmpl != nil {
		return p.tmpl.String()
	}
	return p.text
}

// Render returns the parameter's value for ev.
func (p Param) Render(ev *pipe.Event, vars template.Vars) string {
	if p.tmpl == nil {
		return p.text
	}
	out, err := p.tmpl.Render(ev, vars)
	if err != nil { // only for a nil event
		return ""
	}
	return string(out)
}

// RecordView is ev seen as its source record: templates rendered against it
// see the record, whatever the payload has become.
func RecordView(ev *pipe.Event) *pipe.Event {
	v := &pipe.Event{Message: ev.Message}
	v.SetBody(ev.Body())
	return v
}

// MessageGroup renders the message group id and deduplication id of the
// messages sent to an SQS queue or an SNS topic. It is read-only once
// built and safe for concurrent use.
type MessageGroup struct {
	// Group is the message group id: required on a FIFO destination, sent
	// when it renders non-empty on a standard one.
	Group Param
	// Dedup is the message deduplication id; an empty rendering sends none.
	Dedup Param
	// Vars are the reserved variables of the templates.
	Vars template.Vars
	// FromRecord renders against the source record instead of the payload.
	FromRecord bool
	// FIFO is true for a FIFO queue or topic.
	FIFO bool
	// Kind names the destination in errors: "queue" or "topic".
	Kind string
}

// MaxIDLen is the longest message group id and message deduplication id
// SQS and SNS take, in characters.
const MaxIDLen = 128

// Check returns why a constant group or deduplication id can never be
// sent (longer than MaxIDLen), nil when it can or is a template.
func (m MessageGroup) Check() error {
	for _, p := range []struct {
		name string
		p    Param
	}{{"message group id", m.Group}, {"message deduplication id", m.Dedup}} {
		if p.p.tmpl == nil && len(p.p.text) > MaxIDLen {
			return fmt.Errorf("the %s is %d characters long; SQS and SNS take at most %d", p.name, len(p.p.text), MaxIDLen)
		}
	}
	return nil
}

// Render returns ev's group id and deduplication id, "" for none. A group
// id that renders empty on a FIFO destination, and one that renders longer
// than MaxIDLen (as a deduplication id that does), are pipe.Permanent
// errors: the destination would refuse them on every attempt.
func (m MessageGroup) Render(ev *pipe.Event) (group, dedup string, err error) {
	if !m.Group.Set() && !m.Dedup.Set() {
		return "", "", nil
	}
	view := ev
	if m.FromRecord {
		view = RecordView(ev)
	}
	group = m.Group.Render(view, m.Vars)
	if group == "" && m.FIFO {
		return "", "", pipe.Permanent(fmt.Errorf("message %s: the message group id %q rendered empty; a FIFO %s needs one", ev.ID(), m.Group, m.Kind))
	}
	dedup = m.Dedup.Render(view, m.Vars)
	for _, id := range []struct{ name, v string }{{"message group id", group}, {"message deduplication id", dedup}} {
		if len(id.v) > MaxIDLen {
			return "", "", pipe.Permanent(fmt.Errorf("message %s: the %s rendered %d characters long; a %s takes at most %d", ev.ID(), id.name, len(id.v), m.Kind, MaxIDLen))
		}
	}
	return group, dedup, nil
}
