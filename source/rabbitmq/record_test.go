package rabbitmq_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/source/rabbitmq"
)

func TestRecordOfADeliveryIsTheShapeTheSourceHandsOut(t *testing.T) {
	uri, err := amqp.ParseURI("amqp://guest:secret-pw@broker.example:5673/prod")
	if err != nil {
		t.Fatal(err)
	}
	arn := rabbitmq.ARN(uri, "orders dlq")
	if arn != "rabbitmq://broker.example:5673/prod/orders%20dlq" || strings.Contains(arn, "secret-pw") {
		t.Errorf("ARN = %q", arn)
	}
	d := amqp.Delivery{
		MessageId: "m-1", ContentType: "application/json", DeliveryMode: 2, Redelivered: true,
		Timestamp: time.Unix(2021, 0),
		Headers:   amqp.Table{"x-death": []any{amqp.Table{"queue": "orders", "count": int64(2), "reason": "rejected"}}},
		Body:      []byte(`{"kind":"order"}`),
	}
	m := rabbitmq.Record(d, "orders-dlq", "prod", arn)
	b, err := m.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		MessageID       string `json:"messageId"`
		EventSource     string `json:"eventSource"`
		EventSourceArn  string `json:"eventSourceArn"`
		EventSourceKey  string `json:"eventSourceKey"`
		Redelivered     bool   `json:"redelivered"`
		Data            []byte `json:"data"`
		BasicProperties struct {
			Headers   map[string]json.RawMessage `json:"headers"`
			Timestamp string                     `json:"timestamp"`
		} `json:"basicProperties"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if rec.MessageID != "m-1" || m.MessageID != "m-1" || rec.EventSource != "aws:rmq" || rec.EventSourceArn != arn ||
		rec.EventSourceKey != "orders-dlq::prod" || !rec.Redelivered || string(rec.Data) != `{"kind":"order"}` ||
		rec.BasicProperties.Timestamp != "Jan 1, 1970, 12:33:41 AM" || rec.BasicProperties.Headers["x-death"] == nil {
		t.Errorf("record %s", b)
	}
	if !strings.Contains(string(rec.BasicProperties.Headers["x-death"]), `"count":2`) {
		t.Errorf("x-death rendered as %s", rec.BasicProperties.Headers["x-death"])
	}
	if m.ReceiptHandle != "" || m.Body != `{"kind":"order"}` {
		t.Errorf("message %+v", m)
	}
	if other := rabbitmq.Record(amqp.Delivery{Body: []byte("x")}, "q", "/", arn); !strings.HasPrefix(other.MessageID, "pipes-") {
		t.Errorf("a delivery without message-id got id %q, want the made-up digest", other.MessageID)
	}
}
