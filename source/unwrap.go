package source

import (
	"encoding/base64"
	"encoding/json"
	"strings"
)

// Envelope kinds a pipe can unwrap (source `unwrap:`).
const (
	UnwrapNone        = ""
	UnwrapSNS         = "sns"
	UnwrapEventBridge = "eventbridge"
	UnwrapAuto        = "auto"
	// UnwrapS3Pointer and UnwrapS3Event are done by the SQS source, which
	// has the S3 client: an SQS Extended Client pointer is replaced by the
	// object it names, an S3 event notification split into its entries
	// (Message.Split). The runtime's own unwrap leaves those alone.
	UnwrapS3Pointer = "s3pointer"
	UnwrapS3Event   = "s3event"
)

// snsEnvelope is the JSON an SNS topic delivers to an SQS queue without raw
// message delivery.
type snsEnvelope struct {
	Type              string `json:"Type"`
	MessageID         string `json:"MessageId"`
	TopicArn          string `json:"TopicArn"`
	Subject           string `json:"Subject"`
	Message           string `json:"Message"`
	MessageAttributes map[string]struct {
		Type  string `json:"Type"`
		Value string `json:"Value"`
	} `json:"MessageAttributes"`
}

// eventBridgeEnvelope is the part of an EventBridge event pipes reads.
type eventBridgeEnvelope struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Detail     json.RawMessage `json:"detail"`
}

// Unwrap applies a pipe's `unwrap:` setting to a message received outside
// a pipe (as `pipes test` does); kind is one of the Unwrap constants.
func Unwrap(m *Message, kind string) { unwrap(m, kind) }

// unwrap replaces an envelope body by what it carries, so filters,
// templates and targets see the real payload: an SNS notification's Message
// (its MessageAttributes lifted into the record's messageAttributes, where
// the message has none of that name) or an EventBridge event's detail. The
// envelope itself is kept in the record's `envelope` field. A body that is
// not such an envelope is left as it is, and so is one the source unwrapped
// already (an S3 payload or event). It runs once, before the record is
// encoded.
func unwrap(m *Message, kind string) {
	if kind == UnwrapNone || m.Envelope != nil || m.Split != nil || m.UnwrapErr != nil || len(m.Body) == 0 || m.Body[0] != '{' {
		return
	}
	if kind == UnwrapSNS || kind == UnwrapAuto {
		var env snsEnvelope
		if json.Unmarshal([]byte(m.Body), &env) == nil && env.Type == "Notification" && env.TopicArn != "" {
			m.Envelope = json.RawMessage(m.Body)
			m.Body = env.Message
			for name, a := range env.MessageAttributes {
				if _, taken := m.MessageAttributes[name]; taken {
					continue
				}
				if m.MessageAttributes == nil {
					m.MessageAttributes = map[string]MessageAttribute{}
				}
				attr := MessageAttribute{DataType: a.Type}
				if strings.HasPrefix(a.Type, "Binary") {
					if b, err := base64.StdEncoding.DecodeString(a.Value); err == nil {
						attr.BinaryValue = b
					}
				} else {
					v := a.Value
					attr.StringValue = &v
				}
				m.MessageAttributes[name] = attr
				m.liftedAttrs = append(m.liftedAttrs, name)
			}
			return
		}
	}
	if kind == UnwrapEventBridge || kind == UnwrapAuto {
		var env eventBridgeEnvelope
		if json.Unmarshal([]byte(m.Body), &env) == nil && env.DetailType != "" && env.Source != "" && len(env.Detail) > 0 {
			m.Envelope = json.RawMessage(m.Body)
			m.Body = string(env.Detail)
		}
	}
}
