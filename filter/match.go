package filter

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/netip"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/pipesproject/pipes/internal/jsonvalue"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

var _ pipe.Filter = (*Patterns)(nil)

// objNode is a compiled object of a pattern: all fields and all `$or`
// groups must match.
type objNode struct {
	fields []fieldNode
	// ors holds the `$or` groups: in each, one alternative must match the
	// same object.
	ors [][]*objNode
	// absentOK is true when the object matches where the event has none.
	absentOK bool
}

// fieldNode is one field of a pattern object: a nested object or a leaf.
type fieldNode struct {
	key  string
	rec  recordField // which record field, for top-level fields
	obj  *objNode
	leaf *leafNode
}

// leafNode is the array of values of a field, OR-ed.
type leafNode struct {
	ms          []matcher
	existsTrue  bool
	existsFalse bool
}

type matchKind uint8

const (
	mString matchKind = iota
	mNumber
	mBool
	mNull
	mPrefix
	mPrefixFold
	mSuffix
	mSuffixFold
	mEqualFold
	mWildcard
	mExists
	mCIDR
	mNumeric
	mButStrings
	mButNumbers
	mButPrefix
	mButSuffix
	mButFold
	mButWildcard
)

// matcher is one compiled value of a leaf.
type matcher struct {
	kind matchKind
	s    string
	f    float64
	b    bool // mBool's value; mExists's operand
	w    *wildcard
	cidr netip.Prefix
	// numeric bounds
	hasLo, hasHi   bool
	loIncl, hiIncl bool
	lo, hi         float64
	// anything-but operands
	strs []string
	nums []float64
	ws   []*wildcard
}

// wildcard is a wildcard pattern split at its `*`s: len(segs)-1 stars.
type wildcard struct {
	segs []string
}

func (w *wildcard) match(s string) bool {
	segs := w.segs
	if len(segs) == 1 {
		return s == segs[0]
	}
	first, last := segs[0], segs[len(segs)-1]
	if !strings.HasPrefix(s, first) {
		return false
	}
	s = s[len(first):]
	if !strings.HasSuffix(s, last) {
		return false
	}
	s = s[:len(s)-len(last)]
	for _, seg := range segs[1 : len(segs)-1] {
		i := strings.Index(s, seg)
		if i < 0 {
			return false
		}
		s = s[i+len(seg):]
	}
	return true
}

// MatchValue tells whether a decoded JSON value (map[string]any, []any,
// string, float64, bool, nil, as encoding/json yields) matches the pattern.
// No body format check applies: the value is matched as it is. Exact
// numbers in the pattern compare by value with float64s and by text with
// json.Numbers (decode with UseNumber to get EventBridge's text rule).
func (p *Pattern) MatchValue(v any) bool { return p.root.match(v) }

// Match tells whether the event's record matches any of the patterns, the
// Pipes way: the record's filterable fields are messageId, receiptHandle,
// body, attributes, messageAttributes, md5OfBody and md5OfMessageAttributes;
// body is matched as decoded JSON when it is valid JSON and as a string
// otherwise, and a pattern whose body's shape disagrees with the body's
// format does not match (SPEC.md B §4.4). It never returns an error and
// never blocks.
func (ps *Patterns) Match(_ context.Context, ev *pipe.Event) (bool, error) {
	r := record{ev: ev, numberText: ps.numberText}
	for _, p := range ps.list {
		if p.root.matchRecord(&r) {
			return true, nil
		}
	}
	return false, nil
}

// MatchEvent tells whether the event's record matches this pattern, as
// Patterns.Match does.
func (p *Pattern) MatchEvent(ev *pipe.Event) bool {
	r := record{ev: ev, numberText: p.numberText}
	return p.root.matchRecord(&r)
}

func (n *objNode) matchRecord(r *record) bool {
	for i := range n.fields {
		if !n.fields[i].matchRecord(r) {
			return false
		}
	}
	for _, group := range n.ors {
		ok := false
		for _, alt := range group {
			if alt.matchRecord(r) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func (f *fieldNode) matchRecord(r *record) bool {
	m := r.ev.Message
	if m.Record != nil {
		return f.matchShaped(r, m.Record)
	}
	switch f.rec {
	case recMessageID:
		return f.matchString(m.MessageID)
	case recReceiptHandle:
		return f.matchString(m.ReceiptHandle)
	case recMD5OfBody:
		return f.matchString(m.MD5OfBody)
	case recMD5OfMessageAttributes:
		if m.MD5OfMessageAttributes == "" {
			return f.matchAbsent()
		}
		return f.matchString(m.MD5OfMessageAttributes)
	case recBody:
		body, isJSON := r.body()
		if f.obj != nil {
			// A JSON object pattern on a plain string body: dropped.
			return isJSON && f.obj.match(body)
		}
		if isJSON {
			// A plain string pattern on a JSON body: dropped.
			return false
		}
		s, _ := body.(string)
		return f.leaf.matchString(s)
	case recAttributes:
		return f.matchPresent(m.Attributes)
	case recMessageAttributes:
		return f.matchPresent(r.messageAttributes())
	case recEnvelope:
		env, ok := envelopeValue(m)
		if !ok {
			return f.matchAbsent()
		}
		return f.matchPresent(env)
	default:
		return f.matchAbsent()
	}
}

// matchShaped matches a top-level field of a record of another shape than
// SQS's (RabbitMQ): its body field as an SQS body (decoded when it is JSON,
// else the base64 text the record carries), messageId, and the record's
// other filterable fields decoded.
func (f *fieldNode) matchShaped(r *record, rec *source.Record) bool {
	m := r.ev.Message
	switch {
	case f.key == "messageId":
		return f.matchString(m.MessageID)
	case f.key == rec.BodyField:
		body, isJSON := r.body()
		if f.obj != nil {
			return isJSON && f.obj.match(body)
		}
		if isJSON {
			return false
		}
		return f.leaf.matchString(base64.StdEncoding.EncodeToString([]byte(m.Body)))
	case !rec.Filterable(f.key):
		return f.matchAbsent()
	}
	raw, ok := rec.Field(f.key)
	if !ok {
		return f.matchAbsent()
	}
	v, ok := jsonvalue.Decode(string(raw), false)
	if !ok {
		return f.matchAbsent()
	}
	return f.matchPresent(v)
}

// matchString matches the field against a string value.
func (f *fieldNode) matchString(s string) bool {
	if f.leaf != nil {
		return f.leaf.matchString(s)
	}
	return f.obj.absentOK // a string has no fields
}

func (f *fieldNode) matchAbsent() bool {
	if f.leaf != nil {
		return f.leaf.existsFalse
	}
	return f.obj.absentOK
}

func (f *fieldNode) matchPresent(v any) bool {
	if f.leaf != nil {
		return f.leaf.match(v)
	}
	return f.obj.match(v)
}

// match tells whether the object pattern matches the value v. An array
// matches when one of its elements matches the whole object, so fields
// matched together come from the same element.
func (n *objNode) match(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for i := range n.fields {
			f := &n.fields[i]
			x, ok := v[f.key]
			if !ok {
				if !f.matchAbsent() {
					return false
				}
				continue
			}
			if !f.matchPresent(x) {
				return false
			}
		}
	case map[string]string:
		for i := range n.fields {
			f := &n.fields[i]
			x, ok := v[f.key]
			if !ok {
				if !f.matchAbsent() {
					return false
				}
				continue
			}
			if !f.matchString(x) {
				return false
			}
		}
	case []any:
		if len(v) == 0 {
			return n.absentOK
		}
		for _, e := range v {
			if n.match(e) {
				return true
			}
		}
		return false
	default:
		return n.absentOK
	}
	for _, group := range n.ors {
		ok := false
		for _, alt := range group {
			if alt.match(v) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// match tells whether a present value matches one of the leaf's values.
func (l *leafNode) match(v any) bool {
	switch v := v.(type) {
	case []any:
		matched, leaves := l.matchArray(v)
		return matched || !leaves && l.existsFalse
	case map[string]any, map[string]string:
		// The path ends at an object: no value there.
		return l.existsFalse
	default:
		return l.matchScalar(v)
	}
}

// matchArray matches the leaf values of an array (nested arrays are
// flattened); leaves tells whether there was any.
func (l *leafNode) matchArray(arr []any) (matched, leaves bool) {
	for _, e := range arr {
		switch e := e.(type) {
		case []any:
			m, lv := l.matchArray(e)
			if m {
				return true, true
			}
			leaves = leaves || lv
		case map[string]any, map[string]string:
		default:
			leaves = true
			if l.matchScalar(e) {
				return true, true
			}
		}
	}
	return false, leaves
}

func (l *leafNode) matchScalar(v any) bool {
	switch v := v.(type) {
	case string:
		return l.matchString(v)
	case float64:
		return l.matchNumber(v, "")
	case bool:
		return l.matchOther(v, false)
	case nil:
		return l.matchOther(false, true)
	case int:
		return l.matchNumber(float64(v), "")
	case int64:
		return l.matchNumber(float64(v), "")
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		return err == nil && l.matchNumber(f, string(v))
	}
	return false
}

func (l *leafNode) matchString(s string) bool {
	for i := range l.ms {
		m := &l.ms[i]
		var ok bool
		switch m.kind {
		case mString:
			ok = s == m.s
		case mPrefix:
			ok = strings.HasPrefix(s, m.s)
		case mSuffix:
			ok = strings.HasSuffix(s, m.s)
		case mPrefixFold:
			ok = hasPrefixFold(s, m.s)
		case mSuffixFold:
			ok = hasSuffixFold(s, m.s)
		case mEqualFold:
			ok = strings.EqualFold(s, m.s)
		case mWildcard:
			ok = m.w.match(s)
		case mExists:
			ok = m.b
		case mCIDR:
			a, err := netip.ParseAddr(s)
			ok = err == nil && (m.cidr.Contains(a) || m.cidr.Contains(a.Unmap()))
		case mButStrings:
			ok = true
			for _, x := range m.strs {
				if s == x {
					ok = false
					break
				}
			}
		case mButNumbers:
			ok = true
		case mButPrefix:
			ok = true
			for _, x := range m.strs {
				if strings.HasPrefix(s, x) {
					ok = false
					break
				}
			}
		case mButSuffix:
			ok = true
			for _, x := range m.strs {
				if strings.HasSuffix(s, x) {
					ok = false
					break
				}
			}
		case mButFold:
			ok = true
			for _, x := range m.strs {
				if strings.EqualFold(s, x) {
					ok = false
					break
				}
			}
		case mButWildcard:
			ok = true
			for _, w := range m.ws {
				if w.match(s) {
					ok = false
					break
				}
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// matchNumber matches a number; text is its JSON text when known (a
// json.Number), "" when only the value is.
func (l *leafNode) matchNumber(f float64, text string) bool {
	for i := range l.ms {
		m := &l.ms[i]
		var ok bool
		switch m.kind {
		case mNumber:
			// Exact numbers compare by text when the text is known
			// (SPEC.md B §4.1: 300, 300.0 and 3.0e2 differ).
			ok = text == m.s || text == "" && f == m.f
		case mNumeric:
			ok = (!m.hasLo || f > m.lo || m.loIncl && f == m.lo) &&
				(!m.hasHi || f < m.hi || m.hiIncl && f == m.hi)
		case mExists:
			ok = m.b
		case mButStrings:
			ok = true
		case mButNumbers:
			ok = true
			for _, x := range m.nums {
				if f == x {
					ok = false
					break
				}
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// matchOther matches a boolean (b) or null (isNull).
func (l *leafNode) matchOther(b, isNull bool) bool {
	for i := range l.ms {
		m := &l.ms[i]
		var ok bool
		switch m.kind {
		case mBool:
			ok = !isNull && b == m.b
		case mNull:
			ok = isNull
		case mExists:
			ok = m.b
		case mButStrings, mButNumbers:
			ok = true
		}
		if ok {
			return true
		}
	}
	return false
}

// foldEqual tells whether two runes are equal under Unicode simple case
// folding.
func foldEqual(a, b rune) bool {
	if a == b {
		return true
	}
	for r := unicode.SimpleFold(a); r != a; r = unicode.SimpleFold(r) {
		if r == b {
			return true
		}
	}
	return false
}

func hasPrefixFold(s, prefix string) bool {
	for prefix != "" {
		if s == "" {
			return false
		}
		a, na := utf8.DecodeRuneInString(s)
		b, nb := utf8.DecodeRuneInString(prefix)
		if !foldEqual(a, b) {
			return false
		}
		s, prefix = s[na:], prefix[nb:]
	}
	return true
}

func hasSuffixFold(s, suffix string) bool {
	for suffix != "" {
		if s == "" {
			return false
		}
		a, na := utf8.DecodeLastRuneInString(s)
		b, nb := utf8.DecodeLastRuneInString(suffix)
		if !foldEqual(a, b) {
			return false
		}
		s, suffix = s[:len(s)-na], suffix[:len(suffix)-nb]
	}
	return true
}
