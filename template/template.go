// Package template implements EventBridge Pipes input templates (the
// InputTemplate of an enrichment or a target, SPEC.md §5.1): static text or
// JSON with `<$.path>` placeholders and the `<aws.pipes.*>` reserved
// variables, applied to each record separately.
//
// A template is parsed once with Parse and rendered per event with
// Template.Render; a Transformer wraps a template as a pipe.Transformer.
//
// # Kinds
//
// A template is of JSON kind when, with every placeholder replaced by a
// neutral value (nothing inside a JSON string, null elsewhere), it is valid
// JSON; it is of text kind otherwise. A template that starts with '{' or '['
// must be valid JSON in that sense, or Parse rejects it. A template that is a
// single placeholder, whitespace aside (AWS's "JSON Path" form, e.g.
// `<$.body>`), is of text kind. A placeholder may not sit inside an escape
// sequence of a JSON string (`"\<$.x>"`, `"\u00<$.x>"`).
//
// A placeholder starts at "<$" or "<aws." and ends at the next '>'; any
// other '<' is text. Paths are `$` followed by `.name`, `.*`, `[N]` and `[*]`
// steps; names are letters, digits, '_', '-' and '/'.
//
// # How values are inserted
//
//   - Bare JSON value (`{"a": <$.body.x>}`): the value as JSON. A string gets
//     quotes, so `{"a": <$.s>}` and `{"a": "<$.s>"}` give the same output for
//     a string, as in AWS's "Input transform example" where an unquoted
//     `<$.detail.instance-id>` gives "i-0123456789".
//   - Inside a JSON string (`{"a": "Hi <$.body.x>"}`): the value as text,
//     escaped for the string: strings without their quotes, other values as
//     their compact JSON text (escaped, so the output stays valid JSON; AWS
//     strips the inner quotes instead).
//   - Text template: strings raw, other values as compact JSON.
//
// A path that matches nothing (a missing key, an index out of range, a
// wildcard that matches nothing, a key under a non-JSON body) gives JSON null
// as a bare value and nothing inside a string or a text template. AWS does
// not document this case for Pipes.
//
// `<$.body>` on a body that is valid JSON gives the body exactly as sent
// (compacted as a JSON value), not AWS's de-quoted text (the caveat of
// SPEC §5.1); on a body that is not JSON it gives the raw string.
//
// `<aws.pipes.event>` is the event as the transformer receives it (the
// record with its body as a string, or the enrichment's answer);
// `<aws.pipes.event.json>` is the record with its body decoded, or the
// enrichment's answer when it is JSON, and nothing otherwise. Numbers reached
// by a deeper path (`<$.body.n>`) pass through float64, as ev.Body() decodes
// them: integers beyond 2^53 lose precision there, while `<$.body>` and
// `<aws.pipes.event.json>` keep the body's text.
package template

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxLen is the longest template Pipes accepts, in characters.
const MaxLen = 8192

// Kind says how a template's output is built: as JSON or as text.
type Kind int

const (
	// KindText templates insert values as text: strings raw, other values
	// as compact JSON.
	KindText Kind = iota
	// KindJSON templates are valid JSON around their placeholders; their
	// output is always valid JSON.
	KindJSON
)

// String names the kind: "text" or "json".
func (k Kind) String() string {
	if k == KindJSON {
		return "json"
	}
	return "text"
}

// Vars are the values of the pipe-level reserved variables.
type Vars struct {
	// PipeName is <aws.pipes.pipe-name>.
	PipeName string
	// PipeARN is <aws.pipes.pipe-arn>.
	PipeARN string
	// SourceARN is <aws.pipes.source-arn>.
	SourceARN string
	// EnrichmentARN is <aws.pipes.enrichment-arn>.
	EnrichmentARN string
	// TargetARN is <aws.pipes.target-arn>.
	TargetARN string
	// Now gives <aws.pipes.event.ingestion-time>; nil means time.Now.
	Now func() time.Time
}

// Template is a parsed input template. It is immutable and safe for
// concurrent use.
type Template struct {
	src    string
	kind   Kind
	segs   []segment
	litLen int
	big    int // placeholders that may stand for the whole body or event
}

// Kind reports whether the template renders JSON or text.
func (t *Template) Kind() Kind { return t.kind }

// String returns the template's source text.
func (t *Template) String() string { return t.src }

// placement says where a placeholder sits, which decides how its value is
// written.
type placement uint8

const (
	ctxText       placement = iota // text template
	ctxJSONValue                   // a bare JSON value
	ctxJSONString                  // inside a JSON string literal
)

// varKind is what a placeholder refers to.
type varKind uint8

const (
	varPath varKind = iota
	varPipeARN
	varPipeName
	varSourceARN
	varEnrichmentARN
	varTargetARN
	varIngestionTime
	varEvent
	varEventJSON
)

// reservedVar returns the reserved variable a placeholder names.
func reservedVar(name string) (varKind, bool) {
	switch name {
	case "aws.pipes.pipe-arn":
		return varPipeARN, true
	case "aws.pipes.pipe-name":
		return varPipeName, true
	case "aws.pipes.source-arn":
		return varSourceARN, true
	case "aws.pipes.enrichment-arn":
		return varEnrichmentARN, true
	case "aws.pipes.target-arn":
		return varTargetARN, true
	case "aws.pipes.event.ingestion-time":
		return varIngestionTime, true
	case "aws.pipes.event":
		return varEvent, true
	case "aws.pipes.event.json":
		return varEventJSON, true
	}
	return 0, false
}

// segment is literal text (lit != "") or a placeholder.
type segment struct {
	lit  string
	ph   bool
	v    varKind
	path *path
	ctx  placement
	src  string // the placeholder as written, for errors
	off  int    // byte offset of the segment in the template
}

// SyntaxError reports why Parse rejected a template and where.
type SyntaxError struct {
	// Offset is the byte offset of the problem in the template (0-based).
	Offset int
	// Line and Column locate it for people (1-based; columns count
	// characters).
	Line, Column int
	// Msg says what is wrong, quoting the offending text.
	Msg string
}

// Error formats the problem with its line, column and offset.
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("input template: line %d, column %d (offset %d): %s", e.Line, e.Column, e.Offset, e.Msg)
}

func syntaxErr(src string, off int, format string, args ...any) *SyntaxError {
	off = min(max(off, 0), len(src))
	line := 1 + strings.Count(src[:off], "\n")
	start := strings.LastIndexByte(src[:off], '\n') + 1
	return &SyntaxError{
		Offset: off, Line: line, Column: 1 + utf8.RuneCountInString(src[start:off]),
		Msg: fmt.Sprintf(format, args...),
	}
}

// excerpt returns up to 24 bytes of src from off, stopping at a newline, for
// error messages.
func excerpt(src string, off int) string {
	s := src[min(off, len(src)):]
	if i := strings.IndexByte(s, '\n'); i > 0 {
		s = s[:i]
	}
	if len(s) > 24 {
		s = s[:24]
		for len(s) > 0 && !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	return s
}

// Parse compiles an input template. It fails with a *SyntaxError on an
// unterminated placeholder, a path outside the supported JSONPath subset, an
// unknown reserved variable, a placeholder right after a backslash in a JSON
// string, or a template that starts with '{' or '[' but is not valid JSON
// around its placeholders; and with a plain error when the template is
// empty (an empty InputTemplate means no template: callers check first) or
// longer than MaxLen characters.
func Parse(src string) (*Template, error) {
	if src == "" {
		return nil, errors.New("input template is empty")
	}
	if n := utf8.RuneCountInString(src); n > MaxLen {
		return nil, fmt.Errorf("input template is %d characters long; the limit is %d", n, MaxLen)
	}
	segs, err := split(src)
	if err != nil {
		return nil, err
	}
	t := &Template{src: src, segs: segs}
	for _, s := range segs {
		t.litLen += len(s.lit)
		if s.ph && (s.v == varEvent || s.v == varEventJSON || s.v == varPath && len(s.path.steps) <= 1) {
			t.big++
		}
	}
	if err := t.decideKind(); err != nil {
		return nil, err
	}
	return t, nil
}

// MustParse is Parse that panics on error, for templates fixed in code.
func MustParse(src string) *Template {
	t, err := Parse(src)
	if err != nil {
		panic(err)
	}
	return t
}

// split cuts the template into literal text and placeholders. A placeholder
// starts at "<$" or "<aws." and ends at the next '>'; any other '<' is text.
func split(src string) ([]segment, error) {
	var segs []segment
	lit := 0
	for i := 0; i < len(src); {
		j := strings.IndexByte(src[i:], '<')
		if j < 0 {
			break
		}
		i += j
		rest := src[i+1:]
		if !strings.HasPrefix(rest, "$") && !strings.HasPrefix(rest, "aws.") {
			i++
			continue
		}
		end := strings.IndexByte(rest, '>')
		if end < 0 {
			return nil, syntaxErr(src, i, "unterminated placeholder %q: no closing '>'", excerpt(src, i))
		}
		body := rest[:end]
		ph := segment{ph: true, src: src[i : i+end+2], off: i}
		if body[0] == '$' {
			p, err := parsePath(body)
			if err != nil {
				return nil, syntaxErr(src, i+1+err.pos, "invalid path %q: %s", ph.src, err.msg)
			}
			ph.v, ph.path = varPath, p
		} else {
			v, ok := reservedVar(body)
			if !ok {
				return nil, syntaxErr(src, i, "unknown reserved variable %q", ph.src)
			}
			ph.v = v
		}
		if lit < i {
			segs = append(segs, segment{lit: src[lit:i], off: lit})
		}
		segs = append(segs, ph)
		i += end + 2
		lit = i
	}
	if lit < len(src) {
		segs = append(segs, segment{lit: src[lit:], off: lit})
	}
	return segs, nil
}

// lonePlaceholder reports whether the template is one placeholder with at
// most whitespace around it: AWS's "JSON Path" form, rendered as text.
func (t *Template) lonePlaceholder() bool {
	n := 0
	for _, s := range t.segs {
		if s.ph {
			n++
		} else if strings.TrimLeft(s.lit, " \t\r\n") != "" {
			return false
		}
	}
	return n == 1
}

// decideKind sets the kind and every placeholder's context, checking JSON
// templates against their probe: the template with nothing in place of
// placeholders inside strings and null in place of the others.
func (t *Template) decideKind() error {
	trimmed := strings.TrimLeft(t.src, " \t\r\n")
	looksJSON := strings.HasPrefix(trimmed, "{") || strings.HasPrefix(trimmed, "[")

	var probe []byte
	type span struct{ probe, tmpl int }
	var spans []span // where each segment starts in the probe and in the template
	inStr, esc := false, false
	hexLeft := 0      // hex digits still due in a \u escape
	inEscape := false // a placeholder sits inside an escape sequence
	for i := range t.segs {
		s := &t.segs[i]
		spans = append(spans, span{len(probe), s.off})
		if !s.ph {
			for k := 0; k < len(s.lit); k++ {
				c := s.lit[k]
				switch {
				case hexLeft > 0:
					hexLeft--
				case esc:
					esc = false
					if c == 'u' {
						hexLeft = 4
					}
				case inStr && c == '\\':
					esc = true
				case c == '"':
					inStr = !inStr
				}
			}
			probe = append(probe, s.lit...)
			continue
		}
		switch {
		case esc || hexLeft > 0:
			if looksJSON {
				return syntaxErr(t.src, s.off, "placeholder %q is inside an escape sequence of a JSON string", s.src)
			}
			inEscape = true
		case inStr:
			s.ctx = ctxJSONString
		default:
			s.ctx = ctxJSONValue
			probe = append(probe, "null"...)
		}
	}
	if !inEscape && json.Valid(probe) && !t.lonePlaceholder() {
		t.kind = KindJSON
		return nil
	}
	t.kind = KindText
	for i := range t.segs {
		t.segs[i].ctx = ctxText
	}
	if !looksJSON {
		return nil
	}
	var v any
	err := json.Unmarshal(probe, &v)
	var se *json.SyntaxError
	if err == nil {
		return nil
	}
	if !errors.As(err, &se) {
		return syntaxErr(t.src, 0, "not valid JSON: %v", err)
	}
	if derr := json.NewDecoder(bytes.NewReader(probe)).Decode(&v); errors.Is(derr, io.ErrUnexpectedEOF) {
		return syntaxErr(t.src, len(t.src), "not valid JSON: %v", err)
	}
	pos := max(int(se.Offset)-1, 0)
	off := len(t.src)
	for k := len(spans) - 1; k >= 0; k-- {
		if spans[k].probe <= pos {
			if t.segs[k].ph {
				off = spans[k].tmpl
			} else {
				off = min(spans[k].tmpl+pos-spans[k].probe, len(t.src))
			}
			break
		}
	}
	if off >= len(t.src) {
		return syntaxErr(t.src, len(t.src), "not valid JSON: %v", err)
	}
	return syntaxErr(t.src, off, "not valid JSON: %v at %q", err, excerpt(t.src, off))
}

// IsDynamicPath reports whether v is, as a whole, a JSON path: Pipes'
// "dynamic path parameter" form (`$.body.customer_id`), which target and
// enrichment parameters take in place of a constant.
func IsDynamicPath(v string) bool {
	return v == "$" || strings.HasPrefix(v, "$.") || strings.HasPrefix(v, "$[")
}

// ParseParameter compiles a templated parameter of a target or an
// enrichment (a message group id, a header value, a query value, a routing
// key, ...). As in EventBridge Pipes, a value that is a bare JSON path
// (`$.body.id`, the whole value) is evaluated per event; pipes also takes
// `<$.path>` and `<aws.pipes.*>` placeholders inside text. It returns nil
// for a constant (no path, no placeholder), and a *SyntaxError for a path
// outside the supported subset. It does not block and is safe for
// concurrent use; the template it returns is immutable.
func ParseParameter(v string) (*Template, error) {
	switch {
	case IsDynamicPath(v):
		t, err := Parse("<" + v + ">")
		var se *SyntaxError
		if errors.As(err, &se) {
			// Say where the problem is in v, as the user wrote it, not in
			// the placeholder it is read as.
			at := *se
			at.Offset, at.Column = max(at.Offset-1, 0), max(at.Column-1, 1)
			at.Msg = strings.ReplaceAll(at.Msg, "<"+v+">", v)
			return nil, &at
		}
		return t, err
	case !strings.Contains(v, "<$") && !strings.Contains(v, "<aws."):
		return nil, nil
	}
	return Parse(v)
}
