package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"regexp"
	"strconv"

	"gopkg.in/yaml.v3"
)

const (
	maxPatterns     = 5    // Pipes' limit of OR-ed patterns
	maxPatternChars = 4096 // Pipes' limit per pattern
	maxPatternNodes = 10000
	maxPatternDepth = 64
)

// patterns decodes `patterns:`: a list of event patterns, each a YAML
// mapping or a string holding a JSON object, kept as canonical JSON text
// (compact, keys sorted). Their grammar is the filter package's business.
func (d *decoder) patterns(b *block) ([]string, []Pos) {
	d.rec.field(b.path, "patterns", fieldSpec{Kind: "patterns"})
	n := deref(b.vals["patterns"])
	if isNull(n) {
		return nil, nil
	}
	field := b.field("patterns")
	if n.Kind != yaml.SequenceNode {
		d.errorf(d.pos(n), field, "must be a list of event patterns, got %s", kindName(n))
		return nil, nil
	}
	if len(n.Content) > maxPatterns {
		d.errorf(d.pos(n), field, "holds %d patterns; at most %d are allowed (Pipes' limit)", len(n.Content), maxPatterns)
	}
	var texts []string
	var poss []Pos
	for i, el := range n.Content {
		el = deref(el)
		pfield := field + "[" + strconv.Itoa(i) + "]"
		text, ok := d.pattern(el, pfield)
		if !ok {
			continue
		}
		if len(text) > maxPatternChars {
			d.errorf(d.pos(el), pfield, "is %d characters long as JSON; at most %d are allowed (Pipes' limit)", len(text), maxPatternChars)
			continue
		}
		texts = append(texts, text)
		poss = append(poss, d.pos(el))
	}
	return texts, poss
}

// pattern converts one pattern to canonical JSON text.
func (d *decoder) pattern(n *yaml.Node, field string) (string, bool) {
	var v any
	switch n.Kind {
	case yaml.MappingNode:
		var ok bool
		if v, ok = d.yamlValue(n, field, 0, &walk{budget: maxPatternNodes}); !ok {
			return "", false
		}
	case yaml.ScalarNode:
		s, ok := d.scalarOf(n, field, "an event pattern")
		if !ok {
			if isNull(n) {
				d.errorf(d.pos(n), field, "must be an event pattern (a mapping, or a string holding a JSON object), got nothing")
			}
			return "", false
		}
		dec := json.NewDecoder(bytes.NewReader([]byte(s.text)))
		dec.UseNumber()
		err := dec.Decode(&v)
		if err == nil {
			if _, extra := dec.Token(); !errors.Is(extra, io.EOF) {
				err = errors.New("text after the JSON value")
			}
		}
		if err != nil {
			var se *json.SyntaxError
			switch {
			case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
				d.errorf(s.pos, field, "is not valid JSON (it ends too early)")
			case errors.As(err, &se):
				d.errorf(s.pos, field, "is not valid JSON (at offset %d)", se.Offset)
			default:
				d.errorf(s.pos, field, "is not valid JSON")
			}
			return "", false
		}
		if _, isObject := v.(map[string]any); !isObject {
			d.errorf(s.pos, field, "must be a JSON object (an event pattern)")
			return "", false
		}
	default:
		d.errorf(d.pos(n), field, "must be an event pattern (a mapping, or a string holding a JSON object), got %s", kindName(n))
		return "", false
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep "<" and ">" of numeric matching readable
	if err := enc.Encode(v); err != nil {
		d.errorf(d.pos(n), field, "cannot be written as JSON")
		return "", false
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), true
}

// walk bounds the conversion of one pattern: aliases can make a small file
// a huge tree.
type walk struct {
	budget int
	tooBig bool
}

// jsonNumber is the JSON grammar of a number.
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// yamlValue converts a YAML node to the value encoding/json writes.
// Interpolated plain scalars are typed from their new text.
func (d *decoder) yamlValue(n *yaml.Node, field string, depth int, w *walk) (any, bool) {
	n = deref(n)
	w.budget--
	if w.budget < 0 || depth > maxPatternDepth {
		if !w.tooBig {
			d.errorf(d.pos(n), field, "pattern is too large or too deeply nested")
			w.tooBig = true
		}
		return nil, false
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		ok := true
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := deref(n.Content[i])
			if k.Kind != yaml.ScalarNode {
				d.errorf(d.pos(k), field, "pattern keys must be strings, got %s", kindName(k))
				ok = false
				continue
			}
			if _, dup := m[k.Value]; dup {
				d.errorf(d.pos(k), field, "duplicate key %q in pattern", k.Value)
				ok = false
				continue
			}
			v, vok := d.yamlValue(n.Content[i+1], field, depth+1, w)
			ok = ok && vok
			m[k.Value] = v
		}
		return m, ok
	case yaml.SequenceNode:
		l := make([]any, 0, len(n.Content))
		ok := true
		for _, el := range n.Content {
			v, vok := d.yamlValue(el, field, depth+1, w)
			ok = ok && vok
			l = append(l, v)
		}
		return l, ok
	case yaml.ScalarNode:
		return d.yamlScalar(n, field)
	}
	d.errorf(d.pos(n), field, "holds %s, which a pattern cannot", kindName(n))
	return nil, false
}

func (d *decoder) yamlScalar(n *yaml.Node, field string) (any, bool) {
	s, ok := d.scalarOf(n, field, "a value")
	if !ok {
		return nil, isNull(n)
	}
	tag := s.tag
	if s.interpolated {
		switch {
		case s.quoted:
			tag = "!!str"
		case s.text == "true" || s.text == "false":
			tag = "!!bool"
		case s.text == "null":
			tag = "!!null"
		case jsonNumber.MatchString(s.text):
			tag = "!!float"
		default:
			tag = "!!str"
		}
	}
	switch tag {
	case "!!null":
		return nil, true
	case "!!bool":
		var v bool
		if s.interpolated {
			return s.text == "true", true
		}
		if err := n.Decode(&v); err != nil {
			d.errorf(s.pos, field, "is not a boolean")
			return nil, false
		}
		return v, true
	case "!!int", "!!float":
		if jsonNumber.MatchString(s.text) {
			return json.Number(s.text), true
		}
		var v float64
		if err := n.Decode(&v); err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			d.errorf(s.pos, field, "is not a number JSON can hold")
			return nil, false
		}
		return v, true
	}
	return s.text, true
}
