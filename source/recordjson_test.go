package source

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"testing"
)

// encodingJSON is the record as encoding/json writes it: the reference the
// hand-written encoder must match byte for byte.
func encodingJSON(m *Message) ([]byte, error) {
	attrs := m.Attributes
	if attrs == nil {
		attrs = map[string]string{}
	}
	mattrs := m.MessageAttributes
	if mattrs == nil {
		mattrs = map[string]MessageAttribute{}
	}
	return json.Marshal(messageJSON{
		MessageID: m.MessageID, ReceiptHandle: m.ReceiptHandle, Body: m.Body,
		Attributes: attrs, MessageAttributes: mattrs, MD5OfBody: m.MD5OfBody,
		MD5OfMessageAttributes: m.MD5OfMessageAttributes, EventSource: m.EventSource,
		EventSourceARN: m.EventSourceARN, AWSRegion: m.AWSRegion, Envelope: m.Envelope,
	})
}

// sameAsEncodingJSON fails t unless m's JSON is encoding/json's, or both fail.
func sameAsEncodingJSON(t *testing.T, m *Message) {
	t.Helper()
	want, wantErr := encodingJSON(m)
	got, err := m.sqsJSON()
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("error %v, encoding/json's %v", err, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoded\n%q\nencoding/json\n%q", got, want)
	}
	if err == nil && cap(got) != len(got) {
		t.Errorf("buffer sized %d for %d bytes", cap(got), len(got))
	}
	if !m.Streamed() {
		return
	}
	// The record written as it is sent (PayloadAppender) is the same bytes.
	if n := m.StreamedLen(); n != len(want) {
		t.Errorf("StreamedLen %d, encoding/json wrote %d bytes", n, len(want))
	}
	if b := m.AppendRecord([]byte("prefix,")); !bytes.Equal(b, append([]byte("prefix,"), want...)) {
		t.Errorf("AppendRecord appended\n%q\nencoding/json\n%q", b[len("prefix,"):], want)
	}
	if n, err := m.RecordLen(); err != nil || n != len(want) {
		t.Errorf("recordLen %d, %v; encoding/json wrote %d bytes", n, err, len(want))
	}
}

func TestTheRecordEncodesAsEncodingJSONWouldEncodeIt(t *testing.T) {
	s, empty := "acme <&> \u2028", ""
	full := benchMessage()
	tests := []struct {
		name string
		m    *Message
	}{
		{"an empty message has empty maps and no optional fields", &Message{}},
		{"a typical record keeps its field order and sorts its maps", &full},
		{"HTML characters, control bytes and line separators are escaped", &Message{
			Body: "<a href=\"x\">&amp;</a>\x00\x01\x1f\x7f\b\f\n\r\t\\ \u2028\u2029 é 日本 😀", MessageID: "<>&"}},
		{"invalid UTF-8 becomes U+FFFD", &Message{Body: "a\xffb\xc3(c\xe2\x80", ReceiptHandle: "\xed\xa0\x80"}},
		{"attribute keys and values are escaped and sorted bytewise", &Message{
			Attributes: map[string]string{"b": "1", "B": "2", "<k>": "\"v\"", "é": "x", "a\xff": "y"}}},
		{"message attributes of every kind", &Message{MessageAttributes: map[string]MessageAttribute{
			"s":       {StringValue: &s, DataType: "String"},
			"empty":   {StringValue: &empty, DataType: "String.custom"},
			"bin":     {BinaryValue: []byte{0, 1, 2, 250, 251, 252, 253}, DataType: "Binary"},
			"nobin":   {BinaryValue: []byte{}, DataType: "Binary"},
			"lists":   {StringListValues: []string{"a", "<b>", ""}, BinaryListValues: [][]byte{{1}, {}, nil}, DataType: "String"},
			"nolists": {StringListValues: []string{}, BinaryListValues: [][]byte{}},
		}}},
		{"md5 of attributes appears when set", &Message{MD5OfMessageAttributes: "abc"}},
		{"a compact envelope goes as it is", &Message{Envelope: json.RawMessage(`{"Type":"Notification","Message":"x"}`)}},
		{"an envelope with whitespace and HTML characters is compacted and escaped", &Message{
			Envelope: json.RawMessage(" {\"a\" : [1, 2],\n\t\"b\":\"<x> & \u2028 y\"} ")}},
		{"an invalid envelope is an error", &Message{Envelope: json.RawMessage(`{"a":`)}},
		{"many attributes sort past the stack buffer", &Message{Attributes: map[string]string{
			"q": "", "w": "", "e": "", "r": "", "t": "", "y": "", "u": "", "i": "", "o": "", "p": "",
			"a": "", "s": "", "d": "", "f": "", "g": "", "h": "", "j": "", "k": "", "l": "", "z": ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { sameAsEncodingJSON(t, tt.m) })
	}
}

func TestTheRecordEncodingAllocatesAtMostFourTimes(t *testing.T) {
	src := benchMessage()
	allocs := testing.AllocsPerRun(100, func() {
		m := Message{
			MessageID: src.MessageID, ReceiptHandle: src.ReceiptHandle, Body: src.Body,
			Attributes: src.Attributes, MessageAttributes: src.MessageAttributes, MD5OfBody: src.MD5OfBody,
			EventSource: src.EventSource, EventSourceARN: src.EventSourceARN, AWSRegion: src.AWSRegion,
		}
		if _, err := m.sqsJSON(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 4 {
		t.Errorf("%v allocations a record, want at most 4", allocs)
	}
}

func FuzzRecordEncodingMatchesEncodingJSON(f *testing.F) {
	f.Add("id", "handle", `{"a":"<b>"}`, "ApproximateReceiveCount", "1", "tenant", "acme", []byte{1, 2}, uint8(0), "", []byte(nil))
	f.Add("\xff", "\u2028", "\x00\n\t", "é", "\xc3", "k\"", "\\", []byte{}, uint8(7), "md5", []byte(` {"x" : "&"} `))
	f.Add("", "", "", "", "", "", "", []byte(nil), uint8(255), "", []byte(`[1,`))
	f.Fuzz(func(t *testing.T, id, handle, body, attrKey, attrValue, maKey, maValue string, bin []byte, shape uint8, md5 string, env []byte) {
		m := Message{
			MessageID: id, ReceiptHandle: handle, Body: body, MD5OfBody: md5, MD5OfMessageAttributes: md5,
			EventSource: "aws:sqs", EventSourceARN: attrValue, AWSRegion: maValue, Envelope: env,
		}
		if shape&1 != 0 {
			m.Attributes = map[string]string{attrKey: attrValue, AttrReceiveCount: body, attrValue: attrKey}
		}
		if shape&2 != 0 {
			a := MessageAttribute{DataType: maValue}
			if shape&4 != 0 {
				a.StringValue = &maValue
			}
			if shape&8 != 0 {
				a.BinaryValue = bin
			}
			if shape&16 != 0 {
				a.StringListValues = []string{maValue, attrKey}
			}
			if shape&32 != 0 {
				a.BinaryListValues = [][]byte{bin, nil, []byte(id)}
			}
			m.MessageAttributes = map[string]MessageAttribute{maKey: a, attrKey: {StringValue: &body, DataType: "String"}}
		}
		sameAsEncodingJSON(t, &m)
	})
}

func TestAWordHasNoSpecialsOnlyWhenNoByteNeedsEscaping(t *testing.T) {
	for _, fill := range []byte{'a', ' ', '~', 0x7f, '!', '='} {
		for pos := range 8 {
			for c := range 256 {
				w := bytes.Repeat([]byte{fill}, 8)
				w[pos] = byte(c)
				want := asciiLen[c] == 1
				if got := specials(binary.LittleEndian.Uint64(w)) == 0; got != want {
					t.Fatalf("specials(%q) == 0 is %v, want %v", w, got, want)
				}
			}
		}
	}
}
