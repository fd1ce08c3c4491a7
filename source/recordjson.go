package source

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"slices"
	"unicode/utf8"
)

// This file writes a message's SQS record by hand, byte for byte as
// encoding/json writes messageJSON (FuzzRecordEncodingMatchesEncodingJSON
// holds the two together): fields in struct order, omitempty fields left
// out when empty, map keys sorted, strings escaped as encoding/json escapes
// them (<, > and & as \u003c, \u003e, \u0026; U+2028 and U+2029; invalid
// UTF-8 as \ufffd), []byte as base64. It sizes the output first and writes
// it into one buffer of that size.

// sqsFixedLen is the length of the record's punctuation and field names
// that are always there.
const sqsFixedLen = len(`{"messageId":,"receiptHandle":,"body":,"attributes":{},"messageAttributes":{},"md5OfBody":,"eventSource":,"eventSourceARN":,"awsRegion":}`)

// maxSortedOnStack is how many map keys are sorted without allocating.
const maxSortedOnStack = 16

// sqsJSON returns the message's record in the SQS shape.
func (m *Message) sqsJSON() ([]byte, error) {
	env, err := envelopeJSON(m.Envelope)
	if err != nil {
		return nil, err
	}
	return m.appendSQS(nil, env), nil
}

// sqsLen is the length of the record in the SQS shape whose envelope's
// JSON is env.
func (m *Message) sqsLen(env []byte) int {
	var abuf, mbuf [maxSortedOnStack]string
	return m.sqsLenKeys(env, sortedKeys(abuf[:0], m.Attributes), sortedKeys(mbuf[:0], m.MessageAttributes))
}

func (m *Message) sqsLenKeys(env []byte, akeys, mkeys []string) int {
	n := sqsFixedLen + quotedLen(m.MessageID) + quotedLen(m.ReceiptHandle) + quotedLen(m.Body) +
		quotedLen(m.MD5OfBody) + quotedLen(m.EventSource) + quotedLen(m.EventSourceARN) + quotedLen(m.AWSRegion)
	for i, k := range akeys {
		n += quotedLen(k) + 1 + quotedLen(m.Attributes[k]) // "k":"v"
		if i > 0 {
			n++ // ','
		}
	}
	for i, k := range mkeys {
		n += quotedLen(k) + 1 + attributeLen(m.MessageAttributes[k])
		if i > 0 {
			n++
		}
	}
	if m.MD5OfMessageAttributes != "" {
		n += len(`,"md5OfMessageAttributes":`) + quotedLen(m.MD5OfMessageAttributes)
	}
	if env != nil {
		n += len(`,"envelope":`) + len(env)
	}
	return n
}

// appendSQS appends the record in the SQS shape, whose envelope's JSON is
// env (envelopeJSON), to b, growing b once to the record's length.
func (m *Message) appendSQS(b, env []byte) []byte {
	var abuf, mbuf [maxSortedOnStack]string
	akeys := sortedKeys(abuf[:0], m.Attributes)
	mkeys := sortedKeys(mbuf[:0], m.MessageAttributes)
	n := m.recLen // known when the settler sized the record (env is nil then)
	if n == 0 || env != nil {
		n = m.sqsLenKeys(env, akeys, mkeys)
	}
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), len(b)+n) // exactly: slices.Grow rounds up
		copy(nb, b)
		b = nb
	}
	b = append(b, `{"messageId":`...)
	b = appendQuoted(b, m.MessageID)
	b = append(b, `,"receiptHandle":`...)
	b = appendQuoted(b, m.ReceiptHandle)
	b = append(b, `,"body":`...)
	b = appendQuoted(b, m.Body)
	b = append(b, `,"attributes":{`...)
	for i, k := range akeys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendQuoted(b, k)
		b = append(b, ':')
		b = appendQuoted(b, m.Attributes[k])
	}
	b = append(b, `},"messageAttributes":{`...)
	for i, k := range mkeys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendQuoted(b, k)
		b = append(b, ':')
		b = appendAttribute(b, m.MessageAttributes[k])
	}
	b = append(b, `},"md5OfBody":`...)
	b = appendQuoted(b, m.MD5OfBody)
	if m.MD5OfMessageAttributes != "" {
		b = append(b, `,"md5OfMessageAttributes":`...)
		b = appendQuoted(b, m.MD5OfMessageAttributes)
	}
	b = append(b, `,"eventSource":`...)
	b = appendQuoted(b, m.EventSource)
	b = append(b, `,"eventSourceARN":`...)
	b = appendQuoted(b, m.EventSourceARN)
	b = append(b, `,"awsRegion":`...)
	b = appendQuoted(b, m.AWSRegion)
	if env != nil {
		b = append(b, `,"envelope":`...)
		b = append(b, env...)
	}
	return append(b, '}')
}

// envelopeJSON returns the envelope as encoding/json writes a
// json.RawMessage: compacted, HTML-escaped, an error when it is not valid
// JSON; nil when there is none (omitempty). An envelope that is already
// compact and has nothing to escape is returned as it is.
func envelopeJSON(env json.RawMessage) ([]byte, error) {
	if len(env) == 0 {
		return nil, nil
	}
	if json.Valid(env) && !needsCompacting(env) {
		return env, nil
	}
	return json.Marshal(env)
}

// needsCompacting reports whether encoding/json would change valid JSON
// b: it has whitespace to drop (or keep, inside strings: either way the
// slow path decides) or characters it escapes for HTML.
func needsCompacting(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r', '<', '>', '&', 0xE2: // 0xE2 starts U+2028 and U+2029
			return true
		}
	}
	return false
}

// sortedKeys appends m's keys to dst, sorted as encoding/json sorts them.
func sortedKeys[V any](dst []string, m map[string]V) []string {
	for k := range m {
		dst = append(dst, k)
	}
	slices.Sort(dst)
	return dst
}

// attributeLen is the length of appendAttribute's output.
func attributeLen(a MessageAttribute) int {
	n := len(`{"stringListValues":[],"binaryListValues":[],"dataType":}`) + quotedLen(a.DataType)
	if a.StringValue != nil {
		n += len(`"stringValue":,`) + quotedLen(*a.StringValue)
	}
	if len(a.BinaryValue) > 0 {
		n += len(`"binaryValue":,`) + 2 + base64.StdEncoding.EncodedLen(len(a.BinaryValue))
	}
	for i, s := range a.StringListValues {
		if i > 0 {
			n++
		}
		n += quotedLen(s)
	}
	for i, v := range a.BinaryListValues {
		if i > 0 {
			n++
		}
		n += bytesLen(v)
	}
	return n
}

// appendAttribute appends a message attribute as MessageAttribute's
// MarshalJSON writes it: absent lists as [].
func appendAttribute(b []byte, a MessageAttribute) []byte {
	b = append(b, '{')
	if a.StringValue != nil {
		b = append(b, `"stringValue":`...)
		b = appendQuoted(b, *a.StringValue)
		b = append(b, ',')
	}
	if len(a.BinaryValue) > 0 {
		b = append(b, `"binaryValue":`...)
		b = appendBytes(b, a.BinaryValue)
		b = append(b, ',')
	}
	b = append(b, `"stringListValues":[`...)
	for i, s := range a.StringListValues {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendQuoted(b, s)
	}
	b = append(b, `],"binaryListValues":[`...)
	for i, v := range a.BinaryListValues {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendBytes(b, v)
	}
	b = append(b, `],"dataType":`...)
	b = appendQuoted(b, a.DataType)
	return append(b, '}')
}

// bytesLen is the length of appendBytes's output.
func bytesLen(v []byte) int {
	if v == nil {
		return len("null")
	}
	return 2 + base64.StdEncoding.EncodedLen(len(v))
}

// appendBytes appends v as encoding/json writes a []byte: a base64
// string, null when nil.
func appendBytes(b, v []byte) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, v)
	return append(b, '"')
}

// asciiLen is how many bytes an ASCII byte takes inside a JSON string as
// encoding/json writes it with HTML escaping; 0 marks the bytes that start
// a multi-byte sequence.
var asciiLen = func() (t [256]uint8) {
	for c := 0; c < utf8.RuneSelf; c++ {
		switch {
		case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
			t[c] = 2
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			t[c] = 6
		default:
			t[c] = 1
		}
	}
	return t
}()

// specials marks, in the high bit of each of its bytes, the bytes of w
// (eight of a string, little-endian) that need escaping or decoding: a
// control byte, '"', '\\', '<', '>', '&' or a non-ASCII byte. It may mark
// plain bytes above a marked one, never a plain byte below the lowest one:
// zero means all eight are plain, and the lowest mark is the first special.
func specials(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	// Subtracting borrows into a byte's high bit where the byte is below
	// what is subtracted; on ASCII bytes that only happens there (and
	// above, through the borrow).
	lo := w - 0x20*ones                         // below 0x20
	quote := (w | 0x04*ones) ^ 0x26*ones - ones // '"' (0x22) and '&' (0x26)
	angle := (w | 0x02*ones) ^ 0x3e*ones - ones // '<' (0x3c) and '>' (0x3e)
	slash := w ^ '\\'*ones - ones
	return ((lo|quote|angle|slash)&^w | w) & highs
}

// load is the eight bytes of s from i, little-endian.
func load(s string, i int) uint64 { return binary.LittleEndian.Uint64([]byte(s[i : i+8])) }

// zeros marks, in the high bit of each of its bytes, exactly the zero
// bytes of x.
func zeros(x uint64) uint64 {
	const low7 = 0x7f7f7f7f7f7f7f7f
	return ^((x&low7 + low7) | x | low7)
}

// quotesOnly marks the '"' and '\\' of w when, of the bytes that need
// escaping, w has only those (and at least one): eight ASCII bytes,
// none a control byte, '<', '>' or '&'. Else it is 0.
func quotesOnly(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	if w&highs != 0 || (^(w+0x60*ones)&highs|zeros(w^'<'*ones)|zeros(w^'>'*ones)|zeros(w^'&'*ones)) != 0 {
		return 0
	}
	return zeros(w^'"'*ones) | zeros(w^'\\'*ones)
}

// quotedLen is the length of appendQuoted's output. A word of eight
// ASCII bytes whose only specials are '"' and '\\' (most of a JSON body)
// is counted without looking at its bytes one by one.
func quotedLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		if i+8 <= len(s) {
			w := load(s, i)
			m := specials(w)
			if m == 0 {
				n += 8
				i += 8
				continue
			}
			if q := quotesOnly(w); q != 0 {
				n += 8 + bits.OnesCount64(q)
				i += 8
				continue
			}
			k := bits.TrailingZeros64(m) / 8
			n += k
			i += k
		}
		if l := asciiLen[s[i]]; l != 0 {
			n += int(l)
			i++
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1, c == '\u2028', c == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

const hexDigits = "0123456789abcdef"

// shortEscape is the letter of the two-byte escapes (\", \\, \b, \f, \n,
// \r, \t).
var shortEscape = [256]byte{'"': '"', '\\': '\\', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't'}

// appendQuoted appends s as a JSON string, escaped as encoding/json
// escapes it with HTML escaping on. It goes eight bytes at a time up to
// the next byte that needs escaping.
func appendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		if i+8 <= len(s) {
			w := load(s, i)
			m := specials(w)
			if m == 0 {
				b = binary.LittleEndian.AppendUint64(b, w)
				i += 8
				continue
			}
			k := bits.TrailingZeros64(m) / 8
			if n := len(b); cap(b)-n >= 8 {
				b = binary.LittleEndian.AppendUint64(b, w)[:n+k]
			} else {
				b = append(b, s[i:i+k]...)
			}
			i += k
		}
		c := s[i]
		switch asciiLen[c] {
		case 1:
			b = append(b, c)
			i++
			continue
		case 2:
			b = append(b, '\\', shortEscape[c])
			i++
			continue
		case 6:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
