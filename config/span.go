package config

import (
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Span is where a text value is written in its file, so that a problem
// found later at a byte offset of the value (a jq program's, an expr
// expression's or an input template's syntax error) is reported at the
// file's own line and column, inside a block scalar (| or >) or a quoted
// string too. Like Pos, it says where a value is written, not what it is.
type Span struct {
	// Start is where the value is written: its first character, its
	// opening quote, or a block scalar's indicator (| or >).
	Start Pos
	// Runs are the pieces of the value written one after the other on one
	// line of the file, in the value's order. They are nil when the value
	// cannot be followed in the file (one made with ${VAR}); Start then
	// stands for all of it.
	Runs []Run
}

// Run is a piece of a value written on one line of its file: the value's
// bytes from Offset on are at Line and Column (1-based; the bytes of a
// run are each one character).
type Run struct {
	Offset, Line, Column int
}

// At is the file position of the value's byte at offset: inside the run
// that holds it, or Start when the value cannot be followed.
func (s Span) At(offset int) Pos {
	p := s.Start
	for _, r := range s.Runs {
		if r.Offset > offset {
			break
		}
		p.Line, p.Column = r.Line, r.Column+offset-r.Offset
	}
	return p
}

// span follows the value of scalar node n, text as the YAML parser read
// it (before ${VAR}s), through the file's lines: each character of the
// value that is not white space is the next one of the file, from where
// the value starts, that is not white space (block scalars, folding and
// indentation only change white space), less a quoted string's escapes.
// It stops where it loses the thread; the runs so far are kept.
func (d *decoder) span(n *yaml.Node, text string) Span {
	s := Span{Start: d.pos(n)}
	line, col := n.Line-1, n.Column-1 // 0-based; col counts characters
	switch {
	case n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0:
		line, col = line+1, 0
	case n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0:
		col++
	}
	if line < 0 || line >= len(d.lines) {
		return s
	}
	// cur is the byte index in d.lines[line] of character col.
	cur := byteIndex(d.lines[line], col)
	next := func() (rune, bool) { // the next character, not consuming it
		for line < len(d.lines) {
			if cur < len(d.lines[line]) {
				r, _ := utf8.DecodeRune(d.lines[line][cur:])
				return r, true
			}
			line, col, cur = line+1, 0, 0
		}
		return 0, false
	}
	advance := func() {
		_, size := utf8.DecodeRune(d.lines[line][cur:])
		cur += size
		col++
	}
	double := n.Style&yaml.DoubleQuotedStyle != 0
	single := n.Style&yaml.SingleQuotedStyle != 0
	lastOff, lastLine, lastCol := -1, -1, -1
	for off, want := range text {
		if unicode.IsSpace(want) {
			continue
		}
		// Find want: the next character that is not white space (or an
		// escape standing for white space).
		width := 1 // characters of the file that stand for want
		for {
			r, ok := next()
			if !ok || line >= len(d.lines) {
				return s
			}
			if unicode.IsSpace(r) {
				advance()
				continue
			}
			if double && r == '\\' {
				esc, n := escape(d.lines[line][cur:])
				if n == 0 || unicode.IsSpace(esc) {
					for range max(n, 1) {
						advance() // a line continuation, \n, \t, ...
					}
					continue
				}
				if esc != want {
					return s
				}
				width = n
				break
			}
			if r != want {
				return s
			}
			break
		}
		if lastLine != line || col-lastCol != off-lastOff {
			s.Runs = append(s.Runs, Run{Offset: off, Line: line + 1, Column: col + 1})
		}
		lastOff, lastLine, lastCol = off, line, col
		for range width {
			advance()
		}
		if single && want == '\'' {
			if r, ok := next(); ok && r == '\'' {
				advance() // '' stands for '
			}
		}
	}
	return s
}

// escape reads the escape sequence of a double-quoted YAML string at the
// start of b (a backslash): the character it stands for and its length in
// characters; 0 characters for a backslash that ends its line (the string
// goes on on the next one).
func escape(b []byte) (rune, int) {
	if len(b) < 2 {
		return 0, 0
	}
	simple := map[byte]rune{'0': 0, 'a': '\a', 'b': '\b', 't': '\t', '\t': '\t', 'n': '\n', 'v': '\v', 'f': '\f',
		'r': '\r', 'e': 0x1b, ' ': ' ', '"': '"', '/': '/', '\\': '\\', 'N': 0x85, '_': 0xa0, 'L': 0x2028, 'P': 0x2029}
	if r, ok := simple[b[1]]; ok {
		return r, 2
	}
	digits := map[byte]int{'x': 2, 'u': 4, 'U': 8}[b[1]]
	if digits == 0 || len(b) < 2+digits {
		return utf8.RuneError, 2
	}
	var r rune
	for _, c := range b[2 : 2+digits] {
		v, ok := hexValue(c)
		if !ok {
			return utf8.RuneError, 2
		}
		r = r<<4 | v
	}
	return r, 2 + digits
}

func hexValue(c byte) (rune, bool) {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0'), true
	case 'a' <= c && c <= 'f':
		return rune(c-'a') + 10, true
	case 'A' <= c && c <= 'F':
		return rune(c-'A') + 10, true
	}
	return 0, false
}

// byteIndex is the byte index of character col of line (its length past
// the end).
func byteIndex(line []byte, col int) int {
	i := 0
	for ; col > 0 && i < len(line); col-- {
		_, size := utf8.DecodeRune(line[i:])
		i += size
	}
	return i
}
