// Package jsonvalue decodes JSON text into generic Go values, faster than
// encoding/json and with the same results. pipe.Event.Body and the filter
// package share it, so a message body is decoded once, one way.
package jsonvalue

import (
	"encoding/json"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth is encoding/json's nesting limit, kept so that the same bodies
// are valid JSON here and there.
const maxDepth = 10000

// Decode decodes s as encoding/json.Unmarshal would into an `any`
// (map[string]any, []any, string, float64 or, with useNumber, json.Number,
// bool, nil) and reports whether s is valid JSON. It accepts and rejects
// exactly what encoding/json does, but is faster: strings without escapes
// share s's memory instead of being copied. Safe for concurrent use.
func Decode(s string, useNumber bool) (any, bool) {
	d := decoder{s: s, useNumber: useNumber}
	d.keys, d.vals = d.keyBuf[:0], d.valBuf[:0]
	d.skipSpace()
	v, ok := d.value()
	if !ok {
		return nil, false
	}
	d.skipSpace()
	if d.i != len(d.s) {
		return nil, false
	}
	return v, true
}

type decoder struct {
	s         string
	i         int
	depth     int
	useNumber bool
	// scratch stacks reused by nested objects and arrays
	keys   []string
	vals   []any
	keyBuf [32]string
	valBuf [32]any
}

func (d *decoder) skipSpace() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *decoder) value() (any, bool) {
	if d.i >= len(d.s) {
		return nil, false
	}
	switch c := d.s[d.i]; {
	case c == '{':
		return d.object()
	case c == '[':
		return d.array()
	case c == '"':
		s, ok := d.str()
		if !ok {
			return nil, false
		}
		return s, true
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return d.number()
	}
	return nil, false
}

func (d *decoder) literal(lit string) bool {
	if len(d.s)-d.i >= len(lit) && d.s[d.i:d.i+len(lit)] == lit {
		d.i += len(lit)
		return true
	}
	return false
}

func (d *decoder) object() (any, bool) {
	d.depth++
	if d.depth > maxDepth {
		return nil, false
	}
	d.i++ // {
	base := len(d.keys)
	d.skipSpace()
	if d.i < len(d.s) && d.s[d.i] == '}' {
		d.i++
		d.depth--
		return map[string]any{}, true
	}
	for {
		if d.i >= len(d.s) || d.s[d.i] != '"' {
			return nil, false
		}
		k, ok := d.str()
		if !ok {
			return nil, false
		}
		d.skipSpace()
		if d.i >= len(d.s) || d.s[d.i] != ':' {
			return nil, false
		}
		d.i++
		d.skipSpace()
		v, ok := d.value()
		if !ok {
			return nil, false
		}
		d.keys = append(d.keys, k)
		d.vals = append(d.vals, v)
		d.skipSpace()
		if d.i >= len(d.s) {
			return nil, false
		}
		c := d.s[d.i]
		d.i++
		if c == '}' {
			break
		}
		if c != ',' {
			return nil, false
		}
		d.skipSpace()
	}
	m := make(map[string]any, len(d.keys)-base)
	for j := base; j < len(d.keys); j++ {
		m[d.keys[j]] = d.vals[j] // duplicate keys: the last one wins
		d.vals[j] = nil
	}
	d.keys, d.vals = d.keys[:base], d.vals[:base]
	d.depth--
	return m, true
}

func (d *decoder) array() (any, bool) {
	d.depth++
	if d.depth > maxDepth {
		return nil, false
	}
	d.i++ // [
	d.skipSpace()
	if d.i < len(d.s) && d.s[d.i] == ']' {
		d.i++
		d.depth--
		return []any{}, true
	}
	// Array elements use the vals stack too, under a placeholder key
	// count: keys stay aligned with vals.
	base := len(d.vals)
	for {
		v, ok := d.value()
		if !ok {
			return nil, false
		}
		d.keys = append(d.keys, "")
		d.vals = append(d.vals, v)
		d.skipSpace()
		if d.i >= len(d.s) {
			return nil, false
		}
		c := d.s[d.i]
		d.i++
		if c == ']' {
			break
		}
		if c != ',' {
			return nil, false
		}
		d.skipSpace()
	}
	arr := make([]any, len(d.vals)-base)
	copy(arr, d.vals[base:])
	clear(d.vals[base:])
	d.keys, d.vals = d.keys[:base], d.vals[:base]
	d.depth--
	return arr, true
}

// str reads a string at d.i (on its opening quote). Strings without
// escapes or invalid UTF-8 are substrings of the input.
func (d *decoder) str() (string, bool) {
	start := d.i + 1
	ascii := true
	for j := start; j < len(d.s); j++ {
		c := d.s[j]
		switch {
		case c == '"':
			s := d.s[start:j]
			if !ascii && !utf8.ValidString(s) {
				return d.slowStr(start)
			}
			d.i = j + 1
			return s, true
		case c == '\\':
			return d.slowStr(start)
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", false
}

// slowStr unquotes a string with escapes or invalid UTF-8 the way
// encoding/json does: invalid bytes and lone surrogates become U+FFFD.
func (d *decoder) slowStr(start int) (string, bool) {
	b := make([]byte, 0, 32)
	j := start
	for j < len(d.s) {
		c := d.s[j]
		switch {
		case c == '"':
			d.i = j + 1
			return string(b), true
		case c < 0x20:
			return "", false
		case c == '\\':
			if j+1 >= len(d.s) {
				return "", false
			}
			e := d.s[j+1]
			j += 2
			switch e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, ok := hex4(d.s, j)
				if !ok {
					return "", false
				}
				j += 4
				if utf16.IsSurrogate(r) {
					if r2, ok := hex4u(d.s, j); ok {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							b = utf8.AppendRune(b, dec)
							j += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				b = utf8.AppendRune(b, r)
			default:
				return "", false
			}
		case c < utf8.RuneSelf:
			b = append(b, c)
			j++
		default:
			r, size := utf8.DecodeRuneInString(d.s[j:])
			b = utf8.AppendRune(b, r)
			j += size
		}
	}
	return "", false
}

// hex4 reads four hex digits at s[j:].
func hex4(s string, j int) (rune, bool) {
	if len(s)-j < 4 {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[j : j+4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r*16 + rune(c)
	}
	return r, true
}

// hex4u reads a `\uXXXX` escape at s[j:].
func hex4u(s string, j int) (rune, bool) {
	if len(s)-j < 6 || s[j] != '\\' || s[j+1] != 'u' {
		return 0, false
	}
	return hex4(s, j+2)
}

func (d *decoder) number() (any, bool) {
	s, start := d.s, d.i
	j := start
	if s[j] == '-' {
		j++
	}
	switch {
	case j < len(s) && s[j] == '0':
		j++
	case j < len(s) && '1' <= s[j] && s[j] <= '9':
		for j < len(s) && '0' <= s[j] && s[j] <= '9' {
			j++
		}
	default:
		return nil, false
	}
	if j < len(s) && s[j] == '.' {
		j++
		if j >= len(s) || s[j] < '0' || s[j] > '9' {
			return nil, false
		}
		for j < len(s) && '0' <= s[j] && s[j] <= '9' {
			j++
		}
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		j++
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j >= len(s) || s[j] < '0' || s[j] > '9' {
			return nil, false
		}
		for j < len(s) && '0' <= s[j] && s[j] <= '9' {
			j++
		}
	}
	d.i = j
	text := s[start:j]
	if d.useNumber {
		return json.Number(text), true
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return nil, false // out of the float64 range: encoding/json fails too
	}
	return f, true
}
