package config

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/pipesproject/pipes/internal/similar"
)

// decoder walks the yaml.Node tree of one file and collects every problem.
type decoder struct {
	file string
	// lines are the file's lines, to follow text values in it (span).
	lines  [][]byte
	lookup func(string) (string, bool)
	errs   Errors
	warns  Warnings
	// skip holds the positions of values made with a placeholder for an
	// unset variable (Loader.SkipEnv), and their fields: their problems
	// are not reported.
	skip map[Pos]string
	// placeholder is set by the lookup when it made one up.
	placeholder bool
	// targetTypes are the target types accepted beside the built-in ones
	// (Loader.TargetTypes).
	targetTypes []string
	// envValues are the non-empty values of the variables interpolated so
	// far (see Pipe.EnvValues).
	envValues []string
	// rec, when set, notes every block and key the decoder reads, for
	// Schema.
	rec *recorder
}

// warnf records something valid that would only show at run time (see
// Warning); it never makes the file invalid.
func (d *decoder) warnf(pos Pos, field, format string, args ...any) {
	d.warns = append(d.warns, &Warning{Pos: pos, Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (d *decoder) errorf(pos Pos, field, format string, args ...any) {
	if _, skipped := d.skip[pos]; skipped {
		return
	}
	d.errs = append(d.errs, &Error{Pos: pos, Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (d *decoder) pos(n *yaml.Node) Pos {
	return Pos{File: d.file, Line: n.Line, Column: n.Column}
}

// join appends key to the dotted field path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// deref follows an alias to the node it names.
func deref(n *yaml.Node) *yaml.Node {
	if n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		return n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// kindName names what a node is, for "got ..." in messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.DocumentNode:
		return "a document"
	}
	return "a single value"
}

// block is one YAML mapping of known keys, such as `source:`.
type block struct {
	d      *decoder
	path   string
	pos    Pos
	vals   map[string]*yaml.Node
	keyPos map[string]Pos
}

// block checks that n is a mapping whose keys are all known and unique. It
// returns nil (after reporting) when n is not a mapping.
func (d *decoder) block(n *yaml.Node, path string, known []string) *block {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		d.errorf(d.pos(n), path, "must be a mapping, got %s", kindName(n))
		return nil
	}
	d.rec.block(path, known)
	b := &block{d: d, path: path, pos: d.pos(n), vals: map[string]*yaml.Node{}, keyPos: map[string]Pos{}}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.errorf(d.pos(k), path, "keys must be plain names, got %s", kindName(k))
			continue
		}
		field := join(path, k.Value)
		switch {
		case k.Value == "<<":
			d.errorf(d.pos(k), path, "merge keys (<<) are not supported")
		case b.vals[k.Value] != nil:
			d.errorf(d.pos(k), field, "duplicate key (first at line %d)", b.keyPos[k.Value].Line)
		case !slices.Contains(known, k.Value):
			d.errorf(d.pos(k), field, "unknown key%s", suggest(k.Value, known))
		default:
			b.vals[k.Value] = v
			b.keyPos[k.Value] = d.pos(k)
		}
	}
	return b
}

// suggest names the closest known key, or lists them all.
func suggest(key string, known []string) string {
	if best := similar.Closest(key, known); best != "" {
		return fmt.Sprintf("; did you mean %s?", best)
	}
	return "; known keys: " + strings.Join(known, ", ")
}

// has reports whether key is present with a non-null value.
func (b *block) has(key string) bool { return !isNull(deref(b.vals[key])) }

// field is the dotted path of key.
func (b *block) field(key string) string { return join(b.path, key) }

// at is where key's value is, or the block itself when key is absent.
func (b *block) at(key string) Pos {
	if n := b.vals[key]; n != nil {
		return b.d.pos(n)
	}
	return b.pos
}

// positions is where the value of each key of b is written, and of each
// entry of a mapping or list value (see KeyPos).
func (b *block) positions() KeyPos {
	out := KeyPos{}
	for k, n := range b.vals {
		out[k] = b.d.pos(n)
		switch n = deref(n); n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				name := deref(n.Content[i])
				if _, dup := out[k+"."+name.Value]; name.Kind == yaml.ScalarNode && !dup {
					out[k+"."+name.Value] = b.d.pos(n.Content[i+1])
				}
			}
		case yaml.SequenceNode:
			for i, e := range n.Content {
				out[k+"["+strconv.Itoa(i)+"]"] = b.d.pos(e)
			}
		}
	}
	return out
}

// sub is the mapping under key, or nil when key is absent or null.
func (b *block) sub(key string, known []string) *block {
	b.d.rec.block(b.field(key), known)
	if !b.has(key) {
		return nil
	}
	return b.d.block(b.vals[key], b.field(key), known)
}

// scalar is one scalar value after interpolation.
type scalar struct {
	text         string
	pos          Pos
	quoted       bool // written in quotes: a string, never a number or bool
	interpolated bool // holds an environment variable's value: never print it
	tag          string
}

// got shows the value in a message, unless it came from the environment.
func (s scalar) got() string {
	if s.interpolated {
		return ""
	}
	t := s.text
	if len(t) > 40 {
		t = t[:40] + "..."
	}
	return fmt.Sprintf(", got %q", t)
}

// literalString reports whether the value was written in quotes, without
// interpolation: a string where a number or boolean is wanted. ("${N}" in
// quotes is fine: the environment only holds strings.)
func (s scalar) literalString() bool { return s.quoted && !s.interpolated }

// recordingLookup is d.lookup noting the values it gives.
func (d *decoder) recordingLookup(name string) (string, bool) {
	v, ok := d.lookup(name)
	if ok && v != "" {
		d.envValues = append(d.envValues, v)
	}
	return v, ok
}

// scalarOf interpolates the scalar n. It reports and returns false when n is
// not a scalar (want names the expected type) or interpolation fails; it
// returns false without a report for null.
func (d *decoder) scalarOf(n *yaml.Node, field, want string) (scalar, bool) {
	n = deref(n)
	if isNull(n) {
		return scalar{}, false
	}
	if n.Kind != yaml.ScalarNode {
		d.errorf(d.pos(n), field, "must be %s, got %s", want, kindName(n))
		return scalar{}, false
	}
	d.placeholder = false
	text, used, err := expand(n.Value, d.recordingLookup)
	if d.placeholder {
		d.skipAt(d.pos(n), field)
	}
	if err != nil {
		d.errorf(d.pos(n), field, "%v", err)
		return scalar{}, false
	}
	return scalar{
		text:         text,
		pos:          d.pos(n),
		quoted:       n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0,
		interpolated: used,
		tag:          n.ShortTag(),
	}, true
}

// str is key's text, "" when absent.
func (b *block) str(key string) string {
	b.d.rec.field(b.path, key, fieldSpec{Kind: "string"})
	s, _ := b.d.scalarOf(b.vals[key], b.field(key), "a string")
	return s.text
}

// strSpan is key's text and where each of its characters is written (see
// Span); the zero Span when absent or not a string.
func (b *block) strSpan(key string) (string, Span) {
	b.d.rec.field(b.path, key, fieldSpec{Kind: "string"})
	n := deref(b.vals[key])
	s, ok := b.d.scalarOf(n, b.field(key), "a string")
	if !ok {
		return s.text, Span{}
	}
	if s.interpolated {
		return s.text, Span{Start: s.pos}
	}
	return s.text, b.d.span(n, n.Value)
}

// strPos is key's text and where it is written.
func (b *block) strPos(key string) (string, Pos) {
	b.d.rec.field(b.path, key, fieldSpec{Kind: "string"})
	s, _ := b.d.scalarOf(b.vals[key], b.field(key), "a string")
	return s.text, b.at(key)
}

// enum is key's text, which must be one of allowed; def when absent.
func (b *block) enum(key, def string, allowed ...string) string {
	b.d.rec.field(b.path, key, fieldSpec{Kind: "enum", Enum: allowed, Default: def})
	s, ok := b.d.scalarOf(b.vals[key], b.field(key), "a string")
	if !ok {
		return def
	}
	if !slices.Contains(allowed, s.text) {
		b.d.errorf(s.pos, b.field(key), "must be one of %s%s", strings.Join(allowed, ", "), s.got())
		return def
	}
	return s.text
}

// integer is key's whole number in [lo, hi]; def when absent or invalid.
func (b *block) integer(key string, def, lo, hi int) int {
	b.d.rec.field(b.path, key, fieldSpec{Kind: "integer", Min: float64(lo), Max: float64(hi), Default: def})
	field := b.field(key)
	s, ok := b.d.scalarOf(b.vals[key], field, "a whole number")
	if !ok {
		return def
	}
	v, err := strconv.Atoi(s.text)
	if err != nil {
		b.d.errorf(s.pos, field, "must be a whole number%s", s.got())
		return def
	}
	if s.literalString() {
		b.d.errorf(s.pos, field, "must be a whole number, not a quoted string")
		return def
	}
	if v < lo || v > hi {
		b.d.errorf(s.pos, field, "must be between %d and %d", lo, hi)
		return def
	}
	return v
}

// number is key's number in [lo, hi]; def when absent or invalid.
func (b *block) number(key string, def, lo, hi float64) float64 {
	b.d.rec.field(b.path, key, fieldSpec{Kind: "number", Min: lo, Max: hi, Default: def})
	field := b.field(key)
	s, ok := b.d.scalarOf(b.vals[key], field, "a number")
	if !ok {
		return def
	}
	v, err := strconv.ParseFloat(s.text, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		b.d.errorf(s.pos, field, "must be a number%s", s.got())
		return def
	}
	if s.literalString() {
		b.d.errorf(s.pos, field, "must be a number, not a quoted string")
		return def
	}
	if v < lo || v > hi {
		b.d.errorf(s.pos, field, "must be between %g and %g", lo, hi)
		return def
	}
	return v
}

// boolean is key's true or false; def when absent or invalid.
func (b *block) boolean(key string, def bool) bool {
	b.d.rec.field(b.path, key, fieldSpec{Kind: "boolean", Default: def})
	field := b.field(key)
	s, ok := b.d.scalarOf(b.vals[key], field, "true or false")
	if !ok {
		return def
	}
	if s.text != "true" && s.text != "false" {
		b.d.errorf(s.pos, field, "must be true or false%s", s.got())
		return def
	}
	if s.literalString() {
		b.d.errorf(s.pos, field, "must be true or false, not a quoted string")
		return def
	}
	return s.text == "true"
}

// duration is key's duration ("30s") in [lo, hi]; def when absent or
// invalid.
func (b *block) duration(key string, def, lo, hi time.Duration) time.Duration {
	b.d.rec.field(b.path, key, fieldSpec{Kind: "duration", Default: fmtDuration(def)})
	v, ok := b.durationAny(key)
	if !ok {
		return def
	}
	if v < lo || v > hi {
		b.d.errorf(b.at(key), b.field(key), "must be between %s and %s", fmtDuration(lo), fmtDuration(hi))
		return def
	}
	return v
}

// durationAny is key's duration without a range check; false when absent or
// invalid (reported).
func (b *block) durationAny(key string) (time.Duration, bool) {
	b.d.rec.field(b.path, key, fieldSpec{Kind: "duration"})
	field := b.field(key)
	s, ok := b.d.scalarOf(b.vals[key], field, `a duration like "30s"`)
	if !ok {
		return 0, false
	}
	if _, err := strconv.Atoi(s.text); err == nil && s.text != "0" {
		b.d.errorf(s.pos, field, `must be a duration with a unit, like "30s"`)
		return 0, false
	}
	v, err := time.ParseDuration(s.text)
	if err != nil {
		b.d.errorf(s.pos, field, `must be a duration like "30s", "1m30s" or "250ms"%s`, s.got())
		return 0, false
	}
	return v, true
}

// fmtDuration writes d the way users write it: 5m, not 5m0s.
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// headers is key's mapping of HTTP header names to values. Values are never
// printed: they often hold credentials.
func (b *block) headers(key string) map[string]string {
	b.d.rec.field(b.path, key, fieldSpec{Kind: "headers"})
	n := deref(b.vals[key])
	if isNull(n) {
		return nil
	}
	field := b.field(key)
	if n.Kind != yaml.MappingNode {
		b.d.errorf(b.d.pos(n), field, "must be a mapping of header names to values, got %s", kindName(n))
		return nil
	}
	out := map[string]string{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode || !validHeaderName(k.Value) {
			b.d.errorf(b.d.pos(k), field, "header names must be letters, digits and !#$%%&'*+-.^_`|~")
			continue
		}
		name := k.Value
		hfield := field + "." + name
		if _, dup := out[name]; dup {
			b.d.errorf(b.d.pos(k), hfield, "duplicate header")
			continue
		}
		s, ok := b.d.scalarOf(v, hfield, "a header value")
		if ok && strings.ContainsAny(s.text, "\r\n\x00") {
			b.d.errorf(s.pos, hfield, "header value must not hold line breaks or NUL")
			continue
		}
		out[name] = s.text
	}
	return out
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'A' && c <= 'Z') && !(c >= 'a' && c <= 'z') && !(c >= '0' && c <= '9') &&
			!strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

// checkHTTPURL checks that raw, key's value, is an absolute http or https
// URL. The URL is not printed: it may hold credentials.
func (b *block) checkHTTPURL(key, raw string) {
	if raw == "" {
		return
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		b.d.errorf(b.at(key), b.field(key), "must be an absolute http or https URL")
	}
}
