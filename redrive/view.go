package redrive

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/pipesproject/pipes/source"
)

// PreviewBytes is how much of a body View's text shows before it cuts.
const PreviewBytes = 200

// View is one dead-lettered message as `pipes dlq inspect` shows it in
// text: what a person reads to learn why it failed. Build it with
// ViewOfSQS or (redrive/rabbit) ViewOf; write it with WriteText.
type View struct {
	// ID is the message's id.
	ID string
	// Body is the raw body.
	Body []byte
	// ReceiveCount is SQS's ApproximateReceiveCount ("" when not known).
	ReceiveCount string
	// Sent is when the message was first sent (SQS's SentTimestamp); zero
	// when not known.
	Sent time.Time
	// Deaths are RabbitMQ's x-death entries, most recent first.
	Deaths []Death
	// Attempts is the x-pipes-attempts header: the failed deliveries
	// before the last copy pipes made (RabbitMQ), "" when absent.
	Attempts string
	// Context is the failure context pipes' dead-letter stage adds
	// (ErrorCode, ErrorMessage, pipes-*), sorted by name.
	Context []Field
	// Other is every other header or message attribute, sorted by name.
	Other []Field
}

// Death is one entry of RabbitMQ's x-death header.
type Death struct {
	// Queue is the queue it was dead-lettered from, Reason why (rejected,
	// expired, maxlen, delivery_limit), Count how many times.
	Queue, Reason string
	Count         int64
	// First is when it first happened (x-death's time); Last the latest
	// (only brokers that record it: zero otherwise).
	First, Last time.Time
	// Exchange and RoutingKeys are where it had been published.
	Exchange    string
	RoutingKeys []string
}

// Field is a header or message attribute shown as text.
type Field struct {
	Name, Value string
}

// ViewOfSQS is the text view of a Pipes SQS record.
func ViewOfSQS(m *source.Message) View {
	v := View{ID: m.MessageID, Body: []byte(m.Body), ReceiveCount: m.Attributes["ApproximateReceiveCount"]}
	if ms, err := strconv.ParseInt(m.Attributes["SentTimestamp"], 10, 64); err == nil {
		v.Sent = time.UnixMilli(ms)
	}
	for name, a := range m.MessageAttributes {
		val := ""
		switch {
		case a.StringValue != nil:
			val = *a.StringValue
		case a.BinaryValue != nil:
			val = string(a.BinaryValue)
		}
		f := Field{Name: name, Value: val}
		if IsContextAttribute(name) {
			v.Context = append(v.Context, f)
		} else {
			v.Other = append(v.Other, f)
		}
	}
	SortFields(v.Context)
	SortFields(v.Other)
	return v
}

// SortFields sorts fields by name.
func SortFields(fs []Field) {
	slices.SortFunc(fs, func(a, b Field) int { return strings.Compare(a.Name, b.Name) })
}

// WriteText writes v as an indented block of lines, a blank line after:
// the id, the body (a preview), the deaths, the attempts and the failure
// context; now dates the age of an SQS message.
func (v View) WriteText(w io.Writer, now time.Time) error {
	var b strings.Builder
	fmt.Fprintf(&b, "message %s\n", v.ID)
	fmt.Fprintf(&b, "  body (%d bytes): %s\n", len(v.Body), Preview(v.Body, PreviewBytes))
	if v.ReceiveCount != "" {
		fmt.Fprintf(&b, "  receive count: %s\n", v.ReceiveCount)
	}
	if !v.Sent.IsZero() {
		fmt.Fprintf(&b, "  sent: %s (%s ago)\n", v.Sent.UTC().Format(time.RFC3339), now.Sub(v.Sent).Round(time.Second))
	}
	for _, d := range v.Deaths {
		fmt.Fprintf(&b, "  x-death: queue %s, reason %s, count %d", d.Queue, d.Reason, d.Count)
		if !d.First.IsZero() {
			fmt.Fprintf(&b, ", first %s", d.First.UTC().Format(time.RFC3339))
		}
		if !d.Last.IsZero() {
			fmt.Fprintf(&b, ", last %s", d.Last.UTC().Format(time.RFC3339))
		} else if !d.First.IsZero() {
			b.WriteString(", last not recorded")
		}
		if d.Exchange != "" || len(d.RoutingKeys) > 0 {
			ex := d.Exchange
			if ex == "" {
				ex = "(default)"
			}
			fmt.Fprintf(&b, ", from exchange %s with routing keys %s", ex, strings.Join(d.RoutingKeys, ", "))
		}
		b.WriteString("\n")
	}
	if v.Attempts != "" {
		fmt.Fprintf(&b, "  x-pipes-attempts: %s\n", v.Attempts)
	}
	for _, f := range v.Context {
		fmt.Fprintf(&b, "  %s: %s\n", f.Name, Preview([]byte(f.Value), 2*PreviewBytes))
	}
	for _, f := range v.Other {
		fmt.Fprintf(&b, "  header %s: %s\n", f.Name, Preview([]byte(f.Value), PreviewBytes))
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// Preview shows body as one line of text: the text in double quotes when
// it is UTF-8, with quotes, backslashes and what does not print escaped
// (\n, \t, \x00, \u200b), cut after max bytes ("… N more bytes");
// "(binary)" and its first bytes in hex when it is not UTF-8; "(empty)"
// for none. The text views of `pipes dlq inspect` show bodies so.
func Preview(body []byte, max int) string {
	if len(body) == 0 {
		return "(empty)"
	}
	if !utf8.Valid(body) {
		n := min(len(body), 32)
		more := ""
		if len(body) > n {
			more = fmt.Sprintf(" … %d more bytes", len(body)-n)
		}
		return fmt.Sprintf("(binary) %x%s", body[:n], more)
	}
	cut := body
	if len(cut) > max {
		cut = cut[:max]
		for !utf8.Valid(cut) {
			cut = cut[:len(cut)-1] // a rune cut in two at the end
		}
	}
	more := ""
	if n := len(body) - len(cut); n > 0 {
		more = fmt.Sprintf(" … %d more bytes", n)
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range string(cut) {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80 && !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	b.WriteString(more)
	return b.String()
}
