package filter

import "github.com/pipesproject/pipes/internal/jsonvalue"

// DecodeBody decodes a message body the way pipe.Event.Body does (SPEC.md
// B §4.4): the value encoding/json.Unmarshal would give into an `any`
// (map[string]any, []any, string, float64, bool, nil) and true when body is
// valid JSON, the body itself and false otherwise. It accepts and rejects
// exactly what encoding/json does, but is faster. Safe for concurrent use.
func DecodeBody(body string) (any, bool) {
	v, ok := jsonvalue.Decode(body, false)
	if !ok {
		return body, false
	}
	return v, true
}

// decodeJSON decodes s; with useNumber numbers are json.Number.
func decodeJSON(s string, useNumber bool) (any, bool) { return jsonvalue.Decode(s, useNumber) }
