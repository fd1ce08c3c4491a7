package template

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/pipesproject/pipes/pipe"
)

// Render applies the template to one event and returns the new payload.
//
// Paths are evaluated against the event as the transformer receives it.
// While the event's payload is its source record (no enrichment ran, or
// Payload is empty), that is the Pipes SQS record with `body` decoded when it
// is valid JSON (from ev.Body(), shared with filters) and the raw string
// otherwise; the payload itself is not decoded. Once an enrichment replaced
// the payload, paths are evaluated against that payload, decoded when it is
// JSON.
//
// As AWS does, a path that matches nothing renders as nothing, even as a
// bare JSON value (`[<$.missing>]` gives `[]`, `{"a": <$.missing>}` gives
// `{"a": }`), and an object or array inside a JSON string or in a text
// template renders with its inner quotes removed (`{key: value}`). The
// output of a JSON-kind template is valid JSON unless a bare value was
// missing. Render only fails when ev is nil. It is safe for concurrent use.
func (t *Template) Render(ev *pipe.Event, vars Vars) ([]byte, error) {
	out, _, err := t.render(ev, vars)
	return out, err
}

// render is Render that also reports whether a bare JSON value matched
// nothing (the output of a JSON-kind template may then be invalid).
func (t *Template) render(ev *pipe.Event, vars Vars) ([]byte, bool, error) {
	if ev == nil {
		return nil, false, errors.New("rendering input template: nil event")
	}
	missing := false
	r := renderer{ev: ev, vars: vars}
	size := t.litLen + 64*len(t.segs)
	if t.big > 0 && ev.Message != nil {
		size += t.big * max(len(ev.Message.Body), len(ev.Payload))
	}
	out := make([]byte, 0, size)
	for i := range t.segs {
		s := &t.segs[i]
		if !s.ph {
			out = append(out, s.lit...)
			continue
		}
		switch s.v {
		case varPipeARN:
			out = writeString(out, vars.PipeARN, s.ctx)
			continue
		case varPipeName:
			out = writeString(out, vars.PipeName, s.ctx)
			continue
		case varSourceARN:
			out = writeString(out, vars.SourceARN, s.ctx)
			continue
		case varEnrichmentARN:
			out = writeString(out, vars.EnrichmentARN, s.ctx)
			continue
		case varTargetARN:
			out = writeString(out, vars.TargetARN, s.ctx)
			continue
		case varIngestionTime:
			out = r.writeTime(out, s.ctx)
			continue
		}
		v, ok := r.value(s)
		if !ok {
			// AWS writes nothing for a path that does not exist, as a
			// bare JSON value too.
			missing = missing || s.ctx == ctxJSONValue
			continue
		}
		if s.v == varPath && s.ctx != ctxJSONValue && isComposite(v) {
			out = writeDequoted(out, v, s.ctx)
			continue
		}
		out = writeValue(out, v, s.ctx)
	}
	return out, missing, nil
}

// isComposite reports whether v is a JSON object or array.
func isComposite(v any) bool {
	switch x := v.(type) {
	case map[string]any, []any, *record:
		return true
	case rawJSON:
		return firstByte(x) == '{' || firstByte(x) == '['
	case rawBytes:
		return firstByte(x) == '{' || firstByte(x) == '['
	case string, bool, float64, json.Number, nil:
		return false
	}
	// The record's attribute maps and lists.
	b, err := json.Marshal(v)
	return err == nil && len(b) > 0 && (b[0] == '{' || b[0] == '[')
}

func firstByte[T ~string | ~[]byte](s T) byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c
		}
	}
	return 0
}

// writeDequoted writes an object or array as AWS does inside a string or in
// free text: its JSON with the quotes of keys and strings removed, keys
// followed by ": " and members separated by ", " (`{key: value}`, the
// caveat of AWS's "Implicit body data parsing"). Inside a JSON string the
// result is escaped, so the output stays a string.
func writeDequoted(dst []byte, v any, ctx placement) []byte {
	text := appendJSON(nil, v)
	var plain []byte
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch c {
		case '"':
			j := i + 1
			for j < len(text) && text[j] != '"' {
				if text[j] == '\\' {
					j++
				}
				j++
			}
			var str string
			if j < len(text) && json.Unmarshal(text[i:j+1], &str) == nil {
				plain = append(plain, str...)
			} else {
				plain = append(plain, text[i:min(j+1, len(text))]...)
			}
			i = j
		case ':', ',':
			plain = append(plain, c, ' ')
		default:
			plain = append(plain, c)
		}
	}
	if ctx == ctxJSONString {
		return appendEscaped(dst, plain)
	}
	return append(dst, plain...)
}

// renderer holds what one Render call works out at most once.
type renderer struct {
	ev   *pipe.Event
	vars Vars

	rootDone bool
	root     any
	rootOK   bool
	isRecord bool

	now    time.Time
	nowSet bool
}

// resolve decides what paths are evaluated against.
func (r *renderer) resolve() {
	if r.rootDone {
		return
	}
	r.rootDone = true
	ev := r.ev
	if ev.Message != nil {
		rec, err := ev.Message.JSON()
		if len(ev.Payload) == 0 || err == nil && sameBytes(ev.Payload, rec) {
			body, isJSON := ev.Body()
			r.root, r.rootOK, r.isRecord = &record{m: ev.Message, body: body, json: isJSON}, true, true
			return
		}
	}
	if len(ev.Payload) == 0 {
		return
	}
	if !json.Valid(ev.Payload) {
		r.root, r.rootOK = string(ev.Payload), true
		return
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(ev.Payload))
	dec.UseNumber() // keep big integers exact
	if err := dec.Decode(&v); err != nil {
		r.root, r.rootOK = string(ev.Payload), true
		return
	}
	r.root, r.rootOK = v, true
}

func sameBytes(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	return bytes.Equal(a, b)
}

// value returns what a placeholder stands for, false when nothing.
func (r *renderer) value(s *segment) (any, bool) {
	switch s.v {
	case varPath:
		r.resolve()
		if !r.rootOK {
			return nil, false
		}
		return s.path.eval(r.root)
	case varEvent:
		r.resolve()
		if r.isRecord {
			rec, err := r.ev.Message.JSON()
			if err != nil {
				return nil, false
			}
			return rawBytes(rec), true
		}
		if len(r.ev.Payload) == 0 {
			return nil, false
		}
		if json.Valid(r.ev.Payload) {
			return rawBytes(r.ev.Payload), true
		}
		return string(r.ev.Payload), true
	case varEventJSON:
		r.resolve()
		if r.isRecord {
			return r.root, true
		}
		if len(r.ev.Payload) == 0 || !json.Valid(r.ev.Payload) {
			return nil, false
		}
		return rawBytes(r.ev.Payload), true
	}
	return nil, false
}

const isoMillis = "2006-01-02T15:04:05.000Z07:00"

// writeTime writes <aws.pipes.event.ingestion-time>: the time from vars.Now,
// taken once per Render, in ISO 8601 (UTC, milliseconds).
func (r *renderer) writeTime(dst []byte, ctx placement) []byte {
	if !r.nowSet {
		if r.vars.Now != nil {
			r.now = r.vars.Now()
		} else {
			r.now = time.Now()
		}
		r.nowSet = true
	}
	if ctx == ctxJSONValue {
		dst = append(dst, '"')
		dst = r.now.UTC().AppendFormat(dst, isoMillis)
		return append(dst, '"')
	}
	return r.now.UTC().AppendFormat(dst, isoMillis)
}

// writeString writes a string as its context wants it.
func writeString(dst []byte, s string, ctx placement) []byte {
	switch ctx {
	case ctxJSONValue:
		dst = append(dst, '"')
		dst = appendEscaped(dst, s)
		return append(dst, '"')
	case ctxJSONString:
		return appendEscaped(dst, s)
	}
	return append(dst, s...)
}

// writeValue writes v as its context wants it.
func writeValue(dst []byte, v any, ctx placement) []byte {
	switch ctx {
	case ctxJSONValue:
		return appendJSON(dst, v)
	case ctxJSONString:
		switch s := v.(type) {
		case string:
			return appendEscaped(dst, s)
		}
		return appendEscaped(dst, appendJSON(nil, v))
	}
	switch s := v.(type) {
	case string:
		return append(dst, s...)
	case rawJSON:
		return append(dst, s...)
	case rawBytes:
		return append(dst, s...)
	}
	return appendJSON(dst, v)
}

// appendJSON writes v as compact JSON.
func appendJSON(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		return strconv.AppendBool(dst, x)
	case float64:
		return appendFloat(dst, x)
	case json.Number:
		return append(dst, x...)
	case string:
		dst = append(dst, '"')
		dst = appendEscaped(dst, x)
		return append(dst, '"')
	case rawJSON:
		return appendCompact(dst, x)
	case rawBytes:
		return appendCompact(dst, x)
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSON(dst, e)
		}
		return append(dst, ']')
	case map[string]any:
		dst = append(dst, '{')
		for i, k := range sortedKeys(x) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSON(dst, k)
			dst = append(dst, ':')
			dst = appendJSON(dst, x[k])
		}
		return append(dst, '}')
	case *record:
		return appendRecord(dst, x)
	}
	// The record's own types (attribute maps, lists): encoding/json writes
	// them as in the record.
	b, err := json.Marshal(v)
	if err != nil {
		return append(dst, "null"...)
	}
	return append(dst, b...)
}

// appendRecord writes the record with its body decoded when it is JSON.
func appendRecord(dst []byte, r *record) []byte {
	field := func(dst []byte, name string, v any) []byte {
		if name != "messageId" {
			dst = append(dst, ',')
		}
		dst = appendJSON(dst, name)
		dst = append(dst, ':')
		return appendJSON(dst, v)
	}
	dst = append(dst, '{')
	for _, name := range r.names() {
		if v, ok := r.field(name, true); ok {
			dst = field(dst, name, v)
		}
	}
	return append(dst, '}')
}

// appendFloat writes a number the way encoding/json does.
func appendFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// e-09 → e-9
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// appendCompact writes a valid JSON text without the whitespace between its
// tokens.
func appendCompact[T ~string | ~[]byte](dst []byte, src T) []byte {
	inStr, esc := false, false
	start := 0
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case esc:
			esc = false
		case inStr:
			switch c {
			case '\\':
				esc = true
			case '"':
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			dst = append(dst, src[start:i]...)
			start = i + 1
		}
	}
	return append(dst, src[start:]...)
}

const hexDigits = "0123456789abcdef"

// appendEscaped writes s as the inside of a JSON string: quotes, backslashes
// and control characters escaped, invalid UTF-8 replaced by U+FFFD.
func appendEscaped[T ~string | ~[]byte](dst []byte, s T) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(dst, s[start:]...)
}

// Transformer applies a template to each event: the pipe.Transformer of an
// enrichment or a target input template.
type Transformer struct {
	t    *Template
	vars Vars
}

var _ pipe.Transformer = (*Transformer)(nil)

// NewTransformer returns a Transformer rendering t with vars.
func NewTransformer(t *Template, vars Vars) *Transformer {
	return &Transformer{t: t, vars: vars}
}

// Transform renders the template for ev and returns the new payload. It
// does not block and is safe for concurrent use; an error fails that event
// alone. The output of a JSON-kind template in which every bare value was
// found is vouched for as valid JSON on ev (pipe.Event.VouchJSON), so
// targets do not check it again.
func (x *Transformer) Transform(_ context.Context, ev *pipe.Event) ([]byte, error) {
	out, missing, err := x.t.render(ev, x.vars)
	if err == nil && x.t.kind == KindJSON && !missing {
		ev.VouchJSON(out)
	}
	return out, err
}

// Template returns the template the transformer renders.
func (x *Transformer) Template() *Template { return x.t }
