package tracing

import (
	"strconv"
	"strings"
	"testing"

	"github.com/pipesproject/pipes/source"
)

func TestParseTraceparent(t *testing.T) {
	tests := []struct {
		name, in    string
		ok          bool
		trace, span string
		sampled     bool
	}{
		{"a sampled W3C value is read", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true, "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", true},
		{"an unsampled one keeps its flag off", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true, "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", false},
		{"surrounding spaces are trimmed", "  00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 ", true, "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", true},
		{"a later version is read by its first fields", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", true, "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", true},
		{"version 00 with more fields is refused", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", false, "", "", false},
		{"version ff is refused", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false, "", "", false},
		{"uppercase hex is refused", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false, "", "", false},
		{"an all-zero trace id is refused", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", false, "", "", false},
		{"an all-zero span id is refused", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false, "", "", false},
		{"a short value is refused", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", false, "", "", false},
		{"wrong separators are refused", "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01", false, "", "", false},
		{"an empty value is refused", "", false, "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc, ok := ParseTraceparent(tt.in)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			if sc.TraceID().String() != tt.trace || sc.SpanID().String() != tt.span || sc.IsSampled() != tt.sampled || !sc.IsRemote() {
				t.Errorf("got trace %s span %s sampled %v remote %v", sc.TraceID(), sc.SpanID(), sc.IsSampled(), sc.IsRemote())
			}
		})
	}
}

func TestParseXRay(t *testing.T) {
	tests := []struct {
		name, in    string
		ok          bool
		trace, span string
		sampled     bool
	}{
		{"Root and Parent become the trace and span ids", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1", true, "5759e988bd862e3fe1be46a994272793", "53995c3f42cd8ad8", true},
		{"fields in another order, Lineage ignored", "Parent=53995c3f42cd8ad8;Lineage=a87bd80c:1|68fd508a:5;Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=0", true, "5759e988bd862e3fe1be46a994272793", "53995c3f42cd8ad8", false},
		{"spaces after the semicolons are allowed", "Root=1-5759e988-bd862e3fe1be46a994272793; Parent=53995c3f42cd8ad8; Sampled=1", true, "5759e988bd862e3fe1be46a994272793", "53995c3f42cd8ad8", true},
		{"uppercase hex is taken", "Root=1-5759E988-BD862E3FE1BE46A994272793;Parent=53995C3F42CD8AD8", true, "5759e988bd862e3fe1be46a994272793", "53995c3f42cd8ad8", false},
		{"no Parent: no span to link", "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1", false, "", "", false},
		{"a Root of another version is refused", "Root=2-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8", false, "", "", false},
		{"a short Root is refused", "Root=1-5759e988-bd862e3f;Parent=53995c3f42cd8ad8", false, "", "", false},
		{"a Parent that is not 16 hex digits is refused", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f", false, "", "", false},
		{"an all-zero Parent is refused", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=0000000000000000", false, "", "", false},
		{"garbage is refused", "not a header", false, "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc, ok := ParseXRay(tt.in)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			if sc.TraceID().String() != tt.trace || sc.SpanID().String() != tt.span || sc.IsSampled() != tt.sampled {
				t.Errorf("got trace %s span %s sampled %v", sc.TraceID(), sc.SpanID(), sc.IsSampled())
			}
		})
	}
}

func TestProducerContextPrefersTheTraceparentAttribute(t *testing.T) {
	str := func(s string) *string { return &s }
	const xray = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	tests := []struct {
		name  string
		msg   *source.Message
		ok    bool
		trace string
	}{
		{"the traceparent attribute", &source.Message{MessageAttributes: map[string]source.MessageAttribute{
			"traceparent": {DataType: "String", StringValue: str("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}},
			Attributes: map[string]string{"AWSTraceHeader": xray}}, true, "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"AWSTraceHeader when there is no traceparent", &source.Message{Attributes: map[string]string{"AWSTraceHeader": xray}}, true, "5759e988bd862e3fe1be46a994272793"},
		{"AWSTraceHeader when the traceparent is malformed", &source.Message{MessageAttributes: map[string]source.MessageAttribute{
			"traceparent": {DataType: "String", StringValue: str("junk")}},
			Attributes: map[string]string{"AWSTraceHeader": xray}}, true, "5759e988bd862e3fe1be46a994272793"},
		{"a binary traceparent attribute is not read", &source.Message{MessageAttributes: map[string]source.MessageAttribute{
			"traceparent": {DataType: "Binary", BinaryValue: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}}}, false, ""},
		{"neither", &source.Message{}, false, ""},
		{"a RabbitMQ record's traceparent header", &source.Message{Record: &source.Record{Fields: []source.RecordField{
			{Name: "basicProperties", Value: []byte(`{"contentType":null,"headers":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}`)}}}},
			true, "0af7651916cd43dd8448eb211c80319c"},
		{"a RabbitMQ record's traceparent header as Pipes shows an AMQP string", &source.Message{Record: &source.Record{Fields: []source.RecordField{
			{Name: "basicProperties", Value: []byte(`{"headers":{"traceparent":{"bytes":` + bytesJSON("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01") + `}}}`)}}}},
			true, "0af7651916cd43dd8448eb211c80319c"},
		{"a RabbitMQ record whose traceparent bytes are out of range", &source.Message{Record: &source.Record{Fields: []source.RecordField{
			{Name: "basicProperties", Value: []byte(`{"headers":{"traceparent":{"bytes":[300]}}}`)}}}}, false, ""},
		{"a RabbitMQ record without headers", &source.Message{Record: &source.Record{Fields: []source.RecordField{
			{Name: "basicProperties", Value: []byte(`{"contentType":null,"headers":null}`)}}}}, false, ""},
		{"a RabbitMQ record whose traceparent is no string", &source.Message{Record: &source.Record{Fields: []source.RecordField{
			{Name: "basicProperties", Value: []byte(`{"headers":{"traceparent":42}}`)}}}}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc, ok := producerContext(tt.msg)
			if ok != tt.ok || (ok && sc.TraceID().String() != tt.trace) {
				t.Errorf("got %v %s, want %v %s", ok, sc.TraceID(), tt.ok, tt.trace)
			}
		})
	}
}

func TestTracesURL(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{"http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces", ""},
		{"http://collector:4318/", "http://collector:4318/v1/traces", ""},
		{"https://otel.example.com/otlp", "https://otel.example.com/otlp/v1/traces", ""},
		{"http://collector:4318/v1/traces", "http://collector:4318/v1/traces", ""},
		{"collector:4318", "", "--otlp-endpoint"},
		{"ftp://user:s3cr3t@collector", "", "--otlp-endpoint"},
		{"http://", "", "--otlp-endpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := TracesURL(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || strings.Contains(err.Error(), "s3cr3t") {
					t.Errorf("err = %v, want one naming %s without the value", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestEnabledByTheFlagOrEitherVariable(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	tests := []struct {
		name string
		cfg  Config
		want bool
	}{
		{"off by default", Config{Getenv: env(nil)}, false},
		{"the flag", Config{Endpoint: "http://c:4318", Getenv: env(nil)}, true},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", Config{Getenv: env(map[string]string{EnvEndpoint: "http://c:4318"})}, true},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", Config{Getenv: env(map[string]string{EnvTracesEndpoint: "http://c:4318/v1/traces"})}, true},
		{"another OTLP variable alone", Config{Getenv: env(map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "a=b"})}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.cfg.Enabled(); got != tt.want {
				t.Errorf("Enabled() = %v, want %v", got, tt.want)
			}
		})
	}
}

// FuzzParseTraceparent: any input is read without panicking, and what is
// accepted is a valid span context that prints back as it was read.
func FuzzParseTraceparent(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x")
	f.Add("ff-00000000000000000000000000000000-0000000000000000-00")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		sc, ok := ParseTraceparent(s)
		if !ok {
			return
		}
		if !sc.IsValid() {
			t.Fatalf("accepted %q as an invalid span context", s)
		}
		in := strings.TrimSpace(s)
		if in[3:35] != sc.TraceID().String() || in[36:52] != sc.SpanID().String() {
			t.Fatalf("%q read as %s-%s", s, sc.TraceID(), sc.SpanID())
		}
	})
}

// FuzzParseXRay: any input is read without panicking, and what is accepted
// is a valid span context.
func FuzzParseXRay(f *testing.F) {
	f.Add("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
	f.Add("Root=1-5759e988-bd862e3fe1be46a994272793")
	f.Add(";;=;Root=;Parent=")
	f.Fuzz(func(t *testing.T, s string) {
		if sc, ok := ParseXRay(s); ok && !sc.IsValid() {
			t.Fatalf("accepted %q as an invalid span context", s)
		}
	})
}

// bytesJSON is s as a JSON array of its byte values.
func bytesJSON(s string) string {
	parts := make([]string, len(s))
	for i := 0; i < len(s); i++ {
		parts[i] = strconv.Itoa(int(s[i]))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// FuzzRecordContext: any basicProperties JSON of a RabbitMQ record is read
// without panicking, and what is accepted is a valid span context.
func FuzzRecordContext(f *testing.F) {
	f.Add(`{"headers":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}`)
	f.Add(`{"headers":{"traceparent":{"bytes":[48,48,45]}}}`)
	f.Add(`{"headers":{"traceparent":{"bytes":[-1,999]}}}`)
	f.Add(`{"headers":null}`)
	f.Fuzz(func(t *testing.T, props string) {
		r := &source.Record{Fields: []source.RecordField{{Name: "basicProperties", Value: []byte(props)}}}
		if sc, ok := recordContext(r); ok && !sc.IsValid() {
			t.Fatalf("accepted %q as an invalid span context", props)
		}
	})
}
