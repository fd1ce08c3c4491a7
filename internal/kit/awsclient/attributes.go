package awsclient

import (
	"sort"
	"strings"

	"github.com/pipesproject/pipes/source"
)

// MessageAttributes converts an event's attributes to a service's message
// attribute values with conv, keeping the first limit by name, and returns
// the bytes they weigh (names, data types and values). No attributes give
// a nil map.
func MessageAttributes[V any](attrs map[string]source.MessageAttribute, limit int, conv func(source.MessageAttribute) V) (map[string]V, int) {
	if len(attrs) == 0 {
		return nil, 0
	}
	names := make([]string, 0, len(attrs))
	for name := range attrs {
		names = append(names, name)
	}
	sort.Strings(names)
	names = names[:min(len(names), limit)]
	out := make(map[string]V, len(names))
	size := 0
	for _, name := range names {
		a := attrs[name]
		out[name] = conv(a)
		size += len(name) + len(a.DataType) + len(a.BinaryValue)
		if a.StringValue != nil {
			size += len(*a.StringValue)
		}
	}
	return out, size
}

// RegionFromARN returns the region of an ARN
// (arn:partition:service:region:account:resource), "" for anything else.
func RegionFromARN(s string) string {
	if !strings.HasPrefix(s, "arn:") {
		return ""
	}
	parts := strings.SplitN(s, ":", 6)
	if len(parts) < 6 {
		return ""
	}
	return parts[3]
}
