package awsbatch

import (
	"github.com/pipesproject/pipes/internal/kit/awsclient"
	"github.com/pipesproject/pipes/internal/kit/param"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

// Message is what an SQS or SNS message entry carries of one event, in
// the service's attribute type A.
type Message[A any] struct {
	// Body is the event's payload.
	Body *string
	// Attributes are the event's first attributes by name (see
	// awsclient.MessageAttributes); nil for none.
	Attributes map[string]A
	// Group and Dedup are the rendered message group and deduplication
	// ids; nil when they render empty.
	Group, Dedup *string
	// Size is what the message weighs against the API's limits: the body
	// and the attributes.
	Size int
}

// NewMessage builds the message of ev: at most maxAttrs attributes,
// converted with conv, and the ids group renders (its error fails the
// event).
func NewMessage[A any](ev *pipe.Event, group param.MessageGroup, maxAttrs int, conv func(source.MessageAttribute) A) (Message[A], error) {
	g, d, err := group.Render(ev)
	if err != nil {
		return Message[A]{}, err
	}
	attrs, attrSize := awsclient.MessageAttributes(ev.Attributes, maxAttrs, conv)
	body := string(ev.RecordJSON)
	return Message[A]{Body: &body, Attributes: attrs, Group: Opt(g), Dedup: Opt(d), Size: len(body) + attrSize}, nil
}
