package filter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits of the pattern grammar (SPEC.md Part A item 4, B §4.1 and §4.3).
const (
	// MaxPatterns is how many patterns a pipe may have; they are OR-ed.
	MaxPatterns = 5
	// MaxPatternLength is the longest pattern, in characters.
	MaxPatternLength = 4096
	// MaxCombinations bounds the rule combinations a pattern's `$or`s
	// expand to (the product of the `$or` array sizes).
	MaxCombinations = 1000
)

// PatternError says why a pattern was rejected and where: compile errors
// are reported when a pipe is loaded, never when it matches.
type PatternError struct {
	// Index is the pattern's place in the list given to CompilePatterns,
	// or -1 for CompilePattern.
	Index int
	// Field is the dotted path of the field whose value is wrong, e.g.
	// "detail.price"; "" for the pattern as a whole.
	Field string
	// Path is the JSON path to the offending place, e.g.
	// "detail.price[0].numeric".
	Path string
	// Operator is the operator that is wrong, "" when the error is not
	// about one.
	Operator string
	// Msg says what is wrong.
	Msg string
}

// Error says which pattern is wrong, where and why:
// `patterns[1]: detail.price: numeric: operator "=>" is not one of =, <, <=, >, >=`.
func (e *PatternError) Error() string {
	var b strings.Builder
	if e.Index >= 0 {
		fmt.Fprintf(&b, "patterns[%d]: ", e.Index)
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	if e.Operator != "" {
		b.WriteString(e.Operator)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Pattern is one compiled EventBridge event pattern. It is immutable and
// safe for concurrent use.
type Pattern struct {
	root *objNode
	// numberText is true when the pattern needs the text of the body's
	// numbers.
	numberText bool
	// readsBody is true when the pattern names body.
	readsBody bool
}

// Patterns is a compiled list of event patterns, OR-ed: an event passes
// when it matches any of them. It implements pipe.Filter and is safe for
// concurrent use.
type Patterns struct {
	list       []*Pattern
	numberText bool
	readsBody  bool
}

// CompilePattern compiles one event pattern given as JSON text. Every
// mistake in the pattern is reported here, as a *PatternError.
func CompilePattern(src string) (*Pattern, error) {
	p, err := compilePattern(src)
	if err != nil {
		var pe *PatternError
		if errors.As(err, &pe) {
			pe.Index = -1
		}
		return nil, err
	}
	return p, nil
}

// CompilePatterns compiles up to MaxPatterns event patterns, OR-ed. A
// *PatternError names the pattern that is wrong by its index.
func CompilePatterns(patterns []string) (*Patterns, error) {
	if len(patterns) > MaxPatterns {
		return nil, fmt.Errorf("at most %d patterns are allowed, got %d", MaxPatterns, len(patterns))
	}
	ps := &Patterns{list: make([]*Pattern, len(patterns))}
	for i, src := range patterns {
		p, err := compilePattern(src)
		if err != nil {
			var pe *PatternError
			if errors.As(err, &pe) {
				pe.Index = i
			}
			return nil, err
		}
		ps.list[i] = p
		ps.numberText = ps.numberText || p.numberText
		ps.readsBody = ps.readsBody || p.readsBody
	}
	return ps, nil
}

func patternErr(field, path, op, format string, args ...any) *PatternError {
	return &PatternError{Field: field, Path: path, Operator: op, Msg: fmt.Sprintf(format, args...)}
}

func compilePattern(src string) (*Pattern, error) {
	if n := utf8.RuneCountInString(src); n > MaxPatternLength {
		return nil, patternErr("", "", "", "the pattern is %d characters long, more than %d", n, MaxPatternLength)
	}
	dec := json.NewDecoder(strings.NewReader(src))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, patternErr("", "", "", "invalid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, patternErr("", "", "", "invalid JSON: unexpected data after the pattern")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, patternErr("", "", "", "a pattern must be a JSON object, not %s", kindOf(v))
	}
	root, combos, err := compileObject("", m, true)
	if err != nil {
		return nil, err
	}
	if combos > MaxCombinations {
		return nil, patternErr("", "", "$or", "the pattern expands to more than %d combinations", MaxCombinations)
	}
	return &Pattern{root: root, numberText: root.bodyHasExactNumber(), readsBody: root.readsBody()}, nil
}

// readsBody tells whether the top-level object names the body.
func (n *objNode) readsBody() bool {
	for i := range n.fields {
		if n.fields[i].rec == recBody {
			return true
		}
	}
	for _, group := range n.ors {
		for _, alt := range group {
			if alt.readsBody() {
				return true
			}
		}
	}
	return false
}

// bodyHasExactNumber tells whether the top-level object matches an exact
// number somewhere under body: then the body must be decoded keeping the
// text of its numbers.
func (n *objNode) bodyHasExactNumber() bool {
	for i := range n.fields {
		if f := &n.fields[i]; f.rec == recBody && f.hasExactNumber() {
			return true
		}
	}
	for _, group := range n.ors {
		for _, alt := range group {
			if alt.bodyHasExactNumber() {
				return true
			}
		}
	}
	return false
}

func (f *fieldNode) hasExactNumber() bool {
	if f.leaf != nil {
		for _, m := range f.leaf.ms {
			if m.kind == mNumber {
				return true
			}
		}
		return false
	}
	return f.obj.hasExactNumber()
}

func (n *objNode) hasExactNumber() bool {
	for i := range n.fields {
		if n.fields[i].hasExactNumber() {
			return true
		}
	}
	for _, group := range n.ors {
		for _, alt := range group {
			if alt.hasExactNumber() {
				return true
			}
		}
	}
	return false
}

// kindOf names a decoded JSON value's type for error messages.
func kindOf(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	default:
		return fmt.Sprintf("%T", v)
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Ruler keywords: an object holding one of them is an operator, so a `$or`
// array of such objects is not a `$or`.
var operatorNames = [...]string{"prefix", "suffix", "equals-ignore-case", "anything-but", "numeric", "exists", "cidr", "wildcard"}

func isOperator(k string) bool {
	for _, o := range operatorNames {
		if k == o {
			return true
		}
	}
	return false
}

// isOr tells whether the value of a "$or" key is a `$or`: an array of at
// least two objects whose keys are not operators. Otherwise "$or" is a plain
// field name.
func isOr(v any) bool {
	arr, ok := v.([]any)
	if !ok || len(arr) < 2 {
		return false
	}
	for _, e := range arr {
		m, ok := e.(map[string]any)
		if !ok || len(m) == 0 {
			return false
		}
		for k := range m {
			if isOperator(k) {
				return false
			}
		}
	}
	return true
}

func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

// mulCap multiplies combination counts, saturating above MaxCombinations.
func mulCap(a, b int) int {
	if a > MaxCombinations || b > MaxCombinations || a*b > MaxCombinations {
		return MaxCombinations + 1
	}
	return a * b
}

// compileObject compiles an object of a pattern: its fields are AND-ed.
// It returns the number of rule combinations its `$or`s expand to.
func compileObject(path string, m map[string]any, top bool) (*objNode, int, error) {
	if len(m) == 0 {
		return nil, 0, patternErr(path, path, "", "an object in a pattern must have at least one field")
	}
	n := &objNode{}
	combos := 1
	for _, k := range sortedKeys(m) {
		v := m[k]
		if k == "$or" && isOr(v) {
			alts := v.([]any)
			sum := 0
			group := make([]*objNode, len(alts))
			for i, a := range alts {
				alt, c, err := compileObject(path, a.(map[string]any), top)
				if err != nil {
					return nil, 0, err
				}
				group[i] = alt
				sum += c
				if sum > MaxCombinations {
					sum = MaxCombinations + 1
				}
			}
			n.ors = append(n.ors, group)
			combos = mulCap(combos, sum)
			continue
		}
		field := join(path, k)
		f := fieldNode{key: k}
		if top {
			f.rec = recordFieldOf(k)
		}
		switch v := v.(type) {
		case map[string]any:
			obj, c, err := compileObject(field, v, false)
			if err != nil {
				return nil, 0, err
			}
			f.obj = obj
			combos = mulCap(combos, c)
		case []any:
			leaf, err := compileLeaf(field, v)
			if err != nil {
				return nil, 0, err
			}
			f.leaf = leaf
		default:
			return nil, 0, patternErr(field, field, "", "the value of a field must be an array of values or an object, not %s", kindOf(v))
		}
		n.fields = append(n.fields, f)
	}
	n.absentOK = n.computeAbsent()
	return n, combos, nil
}

// computeAbsent tells whether the object matches where the event has no such
// object: only when every field accepts being absent (exists:false).
func (n *objNode) computeAbsent() bool {
	for i := range n.fields {
		f := &n.fields[i]
		if f.leaf != nil && !f.leaf.existsFalse || f.obj != nil && !f.obj.absentOK {
			return false
		}
	}
	for _, group := range n.ors {
		ok := false
		for _, alt := range group {
			ok = ok || alt.absentOK
		}
		if !ok {
			return false
		}
	}
	return true
}

// compileLeaf compiles the array of values of a field: they are OR-ed.
func compileLeaf(field string, arr []any) (*leafNode, error) {
	if len(arr) == 0 {
		return nil, patternErr(field, field, "", "an array of values must not be empty")
	}
	leaf := &leafNode{}
	for i, e := range arr {
		path := fmt.Sprintf("%s[%d]", field, i)
		var m matcher
		switch e := e.(type) {
		case nil:
			m = matcher{kind: mNull}
		case bool:
			m = matcher{kind: mBool, b: e}
		case string:
			m = matcher{kind: mString, s: e}
		case json.Number:
			f, err := parseNumber(e)
			if err != nil {
				return nil, patternErr(field, path, "", "%v", err)
			}
			m = matcher{kind: mNumber, f: f, s: string(e)}
		case []any:
			return nil, patternErr(field, path, "", "a value must not be an array")
		case map[string]any:
			var err error
			m, err = compileOperator(field, path, e)
			if err != nil {
				return nil, err
			}
		}
		if m.kind == mExists {
			if m.b {
				leaf.existsTrue = true
			} else {
				leaf.existsFalse = true
			}
		}
		leaf.ms = append(leaf.ms, m)
	}
	return leaf, nil
}

func parseNumber(n json.Number) (float64, error) {
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return 0, fmt.Errorf("number %s is out of range", n)
	}
	return f, nil
}

func compileOperator(field, path string, obj map[string]any) (matcher, error) {
	if len(obj) != 1 {
		if len(obj) == 0 {
			return matcher{}, patternErr(field, path, "", "an operator object must not be empty")
		}
		return matcher{}, patternErr(field, path, "", "an operator object must have exactly one key, not %d (%s)", len(obj), strings.Join(sortedKeys(obj), ", "))
	}
	var op string
	var v any
	for op, v = range obj {
	}
	path = path + "." + op
	bad := func(format string, args ...any) (matcher, error) {
		return matcher{}, patternErr(field, path, op, format, args...)
	}
	switch op {
	case "prefix", "suffix":
		kind, foldKind := mPrefix, mPrefixFold
		if op == "suffix" {
			kind, foldKind = mSuffix, mSuffixFold
		}
		switch v := v.(type) {
		case string:
			return matcher{kind: kind, s: v}, nil
		case map[string]any:
			if s, ok := v["equals-ignore-case"].(string); ok && len(v) == 1 {
				return matcher{kind: foldKind, s: s}, nil
			}
		}
		return bad(`must be a string or {"equals-ignore-case": string}, not %s`, describe(v))
	case "equals-ignore-case":
		if s, ok := v.(string); ok {
			return matcher{kind: mEqualFold, s: s}, nil
		}
		return bad("must be a string, not %s", describe(v))
	case "wildcard":
		s, ok := v.(string)
		if !ok {
			return bad("must be a string, not %s", describe(v))
		}
		w, err := compileWildcard(s)
		if err != nil {
			return bad("%v", err)
		}
		return matcher{kind: mWildcard, w: w}, nil
	case "exists":
		if b, ok := v.(bool); ok {
			return matcher{kind: mExists, b: b}, nil
		}
		return bad("must be true or false, not %s", describe(v))
	case "cidr":
		s, ok := v.(string)
		if !ok {
			return bad("must be a string, not %s", describe(v))
		}
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return bad("%q is not an IPv4 or IPv6 CIDR block (e.g. 10.0.0.0/24)", s)
		}
		return matcher{kind: mCIDR, cidr: pfx.Masked()}, nil
	case "numeric":
		return compileNumeric(v, bad)
	case "anything-but":
		return compileAnythingBut(v, bad)
	default:
		return matcher{}, patternErr(field, path, op, "unknown operator (want one of %s)", strings.Join(operatorNames[:], ", "))
	}
}

// describe shows a bad operand in an error message.
func describe(v any) string {
	switch v.(type) {
	case []any, map[string]any:
		return kindOf(v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return kindOf(v)
	}
	return string(b)
}

func compileNumeric(v any, bad func(string, ...any) (matcher, error)) (matcher, error) {
	arr, ok := v.([]any)
	if !ok || (len(arr) != 2 && len(arr) != 4) {
		return bad("must be [operator, number] or [lower operator, number, upper operator, number]")
	}
	m := matcher{kind: mNumeric}
	for i := 0; i < len(arr); i += 2 {
		op, ok := arr[i].(string)
		if !ok {
			return bad("operator %s is not a string", describe(arr[i]))
		}
		n, ok := arr[i+1].(json.Number)
		if !ok {
			return bad("the value after %q must be a number, not %s", op, describe(arr[i+1]))
		}
		f, err := parseNumber(n)
		if err != nil {
			return bad("%v", err)
		}
		switch op {
		case "=":
			if len(arr) != 2 {
				return bad(`"=" cannot be combined with another operator`)
			}
			m.hasLo, m.lo, m.loIncl = true, f, true
			m.hasHi, m.hi, m.hiIncl = true, f, true
		case ">", ">=":
			if m.hasLo {
				return bad("has two lower bounds; a range needs one lower (> or >=) and one upper (< or <=) bound")
			}
			m.hasLo, m.lo, m.loIncl = true, f, op == ">="
		case "<", "<=":
			if m.hasHi {
				return bad("has two upper bounds; a range needs one lower (> or >=) and one upper (< or <=) bound")
			}
			m.hasHi, m.hi, m.hiIncl = true, f, op == "<="
		default:
			return bad("operator %q is not one of =, <, <=, >, >=", op)
		}
	}
	if m.hasLo && m.hasHi && m.lo > m.hi {
		return bad("the lower bound %v is greater than the upper bound %v", m.lo, m.hi)
	}
	return m, nil
}

func compileAnythingBut(v any, bad func(string, ...any) (matcher, error)) (matcher, error) {
	switch v := v.(type) {
	case string:
		return matcher{kind: mButStrings, strs: []string{v}}, nil
	case json.Number:
		f, err := parseNumber(v)
		if err != nil {
			return bad("%v", err)
		}
		return matcher{kind: mButNumbers, nums: []float64{f}}, nil
	case []any:
		if len(v) == 0 {
			return bad("the list must not be empty")
		}
		switch v[0].(type) {
		case string:
			strs, ok := stringList(v)
			if !ok {
				return bad("a list must hold only strings or only numbers")
			}
			return matcher{kind: mButStrings, strs: strs}, nil
		case json.Number:
			nums := make([]float64, len(v))
			for i, e := range v {
				n, ok := e.(json.Number)
				if !ok {
					return bad("a list must hold only strings or only numbers")
				}
				f, err := parseNumber(n)
				if err != nil {
					return bad("%v", err)
				}
				nums[i] = f
			}
			return matcher{kind: mButNumbers, nums: nums}, nil
		}
		return bad("a list must hold only strings or only numbers, not %s", describe(v[0]))
	case map[string]any:
		if len(v) != 1 {
			return bad("an object must have exactly one key: prefix, suffix, equals-ignore-case or wildcard")
		}
		for k, operand := range v {
			if k != "prefix" && k != "suffix" && k != "equals-ignore-case" && k != "wildcard" {
				return bad("%q cannot be used inside anything-but (want prefix, suffix, equals-ignore-case or wildcard)", k)
			}
			var strs []string
			switch o := operand.(type) {
			case string:
				strs = []string{o}
			case []any:
				var ok bool
				strs, ok = stringList(o)
				if !ok || len(strs) == 0 {
					return bad("%s must be a string or a non-empty list of strings", k)
				}
			default:
				return bad("%s must be a string or a non-empty list of strings, not %s", k, describe(operand))
			}
			switch k {
			case "prefix":
				return matcher{kind: mButPrefix, strs: strs}, nil
			case "suffix":
				return matcher{kind: mButSuffix, strs: strs}, nil
			case "equals-ignore-case":
				return matcher{kind: mButFold, strs: strs}, nil
			default: // wildcard
				ws := make([]*wildcard, len(strs))
				for i, s := range strs {
					w, err := compileWildcard(s)
					if err != nil {
						return bad("wildcard: %v", err)
					}
					ws[i] = w
				}
				return matcher{kind: mButWildcard, ws: ws}, nil
			}
		}
	}
	return bad("must be a string, a number, a non-empty list of strings or of numbers, or an object with prefix, suffix, equals-ignore-case or wildcard, not %s", describe(v))
}

func stringList(arr []any) ([]string, bool) {
	strs := make([]string, len(arr))
	for i, e := range arr {
		s, ok := e.(string)
		if !ok {
			return nil, false
		}
		strs[i] = s
	}
	return strs, true
}

// compileWildcard splits a wildcard pattern at its unescaped `*`s.
func compileWildcard(src string) (*wildcard, error) {
	var segs []string
	var cur bytes.Buffer
	prevStar := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch c {
		case '*':
			if prevStar {
				return nil, fmt.Errorf(`consecutive wildcard characters "**" are not allowed in %q`, src)
			}
			segs = append(segs, cur.String())
			cur.Reset()
			prevStar = true
			continue
		case '\\':
			if i+1 >= len(src) {
				return nil, fmt.Errorf(`%q ends with an unfinished escape "\"`, src)
			}
			next := src[i+1]
			if next != '*' && next != '\\' {
				r, _ := utf8.DecodeRuneInString(src[i+1:])
				return nil, fmt.Errorf(`invalid escape "\%c" in %q (only \* and \\ may be escaped)`, r, src)
			}
			cur.WriteByte(next)
			i++
		default:
			cur.WriteByte(c)
		}
		prevStar = false
	}
	segs = append(segs, cur.String())
	return &wildcard{segs: segs}, nil
}
