package pipe

import "github.com/pipesproject/pipes/source"

// PayloadAppender is an optional ability of a Target: it reads events'
// payloads only through Event.AppendPayload, Event.PayloadLen and
// Event.PayloadBytes, never through the RecordJSON field. A pipe without an
// enrichment and an input template then hands it events whose payload is
// the record not encoded yet (RecordJSON nil): each record is written once,
// as the target sends it, so that no encoded copy of a message is kept
// beside its body while it is in flight. The pipe finds the ability by
// type assertion on its Target (a wrapper that does not forward it gets
// ordinary events).
type PayloadAppender interface {
	Target
	// AppendsPayloads marks the ability; it does nothing.
	AppendsPayloads()
}

// AppendPayload appends the event's payload to b and returns the extended
// slice: RecordJSON, or the record when the payload is the record not encoded
// yet. It does not block; it is safe for concurrent use when no stage
// changes the event.
func (e *Event) AppendPayload(b []byte) []byte {
	if e.lazy && e.RecordJSON == nil {
		return e.Message.AppendRecord(b)
	}
	return append(b, e.RecordJSON...)
}

// PayloadLen is the length of what AppendPayload appends, computed
// without encoding a record. It does not block.
func (e *Event) PayloadLen() int {
	if e.lazy && e.RecordJSON == nil {
		return e.Message.StreamedLen()
	}
	return len(e.RecordJSON)
}

// PayloadBytes returns the payload: RecordJSON, or the record encoded now
// (into a new slice, not kept) when the payload is the record not encoded
// yet. Callers must not modify it. It does not block.
func (e *Event) PayloadBytes() []byte {
	if e.lazy && e.RecordJSON == nil {
		return e.Message.AppendRecord(nil)
	}
	return e.RecordJSON
}

// newEvent makes the event of a message for this pipe: with the record not
// encoded yet when the target reads payloads itself (PayloadAppender) and
// no stage before it reads the payload, else as NewEvent does.
func (p *Pipe) newEvent(m *source.Message) (*Event, error) {
	if p.lazyPayloads && m.Streamed() {
		return &Event{Message: m, lazy: true}, nil
	}
	return NewEvent(m)
}
