package tracing

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/pipesproject/pipes/source"
	"go.opentelemetry.io/otel/trace"
)

// The message attributes a producer's trace context is read from.
const (
	// AttrTraceparent is the message attribute (a String) holding a W3C
	// traceparent.
	AttrTraceparent = "traceparent"
	// AttrAWSTraceHeader is SQS's system attribute holding an X-Ray trace
	// header (Root=1-…;Parent=…;Sampled=…).
	AttrAWSTraceHeader = "AWSTraceHeader"
)

// ParseTraceparent reads a W3C traceparent header value
// (version-traceid-parentid-flags, lowercase hex). It reports false for a
// malformed value, version ff, or an all-zero trace or span id. A version
// above 00 is read by its first four fields, as the W3C text asks.
func ParseTraceparent(s string) (trace.SpanContext, bool) {
	s = strings.TrimSpace(s)
	if len(s) < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return trace.SpanContext{}, false
	}
	version, ok := lowerHex(s[0:2])
	if !ok || version[0] == 0xff || (version[0] == 0 && len(s) != 55) || (len(s) > 55 && s[55] != '-') {
		return trace.SpanContext{}, false
	}
	tid, ok1 := lowerHex(s[3:35])
	sid, ok2 := lowerHex(s[36:52])
	flags, ok3 := lowerHex(s[53:55])
	if !ok1 || !ok2 || !ok3 {
		return trace.SpanContext{}, false
	}
	var cfg trace.SpanContextConfig
	copy(cfg.TraceID[:], tid)
	copy(cfg.SpanID[:], sid)
	cfg.TraceFlags = trace.TraceFlags(flags[0]) & trace.FlagsSampled
	cfg.Remote = true
	sc := trace.NewSpanContext(cfg)
	return sc, sc.IsValid()
}

// ParseXRay reads an X-Ray trace header (AWSTraceHeader:
// "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
// fields in any order, Lineage and others ignored) as a W3C span context:
// the trace id is Root's 8 hex digits of time and 24 of id, the span id is
// Parent. It reports false without a valid Root and Parent.
func ParseXRay(s string) (trace.SpanContext, bool) {
	var root, parent, sampled string
	for field := range strings.SplitSeq(s, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(field), "=")
		switch k {
		case "Root":
			root = v
		case "Parent":
			parent = v
		case "Sampled":
			sampled = v
		}
	}
	// Root=1-<8 hex>-<24 hex>
	if len(root) != 35 || root[:2] != "1-" || root[10] != '-' {
		return trace.SpanContext{}, false
	}
	tid, ok1 := lowerHex(strings.ToLower(root[2:10] + root[11:]))
	sid, ok2 := lowerHex(strings.ToLower(parent))
	if !ok1 || !ok2 || len(sid) != 8 {
		return trace.SpanContext{}, false
	}
	var cfg trace.SpanContextConfig
	copy(cfg.TraceID[:], tid)
	copy(cfg.SpanID[:], sid)
	if sampled == "1" {
		cfg.TraceFlags = trace.FlagsSampled
	}
	cfg.Remote = true
	sc := trace.NewSpanContext(cfg)
	return sc, sc.IsValid()
}

// lowerHex decodes s when it is lowercase hex digits only.
func lowerHex(s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return nil, false
		}
	}
	b, err := hex.DecodeString(s)
	return b, err == nil
}

// producerContext is the trace context a message carries: its
// traceparent message attribute (a String), else its AWSTraceHeader
// system attribute, or for a RabbitMQ record its traceparent header (a
// string); false when it has none, valid.
func producerContext(m *source.Message) (trace.SpanContext, bool) {
	if m.Record != nil {
		return recordContext(m.Record)
	}
	if a, ok := m.MessageAttributes[AttrTraceparent]; ok && a.StringValue != nil {
		if sc, ok := ParseTraceparent(*a.StringValue); ok {
			return sc, true
		}
	}
	if h, ok := m.Attributes[AttrAWSTraceHeader]; ok {
		return ParseXRay(h)
	}
	return trace.SpanContext{}, false
}

// recordContext reads the traceparent header of a Pipes RabbitMQ record
// (basicProperties.headers.traceparent: the bytes of an AMQP string, as
// Pipes shows them, or a JSON string).
func recordContext(r *source.Record) (trace.SpanContext, bool) {
	props, ok := r.Field("basicProperties")
	if !ok || !bytes.Contains(props, []byte(AttrTraceparent)) {
		return trace.SpanContext{}, false // most records: no JSON decoding
	}
	var p struct {
		Headers map[string]json.RawMessage `json:"headers"`
	}
	if err := json.Unmarshal(props, &p); err != nil {
		return trace.SpanContext{}, false
	}
	raw := p.Headers[AttrTraceparent]
	var tp string
	if err := json.Unmarshal(raw, &tp); err == nil {
		return ParseTraceparent(tp)
	}
	// Pipes shows an AMQP string header as its bytes: {"bytes":[48,48,…]}.
	var arr struct {
		Bytes []int `json:"bytes"`
	}
	if err := json.Unmarshal(raw, &arr); err != nil || len(arr.Bytes) > 64 {
		return trace.SpanContext{}, false
	}
	text := make([]byte, 0, len(arr.Bytes))
	for _, c := range arr.Bytes {
		if c < 0 || c > 255 {
			return trace.SpanContext{}, false
		}
		text = append(text, byte(c))
	}
	return ParseTraceparent(string(text))
}
