package ui

import (
	"cmp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Bounds of the failure groups a Recorder keeps.
const (
	// MaxGroups is how many kinds of failure (stage + normalised error) a
	// pipe counts apart; the failures of any further kind are counted in
	// one group per stage, named by otherErrors.
	MaxGroups = 64
	// maxErrorText is how much of an error text is normalised and kept as
	// a group's example.
	maxErrorText = 4096
)

// otherErrors names the group of the failures past MaxGroups kinds.
const otherErrors = "(other errors: more kinds than the page counts apart)"

// Group is the failures of one kind: one stage and one error text once
// its ids and numbers are normalised (NormalizeError).
type Group struct {
	// Stage is where they failed (as Failure.Stage).
	Stage string `json:"stage"`
	// Error is the normalised error text shared by the group.
	Error string `json:"error"`
	// Example is the whole error text of the last of them, secrets taken
	// out.
	Example string `json:"example"`
	// Count is how many failed so since start.
	Count int64 `json:"count"`
	// First and Last are when the first and the last of them failed.
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
	// ExampleID is the message id of the last of them, ExampleSeq its
	// failure number (the failure page, while it is among the kept
	// MaxFailures: ExampleKept).
	ExampleID   string `json:"exampleId"`
	ExampleSeq  int64  `json:"exampleSeq"`
	ExampleKept bool   `json:"exampleKept"`
}

// groupKey tells groups apart.
type groupKey struct{ stage, text string }

// groups counts a pipe's failures by kind; its owner (a Recorder) holds
// the lock.
type groups struct {
	byKey map[groupKey]*Group
}

// add counts one failure whose error text is normalised as norm.
func (g *groups) add(f Failure, norm string) {
	if g.byKey == nil {
		g.byKey = make(map[groupKey]*Group, MaxGroups)
	}
	k := groupKey{f.Stage, norm}
	gr, ok := g.byKey[k]
	if !ok && len(g.byKey) >= MaxGroups {
		k.text = otherErrors
		gr, ok = g.byKey[k]
	}
	if !ok {
		gr = &Group{Stage: f.Stage, Error: k.text, First: f.At}
		g.byKey[k] = gr
	}
	gr.Count++
	if f.At.Before(gr.First) {
		gr.First = f.At
	}
	if !f.At.Before(gr.Last) {
		gr.Last, gr.Example, gr.ExampleID, gr.ExampleSeq = f.At, f.Error, f.MessageID, f.Seq
	}
}

// list returns copies of the groups, the largest first (then the latest).
func (g *groups) list() []Group {
	out := make([]Group, 0, len(g.byKey))
	for _, gr := range g.byKey {
		out = append(out, *gr)
	}
	slices.SortFunc(out, func(a, b Group) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		if c := b.Last.Compare(a.Last); c != 0 {
			return c
		}
		return cmp.Or(strings.Compare(a.Stage, b.Stage), strings.Compare(a.Error, b.Error))
	})
	return out
}

// NormalizeError is the text that failures of one kind share: an error
// text with its ids and numbers replaced, so that "message 7f3c…
// failed after 1532ms" and "message 09ab… failed after 87ms" are one
// kind. Within each word (a run of letters, digits, '_' and '-'):
//   - a hexadecimal id of 8 digits or more (a UUID, a hash) becomes <id>;
//   - a number becomes N, and a number with a unit (250ms, 3s, 12KB)
//     N and the unit;
//   - any other part of 6 characters or more between '-' and '_' that
//     holds a digit (i-0abc123def, a message id) becomes <id>;
//   - short names with a digit (s3, v2, utf8) stay as they are, unless
//     the word has a number part too (m1-0001 becomes mN-N);
//   - an HTTP status (100 to 599 after "HTTP", "HTTP/1.1", "status" or
//     "code") stays, since 503 and 400 are different failures.
//
// It reads at most the first 4096 bytes. It is idempotent: a normalised
// text normalises to itself.
func NormalizeError(s string) string {
	if len(s) > maxErrorText {
		n := maxErrorText
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	var b strings.Builder
	b.Grow(len(s))
	// prev and prev2 are the last two words as written out (N for a
	// number), for the HTTP status rule.
	var prev, prev2, prev3 string
	for i := 0; i < len(s); {
		if wordAt(s, i) == 0 {
			b.WriteByte(s[i])
			i++
			continue
		}
		j := i
		for n := wordAt(s, j); n > 0; n = wordAt(s, j) {
			j += n
		}
		w := normalizeWord(s[i:j], prev, prev2, prev3)
		b.WriteString(w)
		prev3, prev2, prev = prev2, prev, w
		i = j
	}
	return b.String()
}

// idMark is what an id is written out as. It counts as a part of the
// word around it, so that a word whose part became <id> is read as the
// same word again (0A00-A000-<id>, not 0A00-A000- and <id>) and a
// normalised text normalises to itself.
const idMark = "<id>"

// wordAt is how many bytes of s at i belong to a word: one for a word
// byte, four for idMark, none for anything else.
func wordAt(s string, i int) int {
	switch {
	case i >= len(s):
		return 0
	case isWordByte(s[i]):
		return 1
	case strings.HasPrefix(s[i:], idMark):
		return len(idMark)
	}
	return 0
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func hasDigit(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r >= '0' && r <= '9' })
}

// normalizeWord is one word of NormalizeError; prev, prev2 and prev3 are
// the words before it, as written out.
func normalizeWord(w, prev, prev2, prev3 string) string {
	if !hasDigit(w) {
		return w
	}
	if isHexID(w) {
		return idMark
	}
	if isNumber(w) {
		if len(w) == 3 && w[0] >= '1' && w[0] <= '5' && statusContext(prev, prev2, prev3) {
			return w
		}
		return "N"
	}
	parts := strings.FieldsFunc(w, func(r rune) bool { return r == '-' || r == '_' })
	if len(parts) == 1 && parts[0] == w {
		return normalizePart(w)
	}
	// A word with a number part (m1-0001) numbers its short parts too.
	numbered := slices.ContainsFunc(parts, isNumber)
	var b strings.Builder
	start := 0
	for i := 0; i <= len(w); i++ {
		if i < len(w) && w[i] != '-' && w[i] != '_' {
			continue
		}
		part := normalizePart(w[start:i])
		if numbered {
			part = digitsToN(part)
		}
		b.WriteString(part)
		if i < len(w) {
			b.WriteByte(w[i])
		}
		start = i + 1
	}
	return b.String()
}

// normalizePart is one part, between '-' and '_', of a word that holds a
// digit.
func normalizePart(p string) string {
	switch {
	case p == "" || !hasDigit(p):
		return p
	case isNumber(p):
		return "N"
	}
	i := 0
	for i < len(p) && isDigit(p[i]) {
		i++
	}
	if i > 0 && len(p)-i <= 3 && !hasDigit(p[i:]) {
		return "N" + p[i:] // 250ms, 3s, 12KB
	}
	if len(p) >= 6 {
		return idMark
	}
	return p
}

// digitsToN replaces each run of digits of p by N.
func digitsToN(p string) string {
	if !hasDigit(p) {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if !isDigit(p[i]) {
			b.WriteByte(p[i])
			continue
		}
		b.WriteByte('N')
		for i+1 < len(p) && isDigit(p[i+1]) {
			i++
		}
	}
	return b.String()
}

// isNumber reports a word of digits only.
func isNumber(w string) bool {
	for i := 0; i < len(w); i++ {
		if !isDigit(w[i]) {
			return false
		}
	}
	return w != ""
}

// isHexID reports a word of hexadecimal digits and '-' with at least 8
// digits, one of them decimal: a UUID, a hash.
func isHexID(w string) bool {
	n := 0
	for i := 0; i < len(w); i++ {
		c := w[i]
		switch {
		case isDigit(c), c >= 'a' && c <= 'f', c >= 'A' && c <= 'F':
			n++
		case c == '-':
		default:
			return false
		}
	}
	return n >= 8 && !isNumber(w) && hasDigit(w)
}

// statusContext reports whether the words before a three-digit number
// make it an HTTP status: "HTTP 503", "status 503", "code 503",
// "HTTP/1.1 503" (whose 1.1 is written out as N.N).
func statusContext(prev, prev2, prev3 string) bool {
	word := func(w string) bool {
		switch strings.ToLower(w) {
		case "http", "status", "code", "statuscode", "status_code":
			return true
		}
		return false
	}
	num := func(w string) bool { return w == "N" || isNumber(w) }
	return word(prev) || num(prev) && num(prev2) && word(prev3)
}
