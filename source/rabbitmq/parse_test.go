package rabbitmq

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Relies on: nothing of the broker's; the answers are the management API's
// as RabbitMQ 3.10 gives them.
func TestParseFactsReadsArgumentsOverPolicies(t *testing.T) {
	tests := []struct {
		name string
		body string
		want queueFacts
	}{
		{"a classic queue without arguments or policy",
			`{"type":"classic","arguments":{},"effective_policy_definition":[]}`, queueFacts{Type: "classic"}},
		{"a null policy",
			`{"type":"classic","arguments":{"x-dead-letter-exchange":"dlx"},"effective_policy_definition":null}`,
			queueFacts{Type: "classic", DeadLetterExchange: "dlx", HasDLX: true}},
		{"a quorum queue with a delivery limit argument",
			`{"type":"quorum","arguments":{"x-queue-type":"quorum","x-delivery-limit":3,"x-dead-letter-exchange":"dlx","x-dead-letter-routing-key":"dead"}}`,
			queueFacts{Type: "quorum", DeadLetterExchange: "dlx", HasDLX: true, DeadLetterRoutingKey: "dead", DeliveryLimit: 3}},
		{"policy keys when there are no arguments",
			`{"type":"quorum","arguments":{},"effective_policy_definition":{"dead-letter-exchange":"pdlx","delivery-limit":10}}`,
			queueFacts{Type: "quorum", DeadLetterExchange: "pdlx", HasDLX: true, DeliveryLimit: 10}},
		{"arguments override the policy",
			`{"type":"quorum","arguments":{"x-dead-letter-exchange":"adlx","x-delivery-limit":2},"effective_policy_definition":{"dead-letter-exchange":"pdlx","delivery-limit":10}}`,
			queueFacts{Type: "quorum", DeadLetterExchange: "adlx", HasDLX: true, DeliveryLimit: 2}},
		{"the default exchange as dead-letter exchange",
			`{"type":"classic","arguments":{"x-dead-letter-exchange":"","x-dead-letter-routing-key":"dlq"}}`,
			queueFacts{Type: "classic", HasDLX: true, DeadLetterRoutingKey: "dlq"}},
		{"a delivery limit of -1 disables it",
			`{"type":"quorum","arguments":{"x-delivery-limit":-1}}`, queueFacts{Type: "quorum"}},
		{"the type from x-queue-type when the answer has none",
			`{"arguments":{"x-queue-type":"stream"}}`, queueFacts{Type: "stream"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseFacts([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseFactsRefusesWhatIsNotAQueue(t *testing.T) {
	for _, body := range []string{``, `[]`, `{"arguments":"x"}`, `{"arguments":{"x-dead-letter-exchange":3}}`,
		`{"arguments":{"x-delivery-limit":"many"}}`, `{"arguments":{"x-delivery-limit":1.5}}`} {
		if _, err := parseFacts([]byte(body)); err == nil {
			t.Errorf("parseFacts(%s) succeeded", body)
		}
	}
}

// FuzzParseFacts: any answer gives facts or an error, never a panic, and
// the delivery limit is never negative.
func FuzzParseFacts(f *testing.F) {
	f.Add([]byte(`{"type":"quorum","arguments":{"x-delivery-limit":3,"x-dead-letter-exchange":"d"},"effective_policy_definition":{"delivery-limit":"7"}}`))
	f.Add([]byte(`{"type":"classic","arguments":{},"effective_policy_definition":[]}`))
	f.Add([]byte(`{"arguments":{"x-delivery-limit":1e300}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		facts, err := parseFacts(body)
		if err == nil && facts.DeliveryLimit < 0 {
			t.Fatalf("negative delivery limit %d", facts.DeliveryLimit)
		}
	})
}

// FuzzHeadersJSON: any header table of AMQP values maps to valid JSON in
// which strings and byte arrays keep their bytes.
func FuzzHeadersJSON(f *testing.F) {
	f.Add("tenant", "acme", int64(10), 1.5, []byte{0, 255}, uint8(2), int32(-12345))
	f.Add("", "é\x00", int64(-1), -0.0, []byte(nil), uint8(0), int32(0))
	f.Fuzz(func(t *testing.T, key, s string, n int64, x float64, b []byte, scale uint8, dec int32) {
		h := amqp.Table{key: s}
		for k, v := range (amqp.Table{
			"n": n, "x": x, "b": b, "d": amqp.Decimal{Scale: scale, Value: dec},
			"t": amqp.Table{"s": s, "l": []any{s, n, b}}, "ts": time.Unix(n%1e10, 0),
		}) {
			h[k] = v
		}
		out, err := json.Marshal(headersJSON(h))
		if err != nil {
			t.Fatalf("headers %v: %v", h, err)
		}
		var back map[string]any
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("not JSON: %s", out)
		}
		switch {
		case !utf8.ValidString(key): // JSON keys are text: encoding/json replaces bad bytes
		case key == "n", key == "x", key == "b", key == "d", key == "t", key == "ts": // overwritten
		default:
			if got := bytesBack(t, back[key]); got != s {
				t.Fatalf("string header %q came back as %q", s, got)
			}
		}
		if got := bytesBack(t, back["b"]); got != string(b) {
			t.Fatalf("byte header %v came back as %v", b, []byte(got))
		}
	})
}

func bytesBack(t *testing.T, v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%v is not a {\"bytes\":[…]} object", v)
	}
	list, _ := m["bytes"].([]any)
	out := make([]byte, len(list))
	for i, e := range list {
		out[i] = byte(e.(float64))
	}
	return string(out)
}

func TestDecimalsAreWrittenExactly(t *testing.T) {
	tests := []struct {
		d    amqp.Decimal
		want string
	}{
		{amqp.Decimal{Scale: 0, Value: 42}, "42"},
		{amqp.Decimal{Scale: 2, Value: 12345}, "123.45"},
		{amqp.Decimal{Scale: 3, Value: -5}, "-0.005"},
		{amqp.Decimal{Scale: 1, Value: -2147483648}, "-214748364.8"},
	}
	for _, tt := range tests {
		if got := decimal(tt.d); string(got) != tt.want {
			t.Errorf("decimal(%+v) = %s, want %s", tt.d, got, tt.want)
		}
	}
}

func TestAttemptsCountDeliveries(t *testing.T) {
	xdeath := func(queue string, count int64) amqp.Table {
		return amqp.Table{"queue": queue, "reason": "rejected", "count": count}
	}
	tests := []struct {
		name string
		d    amqp.Delivery
		want int
	}{
		{"a first delivery", amqp.Delivery{}, 1},
		{"a redelivery of a classic queue", amqp.Delivery{Redelivered: true}, 2},
		{"a quorum redelivery: x-delivery-count + 1", amqp.Delivery{Redelivered: true, Headers: amqp.Table{"x-delivery-count": int64(4)}}, 5},
		{"a re-published copy: its own header + 1", amqp.Delivery{Headers: amqp.Table{AttemptsHeader: int64(2)}}, 3},
		{"a re-published copy on a quorum queue, returned twice since", amqp.Delivery{Redelivered: true, Headers: amqp.Table{AttemptsHeader: int64(3), "x-delivery-count": int64(2)}}, 6},
		{"a re-published copy delivered again", amqp.Delivery{Redelivered: true, Headers: amqp.Table{AttemptsHeader: int32(2)}}, 4},
		{"back through a dead-letter cycle: x-death of this queue + 1",
			amqp.Delivery{Headers: amqp.Table{"x-death": []any{xdeath("wait", 3), xdeath("orders", 2)}}}, 3},
		{"x-death of other queues only", amqp.Delivery{Headers: amqp.Table{"x-death": []any{xdeath("other", 3)}}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := attempts(&tt.d, "orders"); got != tt.want {
				t.Errorf("attempts %d, want %d", got, tt.want)
			}
		})
	}
}

func TestAConsumerTimeoutGetsAClearError(t *testing.T) {
	err := closeReason("channel", &amqp.Error{Code: amqp.PreconditionFailed,
		Reason: "PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value used: 1800000 ms. This timeout value can be configured, see consumers doc guide to learn more"})
	var ct *ConsumerTimeoutError
	if !errors.As(err, &ct) || !strings.Contains(err.Error(), "consumer_timeout") {
		t.Fatalf("got %v, want a ConsumerTimeoutError naming consumer_timeout", err)
	}
	other := closeReason("channel", &amqp.Error{Code: amqp.PreconditionFailed, Reason: "PRECONDITION_FAILED - unknown delivery tag 7"})
	if errors.As(other, &ct) {
		t.Fatalf("an unknown delivery tag is taken for a consumer timeout: %v", other)
	}
}

func TestScrubTakesThePasswordOutButKeepsTheError(t *testing.T) {
	s, err := New(Config{URL: "amqp://u:hunter2@h:5672/v", Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	base := errors.New("dial amqp://u:hunter2@h failed")
	got := s.scrub(base)
	if strings.Contains(got.Error(), "hunter2") || !errors.Is(got, base) {
		t.Fatalf("scrub gave %q (is base: %v)", got, errors.Is(got, base))
	}
	if s.arn != "rabbitmq://h:5672/v/q" || s.key != "q::v" {
		t.Errorf("arn %q key %q", s.arn, s.key)
	}
	if s.mgmt != "http://h:15672" {
		t.Errorf("management URL %q", s.mgmt)
	}
}

// Relies on: nothing of the broker's.
func TestFallbackKeysSpellTheDefaultExchangeAsRabbitMQDoes(t *testing.T) {
	tests := []struct {
		name     string
		exchange string
		key      string
		limit    int
		want     queueFacts
	}{
		{"nothing set is no dead-letter exchange", "", "", 0, queueFacts{}},
		{"an exchange by name", "orders-dlx", "", 0, queueFacts{DeadLetterExchange: "orders-dlx", HasDLX: true}},
		{"an exchange by name with a routing key", "orders-dlx", "dead", 0, queueFacts{DeadLetterExchange: "orders-dlx", HasDLX: true, DeadLetterRoutingKey: "dead"}},
		{"amq.default is the default exchange", DefaultExchange, "orders-dlq", 0, queueFacts{HasDLX: true, DeadLetterRoutingKey: "orders-dlq"}},
		{"amq.default without a routing key is the default exchange too", DefaultExchange, "", 0, queueFacts{HasDLX: true}},
		{`"" with a routing key is the default exchange, as x-dead-letter-exchange ""`, "", "orders-dlq", 0, queueFacts{HasDLX: true, DeadLetterRoutingKey: "orders-dlq"}},
		{"a delivery limit makes the queue quorum", DefaultExchange, "q-dlq", 4, queueFacts{Type: "quorum", HasDLX: true, DeadLetterRoutingKey: "q-dlq", DeliveryLimit: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(Config{URL: "amqp://guest:guest@127.0.0.1:5672/", Queue: "q", ManagementURL: ManagementOff,
				DeadLetterExchange: tt.exchange, DeadLetterRoutingKey: tt.key, DeliveryLimit: tt.limit})
			if err != nil {
				t.Fatal(err)
			}
			if got := s.fallbackFacts(); got != tt.want {
				t.Errorf("fallbackFacts = %+v, want %+v", got, tt.want)
			}
			info := s.sourceInfo(s.fallbackFacts())
			if !info.OwnAdvice {
				t.Error("source.Info.OwnAdvice is false: the pipe would add the AWS advice to the source's own")
			}
			if tt.want.HasDLX && tt.want.DeadLetterExchange == "" && info.DeadLetterARN != DefaultExchange {
				t.Errorf("source.Info.DeadLetterARN = %q, want %s", info.DeadLetterARN, DefaultExchange)
			}
		})
	}
}
