package source

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/pipesproject/pipes/internal/core"
)

// Message is one queue message as a record of the EventBridge Pipes SQS shape.
// Its JSON encoding is exactly the record a target receives (SPEC.md §2.1).
//
// A source fills it in Receive; after that the runtime owns it and it must
// not be changed, except through the methods below. It is safe to read from
// several goroutines.
type Message struct {
	// MessageID identifies the message; it is the itemIdentifier of
	// partial batch answers.
	MessageID string `json:"messageId"`
	// ReceiptHandle is the handle of this receive; settling uses it.
	ReceiptHandle string `json:"receiptHandle"`
	// Body is the raw body, exactly as sent.
	Body string `json:"body"`
	// Attributes holds the system attributes as strings:
	// ApproximateReceiveCount, SentTimestamp, SenderId,
	// ApproximateFirstReceiveTimestamp, and for FIFO queues SequenceNumber,
	// MessageGroupId and MessageDeduplicationId.
	Attributes map[string]string `json:"attributes"`
	// MessageAttributes holds the sender's message attributes.
	MessageAttributes map[string]MessageAttribute `json:"messageAttributes"`
	// MD5OfBody is the MD5 digest of Body, hex encoded.
	MD5OfBody string `json:"md5OfBody"`
	// MD5OfMessageAttributes is the digest of the message attributes, when
	// there are any.
	MD5OfMessageAttributes string `json:"md5OfMessageAttributes,omitempty"`
	// EventSource is "aws:sqs" for SQS-shaped records.
	EventSource string `json:"eventSource"`
	// EventSourceARN is the ARN of the queue (or a pipes: identifier).
	EventSourceARN string `json:"eventSourceARN"`
	// AWSRegion is the queue's region.
	AWSRegion string `json:"awsRegion"`
	// Envelope is the original body when the pipe unwrapped an SNS or
	// EventBridge envelope, an SQS Extended Client pointer (the S3 object
	// the pointer named is then Body) or an S3 event notification (source
	// `unwrap:`); Body is then what the envelope carried. Absent otherwise.
	Envelope json.RawMessage `json:"envelope,omitempty"`

	// Record, when set, gives the message's record another shape than
	// SQS's (the Pipes RabbitMQ shape): its JSON is then Record's fields,
	// and the SQS fields above only carry what the runtime needs
	// (MessageID, ReceiptHandle, Body, Attributes' receive count).
	Record *Record `json:"-"`

	// UnwrapErr, when set by the source, says why it could not unwrap the
	// message (an offloaded payload it could not fetch from S3): the
	// message fails at stage "unwrap", alone, before the filter, and takes
	// the failed path (retry, redrive, dead letter) like any failure.
	UnwrapErr error `json:"-"`
	// Split, when not nil, are the records the message stands for (an S3
	// event notification's entries, 1 → N): each is an event of its own,
	// and the message succeeds only when every one of them does (a failure
	// of any fails it whole; it is filtered only when all are). An empty,
	// non-nil Split (S3's test event) is done without reaching the target,
	// like a filtered message. Each record keeps the message's MessageID
	// and ReceiptHandle; the source makes them, the runtime settles only
	// the message.
	Split []*Message `json:"-"`

	once    sync.Once
	encoded []byte
	err     error
	// recLen is the length of the SQS-shaped record without an envelope,
	// set once by recordLen when the message is tracked (0: not known).
	recLen int
	// liftedAttrs names the message attributes unwrap lifted out of an
	// SNS envelope: they are not the message's own.
	liftedAttrs []string
}

// Lifted reports whether the message attribute name came out of an
// unwrapped envelope (an SNS notification's attributes): it is not the
// message's own.
func (m *Message) Lifted(name string) bool {
	for _, n := range m.liftedAttrs {
		if n == name {
			return true
		}
	}
	return false
}

// MessageAttribute is one message attribute in the shape Lambda and Pipes
// give it: binary values are base64 in JSON.
type MessageAttribute struct {
	StringValue      *string  `json:"stringValue,omitempty"`
	BinaryValue      []byte   `json:"binaryValue,omitempty"`
	StringListValues []string `json:"stringListValues"`
	BinaryListValues [][]byte `json:"binaryListValues"`
	DataType         string   `json:"dataType"`
}

type messageAttributeJSON MessageAttribute

// MarshalJSON encodes the attribute in Lambda's shape, where absent lists
// are empty arrays, not null.
func (a MessageAttribute) MarshalJSON() ([]byte, error) {
	if a.StringListValues == nil {
		a.StringListValues = []string{}
	}
	if a.BinaryListValues == nil {
		a.BinaryListValues = [][]byte{}
	}
	return json.Marshal(messageAttributeJSON(a))
}

// System attribute names used by the runtime.
const (
	AttrReceiveCount   = "ApproximateReceiveCount"
	AttrSentTimestamp  = "SentTimestamp"
	AttrMessageGroupID = "MessageGroupId"
	AttrSequenceNumber = "SequenceNumber"
)

// GroupID is the FIFO message group of the message, "" on standard queues.
func (m *Message) GroupID() string { return m.Attributes[AttrMessageGroupID] }

// ReceiveCount is ApproximateReceiveCount as a number (0 when absent).
func (m *Message) ReceiveCount() int {
	n, _ := strconv.Atoi(m.Attributes[AttrReceiveCount])
	return n
}

// Size is the number of bytes the message weighs in memory budgets and in
// the 6 MB batch payload limit: its body and attribute values.
func (m *Message) Size() int {
	n := len(m.Body) + len(m.ReceiptHandle) + len(m.MessageID) + len(m.Envelope)
	for k, v := range m.Attributes {
		n += len(k) + len(v)
	}
	for k, v := range m.MessageAttributes {
		n += len(k) + len(v.DataType) + len(v.BinaryValue)
		if v.StringValue != nil {
			n += len(*v.StringValue)
		}
	}
	return n
}

type messageJSON struct {
	MessageID              string                      `json:"messageId"`
	ReceiptHandle          string                      `json:"receiptHandle"`
	Body                   string                      `json:"body"`
	Attributes             map[string]string           `json:"attributes"`
	MessageAttributes      map[string]MessageAttribute `json:"messageAttributes"`
	MD5OfBody              string                      `json:"md5OfBody"`
	MD5OfMessageAttributes string                      `json:"md5OfMessageAttributes,omitempty"`
	EventSource            string                      `json:"eventSource"`
	EventSourceARN         string                      `json:"eventSourceARN"`
	AWSRegion              string                      `json:"awsRegion"`
	Envelope               json.RawMessage             `json:"envelope,omitempty"`
}

// Record is a record shape other than SQS's, for sources such as RabbitMQ
// (SPEC.md §2.2). Its JSON is an object of Fields in order; the field named
// BodyField carries the message body base64-encoded (Pipes' `data`), and
// filters and templates see it decoded when the body is JSON, as they see
// an SQS record's body.
type Record struct {
	// Fields are the record's top-level fields in order. The one named
	// BodyField has no Value: the body goes there.
	Fields []RecordField
	// BodyField names the field of the body ("data").
	BodyField string
	// Unfilterable names fields that filters do not see (those the poller
	// adds: eventSource, eventSourceArn, eventSourceKey).
	Unfilterable []string
	// FieldsValid says that every field's Value is valid JSON: the record
	// was decoded from JSON, or its maker wrote each value with a JSON
	// encoder. Its encoding then does not check them, once per message.
	// Leave it false for values from anywhere else: each is then checked,
	// and a record with one that is not JSON fails to encode.
	FieldsValid bool
}

// RecordField is one top-level field of a Record: a name and its JSON.
type RecordField struct {
	Name  string
	Value json.RawMessage
}

// Field returns the JSON of the named field and whether the record has
// it; the body field's value is nil.
func (r *Record) Field(name string) (json.RawMessage, bool) {
	for _, f := range r.Fields {
		if f.Name == name {
			return f.Value, true
		}
	}
	return nil, false
}

// Filterable reports whether filters see the named field.
func (r *Record) Filterable(name string) bool {
	for _, n := range r.Unfilterable {
		if n == name {
			return false
		}
	}
	return true
}

// encode writes the record with body in BodyField, into one buffer of
// the record's length. Field names are escaped as encoding/json escapes a
// string; values go as they are, checked to be valid JSON unless the
// record's FieldsValid says they are (recordshape_test.go holds it, for
// every source's records, to an encoding/json reference).
func (r *Record) encode(body string) ([]byte, error) {
	n := 2 + max(2*len(r.Fields)-1, 0) // braces, colons and commas
	for _, f := range r.Fields {
		n += quotedLen(f.Name)
		if f.Name == r.BodyField && f.Value == nil {
			n += 2 + base64.StdEncoding.EncodedLen(len(body))
			continue
		}
		if len(f.Value) == 0 || !r.FieldsValid && !json.Valid(f.Value) {
			return nil, fmt.Errorf("record field %s is not valid JSON", f.Name)
		}
		n += len(f.Value)
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	for i, f := range r.Fields {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendQuoted(b, f.Name)
		b = append(b, ':')
		if f.Name == r.BodyField && f.Value == nil {
			b = appendBase64(b, body)
			continue
		}
		b = append(b, f.Value...)
	}
	return append(b, '}'), nil
}

// appendBase64 appends s base64-encoded as a JSON string, as encoding/json
// writes a []byte, without copying s into a []byte first: it goes through
// a buffer on the stack, a multiple of 3 bytes at a time.
func appendBase64(b []byte, s string) []byte {
	var buf [768]byte
	b = append(b, '"')
	for len(s) > 0 {
		k := copy(buf[:], s)
		b = base64.StdEncoding.AppendEncode(b, buf[:k])
		s = s[k:]
	}
	return append(b, '"')
}

// JSON returns the record's JSON encoding, computed once and shared: callers
// must not modify the returned slice.
func (m *Message) JSON() ([]byte, error) {
	m.once.Do(func() {
		if m.Record != nil {
			m.encoded, m.err = m.Record.encode(m.Body)
			return
		}
		m.encoded, m.err = m.sqsJSON()
	})
	return m.encoded, m.err
}

// MarshalJSON encodes the message as its Pipes record.
func (m *Message) MarshalJSON() ([]byte, error) { return m.JSON() }

// UnmarshalJSON decodes a Pipes record (as `pipes test --records` reads it).
// A record whose eventSource is "aws:rmq" is read in the Pipes RabbitMQ
// shape: its fields kept in order, its data decoded from base64 as the body.
func (m *Message) UnmarshalJSON(data []byte) error {
	var j messageJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	if j.EventSource == core.EventSourceRabbitMQ {
		return m.unmarshalShaped(data)
	}
	*m = Message{
		MessageID: j.MessageID, ReceiptHandle: j.ReceiptHandle, Body: j.Body,
		Attributes: j.Attributes, MessageAttributes: j.MessageAttributes, MD5OfBody: j.MD5OfBody,
		MD5OfMessageAttributes: j.MD5OfMessageAttributes, EventSource: j.EventSource,
		EventSourceARN: j.EventSourceARN, AWSRegion: j.AWSRegion, Envelope: j.Envelope,
	}
	return nil
}

// unmarshalShaped reads a Pipes RabbitMQ record, keeping its fields in
// order; messageId is the item identifier and data the base64 body.
func (m *Message) unmarshalShaped(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return errors.New("a record must be a JSON object")
	}
	// Every value is one the decoder read whole: valid JSON.
	rec := &Record{BodyField: "data", Unfilterable: []string{"eventSource", "eventSourceArn", "eventSourceKey"}, FieldsValid: true}
	*m = Message{Record: rec, Attributes: map[string]string{}}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := t.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("record field %s: %w", name, err)
		}
		switch name {
		case "messageId":
			if err := json.Unmarshal(raw, &m.MessageID); err != nil {
				return fmt.Errorf("record field messageId: %w", err)
			}
		case "data":
			var b64 string
			if err := json.Unmarshal(raw, &b64); err != nil {
				return fmt.Errorf("record field data: %w", err)
			}
			body, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				return fmt.Errorf("record field data is not base64: %w", err)
			}
			m.Body = string(body)
			raw = nil
		case "eventSource":
			_ = json.Unmarshal(raw, &m.EventSource)
		case "eventSourceArn":
			_ = json.Unmarshal(raw, &m.EventSourceARN)
		}
		rec.Fields = append(rec.Fields, RecordField{Name: name, Value: raw})
	}
	if _, ok := rec.Field("messageId"); !ok {
		rec.Fields = append([]RecordField{{Name: "messageId", Value: mustJSON(m.MessageID)}}, rec.Fields...)
	}
	return nil
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v) // strings always encode
	return b
}

// Streamed reports whether m's record can be written out as it is sent,
// without being encoded and kept first (the SQS shape without an
// envelope): AppendRecord then writes it, StreamedLen tells its length,
// and neither can fail.
func (m *Message) Streamed() bool { return m.Record == nil && len(m.Envelope) == 0 }

// RecordLen is the length of m's record JSON. For a Streamed record it is
// computed without encoding (nor keeping) the record, and remembered for
// StreamedLen; the pipe calls it once, as it tracks the message, before
// any stage reads the message.
func (m *Message) RecordLen() (int, error) {
	if m.Streamed() {
		m.recLen = m.sqsLen(nil)
		return m.recLen, nil
	}
	b, err := m.JSON()
	return len(b), err
}

// StreamedLen is the length of what AppendRecord appends for a Streamed
// record, computed without encoding it.
func (m *Message) StreamedLen() int {
	if m.recLen > 0 {
		return m.recLen
	}
	return m.sqsLen(nil)
}

// AppendRecord appends a Streamed record's JSON to b, written as it goes
// rather than encoded and kept; for any other record it appends JSON's
// encoding (nothing when that fails).
func (m *Message) AppendRecord(b []byte) []byte {
	if m.Streamed() {
		return m.appendSQS(b, nil)
	}
	j, _ := m.JSON()
	return append(b, j...)
}
