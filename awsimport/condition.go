package awsimport

import (
	"fmt"
	"maps"
	"strings"
)

// condition is what is known of one condition of the template's
// Conditions section: its value, or why it cannot be decided.
type condition struct {
	evaluating bool // being evaluated: met again, it refers to itself
	decided    bool
	value      bool
	why        string // when not decided
}

// condition evaluates the template's condition name (Fn::Equals, Fn::And,
// Fn::Or, Fn::Not and {Condition: other}, nested), once: its values come
// from --param, then the parameters' Default, then the pseudo parameters
// the importer knows. ok is false when it cannot be decided with these
// parameters; why then says what is missing.
func (r *resolver) condition(name string) (value, ok bool, why string) {
	if c, seen := r.condCache[name]; seen {
		if c.evaluating {
			return false, false, fmt.Sprintf("condition %s refers to itself", name)
		}
		return c.value, c.decided, c.why
	}
	def, has := r.conds[name]
	if !has {
		c := &condition{why: fmt.Sprintf("there is no condition %s in the file's Conditions", name)}
		r.condCache[name] = c
		return false, false, c.why
	}
	c := &condition{evaluating: true}
	r.condCache[name] = c
	c.value, c.decided, c.why = r.evalCondition(def, "Conditions."+name)
	c.evaluating = false
	return c.value, c.decided, c.why
}

// evalCondition evaluates a condition function at path.
func (r *resolver) evalCondition(v any, path string) (value, ok bool, why string) {
	name, arg, isFn := intrinsic(v)
	if !isFn {
		if b, isBool := v.(bool); isBool {
			return b, true, ""
		}
		return false, false, fmt.Sprintf("%s is not a condition function (Fn::Equals, Fn::And, Fn::Or, Fn::Not, Condition)", path)
	}
	switch name {
	case "Condition":
		other, _ := arg.(string)
		return r.condition(other)
	case "Fn::Equals":
		l := list(arg)
		if len(l) != 2 {
			return false, false, fmt.Sprintf("%s.Fn::Equals is not a list of two values", path)
		}
		a, okA, whyA := r.condValue(l[0], path+".Fn::Equals[0]")
		b, okB, whyB := r.condValue(l[1], path+".Fn::Equals[1]")
		switch {
		case !okA:
			return false, false, whyA
		case !okB:
			return false, false, whyB
		}
		return a == b, true, ""
	case "Fn::Not":
		l := list(arg)
		if len(l) != 1 {
			return false, false, fmt.Sprintf("%s.Fn::Not is not a list of one condition", path)
		}
		b, ok, why := r.evalCondition(l[0], path+".Fn::Not[0]")
		return !b, ok, why
	case "Fn::And", "Fn::Or":
		// One false operand makes Fn::And false (one true makes Fn::Or
		// true) whatever the undecided others are.
		decisive := name == "Fn::Or"
		l := list(arg)
		if len(l) == 0 {
			return false, false, fmt.Sprintf("%s.%s is not a list of conditions", path, name)
		}
		undecided := ""
		for i, e := range l {
			b, ok, why := r.evalCondition(e, fmt.Sprintf("%s.%s[%d]", path, name, i))
			switch {
			case !ok && undecided == "":
				undecided = why
			case ok && b == decisive:
				return decisive, true, ""
			}
		}
		if undecided != "" {
			return false, false, undecided
		}
		return !decisive, true, ""
	}
	return false, false, fmt.Sprintf("%s uses %s, which the importer does not evaluate in a condition", path, name)
}

// condValue is the text of a value compared by Fn::Equals; ok is false
// when it is known only at deploy time. Nothing of it is recorded (no
// variable asked for, no note).
func (r *resolver) condValue(v any, path string) (string, bool, string) {
	if name, arg, isFn := intrinsic(v); isFn && name == "Ref" {
		ref, _ := arg.(string)
		if p, ok := r.params[ref]; ok {
			return p, true, ""
		}
		if _, isParam := r.tmplParam[ref]; isParam {
			if p, ok := r.paramFromEnv(ref); ok {
				return p, true, ""
			}
			if _, has := mapping(r.tmplParam[ref])["Default"]; !has {
				return "", false, fmt.Sprintf("parameter %s has no Default and no --param value", ref)
			}
		}
	}
	env, notes := maps.Clone(r.env), len(*r.notes)
	s := r.str(v, path)
	r.env, *r.notes = env, (*r.notes)[:notes]
	if strings.Contains(strings.ReplaceAll(s, "$${", ""), "${") {
		if name, arg, isFn := intrinsic(v); isFn && name == "Ref" {
			ref, _ := arg.(string)
			return "", false, fmt.Sprintf("%s is known only at deploy time (give it with --param %s=...)", ref, ref)
		}
		return "", false, fmt.Sprintf("%s is known only at deploy time", path)
	}
	return unescape(s), true, ""
}

// pickIf is the branch of Fn::If's argument [condition, if true, if
// false] that its condition picks; ok is false when the condition cannot
// be decided (why says so) or the argument is not of that shape.
func (r *resolver) pickIf(arg any) (chosen any, ok bool, cond, why string) {
	l := list(arg)
	if len(l) != 3 {
		return nil, false, "", "Fn::If is not a list of a condition and two values"
	}
	cond, _ = l[0].(string)
	b, ok, why := r.condition(cond)
	if !ok {
		return nil, false, cond, why
	}
	if b {
		return l[1], true, cond, ""
	}
	return l[2], true, cond, ""
}

// isNoValue reports whether v is {"Ref": "AWS::NoValue"}, which removes
// the property (or list entry) it is the value of.
func isNoValue(v any) bool {
	name, arg, ok := intrinsic(v)
	return ok && name == "Ref" && arg == "AWS::NoValue"
}

// decideIfs returns v with every Fn::If whose condition is decided
// replaced by the branch it picks, and every property or list entry that
// is AWS::NoValue removed; keep is false when v itself is removed. An
// Fn::If that cannot be decided stays as it is, for str to leave to the
// environment. v is not modified.
func (r *resolver) decideIfs(v any) (out any, keep bool) {
	switch x := v.(type) {
	case map[string]any:
		if isNoValue(x) {
			return nil, false
		}
		if name, arg, ok := intrinsic(x); ok && name == "Fn::If" {
			if chosen, ok, _, _ := r.pickIf(arg); ok {
				return r.decideIfs(chosen)
			}
			return x, true
		}
		m := make(map[string]any, len(x))
		for k, e := range x {
			if d, keep := r.decideIfs(e); keep {
				m[k] = d
			}
		}
		return m, true
	case []any:
		l := make([]any, 0, len(x))
		for _, e := range x {
			if d, keep := r.decideIfs(e); keep {
				l = append(l, d)
			}
		}
		return l, true
	}
	return v, true
}

// undecidedIf is what str gives for an Fn::If (at path) that cannot be
// decided: a `${ENV}` reference named after the resource and property,
// with a note naming the condition once, and one naming the variable.
func (r *resolver) undecidedIf(arg any, path string) string {
	_, _, cond, why := r.pickIf(arg)
	name := envNameFor(path)
	if cond == "" {
		r.noteOnce(path, fmt.Sprintf("%s; left as the environment variable %s", why, name))
		return r.envRef(name)
	}
	r.noteCondition(cond, why)
	r.noteOnce(path, fmt.Sprintf("Fn::If on condition %s, which cannot be decided, is left as the environment variable %s", cond, name))
	return r.envRef(name)
}

// noteCondition notes, once, that the condition cannot be decided.
func (r *resolver) noteCondition(cond, why string) {
	r.noteOnce("Conditions."+cond, fmt.Sprintf("cannot be decided with these parameters: %s", why))
}

// noteOnce adds a note unless the same one is there already (a resource
// read by several pipes).
func (r *resolver) noteOnce(path, msg string) {
	p := Problem{Path: path, Msg: msg}
	for _, n := range *r.notes {
		if n == p {
			return
		}
	}
	*r.notes = append(*r.notes, p)
}

// envNameFor names the variable for a value at path: after the resource
// and its property for a template's value (Resources.Dst.Properties.QueueName
// is DST_QUEUE_NAME), else after the property.
func envNameFor(path string) string {
	last := lastPart(path)
	if i := strings.IndexByte(last, '['); i > 0 {
		last = last[:i]
	}
	if rest, ok := strings.CutPrefix(path, "Resources."); ok {
		id, _, _ := strings.Cut(rest, ".")
		if id != "" && id != rest {
			return envName(baseID(id), last)
		}
	}
	return envName(last)
}
