package batching

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/pipesproject/pipes/pipe"
)

// JSONArray is the JSON array of the events' payloads, as a batch is sent
// to a Lambda function or an HTTP endpoint: a payload that is valid JSON
// goes as it is, any other as a JSON string. A payload known to be JSON
// (pipe.Event.PayloadIsJSON: a record, a JSON template's output) is not
// checked again; a record not encoded yet is encoded into the array.
func JSONArray(events []*pipe.Event) []byte {
	size := 2 + len(events)
	for _, ev := range events {
		size += ev.PayloadLen()
	}
	b := make([]byte, 0, size)
	b = append(b, '[')
	for i, ev := range events {
		if i > 0 {
			b = append(b, ',')
		}
		if ev.PayloadIsJSON() {
			b = ev.AppendPayload(b)
			continue
		}
		b = AppendPayload(b, ev.RecordJSON)
	}
	return append(b, ']')
}

// AppendPayload appends p to b as a JSON value: as is when p is valid
// JSON, else as a JSON string.
func AppendPayload(b, p []byte) []byte {
	if json.Valid(p) {
		return append(b, p...)
	}
	s, err := json.Marshal(string(p))
	if err != nil { // a string always encodes
		panic(fmt.Sprintf("encoding a payload as a JSON string: %v", err))
	}
	return append(b, s...)
}

// Array is JSONArray's bytes written as they are read: each payload is
// encoded (a record not encoded yet, see pipe.PayloadAppender) or copied
// when the reader reaches it, into one buffer reused from payload to
// payload, so that a batch's request holds no copy of its messages.
// Payloads that are not known JSON are checked (and quoted when they are
// not JSON) once, by NewArray. An Array is read once; it is not safe for
// concurrent use.
type Array struct {
	events []*pipe.Event
	quoted map[int][]byte // the JSON of payloads not known to be JSON
	n      int64
	next   int    // the next event to write
	buf    []byte // what is being read: a separator and a payload
	off    int
}

// NewArray sizes the array of events' payloads; it encodes nothing of the
// records.
func NewArray(events []*pipe.Event) *Array {
	a := &Array{events: events, n: int64(2 + max(len(events)-1, 0))}
	for i, ev := range events {
		if ev.PayloadIsJSON() {
			a.n += int64(ev.PayloadLen())
			continue
		}
		q := AppendPayload(nil, ev.RecordJSON)
		if a.quoted == nil {
			a.quoted = map[int][]byte{}
		}
		a.quoted[i] = q
		a.n += int64(len(q))
	}
	return a
}

// Again returns a new Array of the same events, to be read from the start
// (the quoted payloads are shared, not checked again). It is safe to call
// while a is read.
func (a *Array) Again() *Array { return &Array{events: a.events, quoted: a.quoted, n: a.n} }

// Len is the array's length in bytes.
func (a *Array) Len() int64 { return a.n }

// Read reads the next bytes of the array.
func (a *Array) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if a.off < len(a.buf) {
			c := copy(p[n:], a.buf[a.off:])
			a.off += c
			n += c
			continue
		}
		if a.next > len(a.events) {
			a.buf = nil // all read: the request that holds a no longer holds the buffer
			break
		}
		a.fill()
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

// fill puts the next piece of the array in buf: '[' or ',' and a payload,
// or the closing ']'.
func (a *Array) fill() {
	b, i := a.buf[:0], a.next
	a.next++
	a.off = 0
	if i == len(a.events) {
		if i == 0 {
			b = append(b, '[')
		}
		a.buf = append(b, ']')
		return
	}
	if i == 0 {
		b = append(b, '[')
	} else {
		b = append(b, ',')
	}
	if q, ok := a.quoted[i]; ok {
		b = append(b, q...)
	} else {
		b = a.events[i].AppendPayload(b)
	}
	a.buf = b
}
