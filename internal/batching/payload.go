package batching

import (
	"encoding/json"
	"fmt"

	"github.com/pipesproject/pipes/pipe"
)

// JSONArray is the JSON array of the events' payloads, as a batch is sent
// to a Lambda function or an HTTP endpoint: a payload that is valid JSON
// goes as it is, any other as a JSON string. A payload known to be JSON
// (pipe.Event.PayloadIsJSON: a record, a JSON template's output) is not
// checked again.
func JSONArray(events []*pipe.Event) []byte {
	size := 2 + len(events)
	for _, ev := range events {
		size += len(ev.Payload)
	}
	b := make([]byte, 0, size)
	b = append(b, '[')
	for i, ev := range events {
		if i > 0 {
			b = append(b, ',')
		}
		if ev.PayloadIsJSON() {
			b = append(b, ev.Payload...)
			continue
		}
		b = AppendPayload(b, ev.Payload)
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
