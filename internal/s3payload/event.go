package s3payload

import (
	"encoding/json"
	"strings"
)

// EventKind says what an S3 event notification body is.
type EventKind int

// The kinds of body ParseEvent tells apart.
const (
	// NotAnEvent is any body that is not an S3 event notification.
	NotAnEvent EventKind = iota
	// Records is a notification with one entry per object (Records[].s3).
	Records
	// TestEvent is the s3:TestEvent S3 sends when a notification
	// configuration is set: it is about no object.
	TestEvent
)

// Event is a parsed S3 event notification: its entries, each as the JSON
// S3 sent, in order.
type Event struct {
	// Kind says whether the body was a notification at all.
	Kind EventKind
	// Entries are the Records of a notification (Kind Records), each
	// entry's JSON as S3 sent it; none otherwise.
	Entries []json.RawMessage
}

// eventShape is the part of a notification ParseEvent checks.
type eventShape struct {
	Records []json.RawMessage `json:"Records"`
	Service string            `json:"Service"`
	Event   string            `json:"Event"`
}

// entryShape is the part of one entry ParseEvent checks: an entry must
// carry an s3 object, as S3 sends it.
type entryShape struct {
	EventSource string `json:"eventSource"`
	S3          *struct {
		Bucket struct {
			Name string `json:"name"`
		} `json:"bucket"`
		Object struct {
			Key string `json:"key"`
		} `json:"object"`
	} `json:"s3"`
}

// ParseEvent reads an S3 event notification body: a JSON object whose
// Records are all entries with an s3 bucket and object key (eventSource
// aws:s3 when it is given), or S3's test event. Any other body, also a
// Records list that is empty or holds another kind of entry (an SNS or
// DynamoDB record), is NotAnEvent.
func ParseEvent(body string) Event {
	if len(body) < 2 || body[0] != '{' {
		return Event{}
	}
	// Most bodies are neither: do not decode them.
	if !strings.Contains(body, `"Records"`) && !strings.Contains(body, `"s3:TestEvent"`) {
		return Event{}
	}
	var ev eventShape
	if json.Unmarshal([]byte(body), &ev) != nil {
		return Event{}
	}
	if ev.Records == nil {
		if ev.Service == "Amazon S3" && ev.Event == "s3:TestEvent" {
			return Event{Kind: TestEvent}
		}
		return Event{}
	}
	if len(ev.Records) == 0 {
		return Event{}
	}
	for _, raw := range ev.Records {
		var e entryShape
		if json.Unmarshal(raw, &e) != nil || e.S3 == nil || e.S3.Bucket.Name == "" || e.S3.Object.Key == "" {
			return Event{}
		}
		if e.EventSource != "" && e.EventSource != "aws:s3" {
			return Event{}
		}
	}
	return Event{Kind: Records, Entries: ev.Records}
}
