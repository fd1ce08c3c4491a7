package template

import (
	"encoding/base64"
	"slices"
	"strconv"

	"github.com/pipesproject/pipes/internal/jsonvalue"
	"github.com/pipesproject/pipes/source"
)

// path is a compiled JSONPath of the subset Pipes supports: `$` followed by
// `.name`, `.*`, `[N]` and `[*]` steps, names made of letters, digits, '_',
// '-' and '/'.
type path struct {
	steps []step
	wild  bool // a wildcard step: the value is the array of all matches
}

type stepKind uint8

const (
	stepName stepKind = iota
	stepIndex
	stepWild
)

type step struct {
	kind  stepKind
	name  string
	index int
}

// pathError says where in the path (offset from its '$') and what is wrong.
type pathError struct {
	pos int
	msg string
}

// maxIndex bounds array indices so that they fit any int.
const maxIndex = 1_000_000_000

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '-' || c == '/'
}

// parsePath compiles the text of a placeholder that starts with '$'.
func parsePath(s string) (*path, *pathError) {
	p := &path{}
	i := 1
	for i < len(s) {
		switch s[i] {
		case '.':
			i++
			if i < len(s) && s[i] == '*' {
				p.steps = append(p.steps, step{kind: stepWild})
				p.wild = true
				i++
				continue
			}
			j := i
			for j < len(s) && isNameByte(s[j]) {
				j++
			}
			if j == i {
				return nil, &pathError{i, "expected a name or '*' after '.'" + found(s, i)}
			}
			p.steps = append(p.steps, step{kind: stepName, name: s[i:j]})
			i = j
		case '[':
			i++
			if i < len(s) && s[i] == '*' {
				if i+1 >= len(s) || s[i+1] != ']' {
					return nil, &pathError{i + 1, "expected ']' after '[*'" + found(s, i+1)}
				}
				p.steps = append(p.steps, step{kind: stepWild})
				p.wild = true
				i += 2
				continue
			}
			j := i
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			if j == i {
				return nil, &pathError{i, "expected an array index or '*' after '['" + found(s, i)}
			}
			n, err := strconv.Atoi(s[i:j])
			if err != nil || n > maxIndex {
				return nil, &pathError{i, "array index " + s[i:j] + " is too large"}
			}
			if j >= len(s) || s[j] != ']' {
				return nil, &pathError{j, "expected ']' after the index" + found(s, j)}
			}
			p.steps = append(p.steps, step{kind: stepIndex, index: n})
			i = j + 1
		default:
			return nil, &pathError{i, "expected '.' or '['" + found(s, i)}
		}
	}
	return p, nil
}

func found(s string, i int) string {
	if i >= len(s) {
		return ", found the end"
	}
	return ", found " + strconv.QuoteRune(rune(s[i]))
}

// record is the root of paths evaluated against the Pipes SQS record: the
// message's fields with the body decoded when it is JSON.
type record struct {
	m    *source.Message
	body any
	json bool // body is valid JSON
}

// rawJSON and rawBytes are valid JSON texts, written compacted as values and
// as they are in text.
type (
	rawJSON  string
	rawBytes []byte
)

// eval returns the value the path selects under root, and false when it
// selects nothing.
func (p *path) eval(root any) (any, bool) {
	if !p.wild {
		v := root
		for k, st := range p.steps {
			var ok bool
			if v, ok = child(v, st, k == len(p.steps)-1); !ok {
				return nil, false
			}
		}
		return v, true
	}
	var out []any
	out = collect(root, p.steps, out)
	if len(out) == 0 {
		return nil, false
	}
	return out, true
}

// collect appends the matches of steps under v.
func collect(v any, steps []step, out []any) []any {
	if len(steps) == 0 {
		return append(out, v)
	}
	st := steps[0]
	if st.kind == stepWild {
		for _, c := range children(v) {
			out = collect(c, steps[1:], out)
		}
		return out
	}
	c, ok := child(v, st, false)
	if !ok {
		return out
	}
	return collect(c, steps[1:], out)
}

// child takes one name or index step. last says whether it is the path's
// last step: then a JSON body is given as its text, exactly as sent.
func child(v any, st step, last bool) (any, bool) {
	switch n := v.(type) {
	case map[string]any:
		if st.kind == stepName {
			c, ok := n[st.name]
			return c, ok
		}
	case []any:
		if st.kind == stepIndex && st.index < len(n) {
			return n[st.index], true
		}
	case *record:
		if st.kind == stepName {
			return n.field(st.name, last)
		}
	case map[string]string:
		if st.kind == stepName {
			c, ok := n[st.name]
			return c, ok
		}
	case map[string]source.MessageAttribute:
		if st.kind == stepName {
			c, ok := n[st.name]
			return c, ok
		}
	case source.MessageAttribute:
		if st.kind == stepName {
			return attrField(n, st.name)
		}
	case []string:
		if st.kind == stepIndex && st.index < len(n) {
			return n[st.index], true
		}
	case [][]byte:
		if st.kind == stepIndex && st.index < len(n) {
			return base64.StdEncoding.EncodeToString(n[st.index]), true
		}
	}
	return nil, false
}

// children lists the values under v for a wildcard: array elements in
// order, object members in key order.
func children(v any) []any {
	switch n := v.(type) {
	case []any:
		return n
	case map[string]any:
		keys := sortedKeys(n)
		out := make([]any, len(keys))
		for i, k := range keys {
			out[i] = n[k]
		}
		return out
	case *record:
		var out []any
		for _, name := range n.names() {
			if c, ok := n.field(name, false); ok {
				out = append(out, c)
			}
		}
		return out
	case map[string]string:
		keys := sortedKeys(n)
		out := make([]any, len(keys))
		for i, k := range keys {
			out[i] = n[k]
		}
		return out
	case map[string]source.MessageAttribute:
		keys := sortedKeys(n)
		out := make([]any, len(keys))
		for i, k := range keys {
			out[i] = n[k]
		}
		return out
	case source.MessageAttribute:
		var out []any
		for _, name := range [...]string{"stringValue", "binaryValue", "stringListValues", "binaryListValues", "dataType"} {
			if c, ok := attrField(n, name); ok {
				out = append(out, c)
			}
		}
		return out
	case []string:
		out := make([]any, len(n))
		for i, s := range n {
			out[i] = s
		}
		return out
	case [][]byte:
		out := make([]any, len(n))
		for i, b := range n {
			out[i] = base64.StdEncoding.EncodeToString(b)
		}
		return out
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// sqsRecordKeys are the SQS record's keys in the order of its JSON.
var sqsRecordKeys = []string{"messageId", "receiptHandle", "body", "attributes", "messageAttributes",
	"md5OfBody", "md5OfMessageAttributes", "eventSource", "eventSourceARN", "awsRegion", "envelope"}

// names are the record's keys in the order of its JSON.
func (r *record) names() []string {
	if r.m.Record == nil {
		return sqsRecordKeys
	}
	names := make([]string, 0, len(r.m.Record.Fields))
	for _, f := range r.m.Record.Fields {
		names = append(names, f.Name)
	}
	return names
}

func (r *record) field(name string, last bool) (any, bool) {
	m := r.m
	if m.Record != nil {
		return r.shapedField(name, last)
	}
	switch name {
	case "messageId":
		return m.MessageID, true
	case "receiptHandle":
		return m.ReceiptHandle, true
	case "body":
		if r.json && last {
			return rawJSON(m.Body), true
		}
		return r.body, true
	case "attributes":
		if m.Attributes == nil {
			return map[string]string{}, true
		}
		return m.Attributes, true
	case "messageAttributes":
		if m.MessageAttributes == nil {
			return map[string]source.MessageAttribute{}, true
		}
		return m.MessageAttributes, true
	case "md5OfBody":
		return m.MD5OfBody, true
	case "md5OfMessageAttributes":
		return m.MD5OfMessageAttributes, m.MD5OfMessageAttributes != ""
	case "eventSource":
		return m.EventSource, true
	case "eventSourceARN":
		return m.EventSourceARN, true
	case "awsRegion":
		return m.AWSRegion, true
	case "envelope":
		if len(m.Envelope) == 0 {
			return nil, false
		}
		if last {
			return rawJSON(m.Envelope), true
		}
		v, ok := jsonvalue.Decode(string(m.Envelope), false)
		return v, ok
	}
	return nil, false
}

// shapedField is a field of a record of another shape than SQS's
// (RabbitMQ): the body field decoded when the body is JSON (the record's
// base64 text otherwise), the other fields as the record holds them.
func (r *record) shapedField(name string, last bool) (any, bool) {
	rec := r.m.Record
	raw, ok := rec.Field(name)
	switch {
	case name == "messageId" && !ok:
		return r.m.MessageID, true
	case !ok:
		return nil, false
	case name == rec.BodyField && raw == nil:
		if r.json {
			if last {
				return rawJSON(r.m.Body), true
			}
			return r.body, true
		}
		return base64.StdEncoding.EncodeToString([]byte(r.m.Body)), true
	case last && len(raw) > 0 && raw[0] != '"':
		return rawJSON(raw), true // objects, arrays, numbers as the record has them
	}
	return jsonvalue.Decode(string(raw), false)
}

func attrField(a source.MessageAttribute, name string) (any, bool) {
	switch name {
	case "stringValue":
		if a.StringValue == nil {
			return nil, false
		}
		return *a.StringValue, true
	case "binaryValue":
		if a.BinaryValue == nil {
			return nil, false
		}
		return base64.StdEncoding.EncodeToString(a.BinaryValue), true
	case "stringListValues": // absent lists are [] in the record
		if a.StringListValues == nil {
			return []string{}, true
		}
		return a.StringListValues, true
	case "binaryListValues":
		if a.BinaryListValues == nil {
			return [][]byte{}, true
		}
		return a.BinaryListValues, true
	case "dataType":
		return a.DataType, true
	}
	return nil, false
}
