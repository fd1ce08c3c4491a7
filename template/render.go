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
// RecordJSON is empty), that is the Pipes SQS record with `body` decoded when it
// is valid JSON (from ev.Body(), shared with filters) and the raw string
// otherwise; the payload itself is not decoded. Once an enrichment replaced
// the payload, paths are evaluated against that payload, decoded when it is
// JSON.
//
// The output of a JSON-kind template is valid JSON. Render only fails when
// ev is nil. It is safe for concurrent use.
func (t *Template) Render(ev *pipe.Event, vars Vars) ([]byte, error) {
	if ev == nil {
		return nil, errors.New("rendering input template: nil event")
	}
	r := renderer{ev: ev, vars: vars}
	size := t.litLen + 64*len(t.segs)
	if t.big > 0 && ev.Message != nil {
		size += t.big * max(len(ev.Message.Body), len(ev.RecordJSON))
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
			if s.ctx == ctxJSONValue {
				out = append(out, "null"...)
			}
			continue
		}
		out = writeValue(out, v, s.ctx)
	}
	return out, nil
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
		if len(ev.RecordJSON) == 0 || err == nil && sameBytes(ev.RecordJSON, rec) {
			body, isJSON := ev.Body()
			r.root, r.rootOK, r.isRecord = &record{m: ev.Message, body: body, json: isJSON}, true, true
			return
		}
	}
	if len(ev.RecordJSON) == 0 {
		return
	}
	if !json.Valid(ev.RecordJSON) {
		r.root, r.rootOK = string(ev.RecordJSON), true
		return
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(ev.RecordJSON))
	dec.UseNumber() // keep big integers exact
	if err := dec.Decode(&v); err != nil {
		r.root, r.rootOK = string(ev.RecordJSON), true
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
		if len(r.ev.RecordJSON) == 0 {
			return nil, false
		}
		if json.Valid(r.ev.RecordJSON) {
			return rawBytes(r.ev.RecordJSON), true
		}
		return string(r.ev.RecordJSON), true
	case varEventJSON:
		r.resolve()
		if r.isRecord {
			return r.root, true
		}
		if len(r.ev.RecordJSON) == 0 || !json.Valid(r.ev.RecordJSON) {
			return nil, false
		}
		return rawBytes(r.ev.RecordJSON), true
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
// alone. The output of a JSON-kind template is vouched for as valid JSON
// on ev (pipe.Event.VouchJSON), so targets do not check it again.
func (x *Transformer) Transform(_ context.Context, ev *pipe.Event) ([]byte, error) {
	out, err := x.t.Render(ev, x.vars)
	if err == nil && x.t.kind == KindJSON {
		ev.VouchJSON(out)
	}
	return out, err
}

// Template returns the template the transformer renders.
func (x *Transformer) Template() *Template { return x.t }
