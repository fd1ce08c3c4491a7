package config

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Warnings on pipes that behave as AWS's do but probably not as their
// author meant (issue 14): fields a Pipes filter never sees, and input
// templates whose objects AWS writes without their inner quotes.

// hiddenFromFilters are the record fields EventBridge Pipes does not let a
// filter see.
var hiddenFromFilters = []string{"awsRegion", "eventSource", "eventSourceARN"}

// lintPatterns warns on patterns that match on a field Pipes hides from
// filters.
func (d *decoder) lintPatterns(texts []string, poss []Pos, field string) {
	for i, text := range texts {
		var top map[string]json.RawMessage
		if json.Unmarshal([]byte(text), &top) != nil {
			continue
		}
		for _, k := range hiddenFromFilters {
			if _, ok := top[k]; ok {
				d.warnf(poss[i], field+"["+strconv.Itoa(i)+"]."+k,
					"EventBridge Pipes never lets a filter see %s, and neither does pipes: the condition is matched against a field that is not there (AWS ignores the field), so it does not select what it says; drop it (every record of a pipe comes from its one source)", k)
			}
		}
	}
}

// objectPath reports whether a placeholder's path is one that stands for a
// JSON object or array: the record, its body or data, or a wildcard.
func objectPath(body string) bool {
	switch body {
	case "$", "$.body", "$.data":
		return true
	}
	return strings.HasPrefix(body, "$") && strings.Contains(body, "*")
}

// lintTemplate warns on an input template that AWS renders without the
// inner quotes of an object or array: such a placeholder inside a JSON
// string or free text (a template that is just `<$.body>` is pipes' way
// to forward a body and gets no warning, although AWS de-quotes it too). pipes renders them as JSON (its documented behaviour, which files
// rely on), so the same file would behave differently in AWS; the warning
// gives the form that yields the same JSON in both.
func (d *decoder) lintTemplate(pos Pos, field, src string) {
	trimmed := strings.TrimSpace(src)
	looksJSON := strings.HasPrefix(trimmed, "{") || strings.HasPrefix(trimmed, "[")
	inStr, esc := false, false
	for i := 0; i < len(src); i++ {
		c := src[i]
		if c != '<' || !(strings.HasPrefix(src[i+1:], "$") || strings.HasPrefix(src[i+1:], "aws.")) {
			switch {
			case esc:
				esc = false
			case inStr && c == '\\':
				esc = true
			case c == '"':
				inStr = !inStr
			}
			continue
		}
		end := strings.IndexByte(src[i:], '>')
		if end < 0 {
			return // the template's own check reports it
		}
		ph, body := src[i:i+end+1], src[i+1:i+end]
		i += end
		if !objectPath(body) {
			continue
		}
		switch {
		case trimmed == ph:
			// A template that is one placeholder forwards the value as
			// JSON here (pipes' way to forward a body); AWS de-quotes it,
			// so nobody relies on that there. No warning.
		case looksJSON && inStr:
			d.warnf(pos, field, "\"%s\" is inside a JSON string: an object or array there is escaped JSON text here, but AWS renders it without its inner quotes ({key: value}); for the same JSON in both leave the quotes out: {\"data\": %s}", ph, ph)
		case !looksJSON:
			d.warnf(pos, field, "%s in free text: an object or array is JSON text here, but AWS renders it without its inner quotes ({key: value}); for the same JSON in both write {\"data\": %s}", ph, ph)
		}
	}
}
