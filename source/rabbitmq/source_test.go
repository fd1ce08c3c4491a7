package rabbitmq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/internal/rabbittest"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/source/rabbitmq"
)

// Relies on: the broker delivering every AMQP property and header as
// published (AMQP 0-9-1 content header), and redelivered=false on a
// first delivery.
func TestRecordsHaveThePipesRabbitMQShape(t *testing.T) {
	tests := []struct {
		name string
		pub  amqp.Publishing
		want string // the record without messageId, eventSourceArn and data
	}{
		{
			name: "every property set, headers of every kind",
			pub: amqp.Publishing{
				ContentType: "application/json", ContentEncoding: "identity",
				Headers: amqp.Table{
					"tenant": "acme", "tries": int32(10), "big": int64(1) << 40, "ratio": 1.5, "on": true,
					"raw": []byte{0, 255}, "nested": amqp.Table{"k": "v"}, "list": []any{"a", int16(3)},
					"price": amqp.Decimal{Scale: 2, Value: -12345}, "none": nil,
				},
				DeliveryMode: amqp.Persistent, Priority: 5, CorrelationId: "corr-1", ReplyTo: "replies",
				Expiration: "60000", MessageId: "m-1", Timestamp: time.Unix(2021, 0), Type: "order.created",
				UserId: "guest", AppId: "shop", Body: []byte(`{"kind":"x"}`),
			},
			want: `"basicProperties":{"contentType":"application/json","contentEncoding":"identity",` +
				`"headers":{"big":1099511627776,"list":[{"bytes":[97]},3],"nested":{"k":{"bytes":[118]}},"none":null,"on":true,` +
				`"price":-123.45,"ratio":1.5,"raw":{"bytes":[0,255]},"tenant":{"bytes":[97,99,109,101]},"tries":10},` +
				`"deliveryMode":2,"priority":5,"correlationId":"corr-1","replyTo":"replies","expiration":"60000","messageId":"m-1",` +
				`"timestamp":"Jan 1, 1970, 12:33:41 AM","type":"order.created","userId":"guest","appId":"shop","clusterId":null,"bodySize":12},` +
				`"redelivered":false`,
		},
		{
			name: "nothing set: every property null",
			pub:  amqp.Publishing{Body: []byte("plain")},
			want: `"basicProperties":{"contentType":null,"contentEncoding":null,"headers":null,"deliveryMode":null,"priority":null,` +
				`"correlationId":null,"replyTo":null,"expiration":null,"messageId":null,"timestamp":null,"type":null,"userId":null,` +
				`"appId":null,"clusterId":null,"bodySize":5},"redelivered":false`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := rabbittest.Name(t, "")
			rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{Args: amqp.Table{"x-max-priority": int32(9)}})
			src := open(t, rabbitmq.Config{Queue: q})
			publish(t, q, tt.pub)
			m := receive(t, src, 1, 10*time.Second)[0]
			b, err := m.JSON()
			if err != nil {
				t.Fatal(err)
			}
			var rec map[string]json.RawMessage
			if err := json.Unmarshal(b, &rec); err != nil {
				t.Fatalf("record is not JSON: %v\n%s", err, b)
			}
			wantHead := `{"messageId":` + string(mustJSON(m.MessageID)) + `,"eventSource":"aws:rmq","eventSourceArn":` +
				string(mustJSON(src.info.ARN)) + `,"eventSourceKey":` + string(mustJSON(q+"::/")) + `,`
			wantTail := `,"data":` + string(mustJSON(tt.pub.Body)) + `}` // []byte encodes as base64
			if want := wantHead + tt.want + wantTail; string(b) != want {
				t.Errorf("record\n%s\nwant\n%s", b, want)
			}
			if m.Body != string(tt.pub.Body) || m.EventSource != core.EventSourceRabbitMQ || m.EventSourceARN != src.info.ARN {
				t.Errorf("message body %q source %q arn %q", m.Body, m.EventSource, m.EventSourceARN)
			}
			if tt.pub.MessageId != "" && m.MessageID != tt.pub.MessageId {
				t.Errorf("messageId %q, want the AMQP message-id %q", m.MessageID, tt.pub.MessageId)
			}
			if src.Attempts(m) != 1 || m.ReceiveCount() != 1 {
				t.Errorf("attempts %d, ApproximateReceiveCount %d, want 1", src.Attempts(m), m.ReceiveCount())
			}
			if err := src.Ack(t.Context(), []*source.Message{m}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// Relies on: the broker keeping a message in flight for its consumer, and
// a passive declare counting ready messages only.
func TestMessageIDsAreUniqueInFlightAndStableAcrossRedeliveries(t *testing.T) {
	q := rabbittest.Name(t, "")
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{})
	src := open(t, rabbitmq.Config{Queue: q})
	for range 2 {
		publish(t, q, amqp.Publishing{MessageId: "dup", Body: []byte("same id")})
	}
	rabbittest.Publish(t, q, "no id")
	got := receive(t, src, 3, 10*time.Second)
	ids := map[string]bool{}
	for _, m := range got {
		if ids[m.MessageID] {
			t.Errorf("messageId %q twice in flight", m.MessageID)
		}
		ids[m.MessageID] = true
	}
	if !ids["dup"] {
		t.Errorf("ids %v: none is the AMQP message-id", ids)
	}
	var noID *source.Message
	for _, m := range got {
		if m.Body == "no id" {
			noID = m
		}
	}
	if err := src.Nak(t.Context(), []*source.Message{noID}, 0); err != nil {
		t.Fatal(err)
	}
	again := receive(t, src, 1, 10*time.Second)[0]
	if again.MessageID != noID.MessageID || again.ReceiveCount() != 2 {
		t.Errorf("redelivery has id %q count %d, want %q and 2", again.MessageID, again.ReceiveCount(), noID.MessageID)
	}
	if err := src.Ack(t.Context(), append(got, again)); err == nil {
		t.Error("acking the given-back receipt again succeeded, want a SettleError")
	}
}

// Relies on: basic.nack without requeue dead-lettering to the queue's
// dead-letter exchange with an x-death entry (reason rejected); the quorum
// queue's x-delivery-limit dead-lettering with reason delivery_limit once a
// message was returned more often than the limit; x-delivery-count on
// quorum redeliveries.
func TestFailedMessagesAreDeadLetteredTheRabbitMQWay(t *testing.T) {
	rabbittest.ManagementURL(t) // skips without it: the source reads the queue's dead-letter exchange from the management API
	tests := []struct {
		name            string
		queue           rabbittest.QueueOptions
		maxReceiveCount int
		wantDeliveries  int
		wantReason      string
		wantCount       int64
		wantAttemptsHdr bool
	}{
		{
			name:  "a classic queue with a dead-letter exchange dead-letters at the first failure",
			queue: rabbittest.QueueOptions{}, wantDeliveries: 1, wantReason: "rejected", wantCount: 1,
		},
		{
			name:  "a quorum queue with delivery limit 3 dead-letters past its limit",
			queue: rabbittest.QueueOptions{Quorum: true, DeliveryLimit: 3}, wantDeliveries: 4, wantReason: "delivery_limit", wantCount: 1,
		},
		{
			name:  "max_receive_count 3 on a classic queue: three deliveries, counted by re-published copies, then the dead-letter queue",
			queue: rabbittest.QueueOptions{}, maxReceiveCount: 3, wantDeliveries: 3, wantReason: "rejected", wantCount: 1, wantAttemptsHdr: true,
		},
		{
			name:  "max_receive_count 2 on a quorum queue counts with x-delivery-count",
			queue: rabbittest.QueueOptions{Quorum: true}, maxReceiveCount: 2, wantDeliveries: 2, wantReason: "rejected", wantCount: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dlx, dlq := rabbittest.DeclareDLX(t)
			q := rabbittest.Name(t, "")
			tt.queue.DeadLetterExchange = dlx
			rabbittest.DeclareQueue(t, q, tt.queue)
			src := open(t, rabbitmq.Config{Queue: q, MaxReceiveCount: tt.maxReceiveCount})
			if src.info.DeadLetterARN != dlx {
				t.Errorf("DeadLetterARN %q, want %q", src.info.DeadLetterARN, dlx)
			}
			publish(t, q, amqp.Publishing{Body: []byte("poison"), Headers: amqp.Table{"kept": "yes"}})
			var counts []int
			for rabbittest.Count(t, dlq) == 0 && len(counts) < 10 {
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
				msgs, err := src.Receive(ctx, 10)
				cancel()
				if err != nil && ctx.Err() == nil {
					t.Fatal(err)
				}
				for _, m := range msgs {
					counts = append(counts, src.Attempts(m))
					if err := src.Nak(t.Context(), []*source.Message{m}, 50*time.Millisecond); err != nil {
						t.Fatal(err)
					}
				}
			}
			waitCount(t, dlq, 1)
			if len(counts) != tt.wantDeliveries {
				t.Errorf("delivered %d times (attempts %v), want %d", len(counts), counts, tt.wantDeliveries)
			}
			for i, c := range counts {
				if c != i+1 {
					t.Errorf("attempts %v, want 1, 2, …", counts)
					break
				}
			}
			dead := rabbittest.Get(t, dlq)
			x := xDeath(t, dead[0])
			if x["queue"] != q || x["reason"] != tt.wantReason || x["count"] != tt.wantCount {
				t.Errorf("x-death %v, want queue %s, reason %s, count %d", x, q, tt.wantReason, tt.wantCount)
			}
			if keys, _ := x["routing-keys"].([]any); x["exchange"] != "" || len(keys) != 1 || keys[0] != q {
				t.Errorf("x-death %v, want the default exchange and routing keys [%s]", x, q)
			}
			if string(dead[0].Body) != "poison" || dead[0].Headers["kept"] != "yes" {
				t.Errorf("dead letter %q with headers %v, want the message as published", dead[0].Body, dead[0].Headers)
			}
			if _, ok := dead[0].Headers[rabbitmq.AttemptsHeader]; ok != tt.wantAttemptsHdr {
				t.Errorf("dead letter has %s: %v, want %v", rabbitmq.AttemptsHeader, ok, tt.wantAttemptsHdr)
			}
			if n := rabbittest.Count(t, q); n != 0 {
				t.Errorf("the queue still holds %d messages", n)
			}
		})
	}
}

// Relies on: basic.reject with requeue putting the message back without
// dead-lettering, and nothing else redelivering a message held unacked.
func TestWithoutADeadLetterExchangeAFailureIsRequeuedAfterTheDelay(t *testing.T) {
	q := rabbittest.Name(t, "")
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{})
	src := open(t, rabbitmq.Config{Queue: q, WaitTime: 300 * time.Millisecond})
	if !strings.Contains(src.logs.String(), "no dead-letter exchange") {
		t.Errorf("no warning about the missing dead-letter exchange in\n%s", src.logs)
	}
	rabbittest.Publish(t, q, "failing")
	m := receive(t, src, 1, 10*time.Second)[0]
	const delay = 1500 * time.Millisecond
	failedAt := time.Now()
	if err := src.Nak(t.Context(), []*source.Message{m}, delay); err != nil {
		t.Fatal(err)
	}
	if n, err := src.Pending(t.Context()); err != nil || n != 1 {
		t.Errorf("Pending %d, %v while the message is held, want 1", n, err)
	}
	again := receive(t, src, 1, 10*time.Second)[0]
	if waited := time.Since(failedAt); waited < delay {
		t.Errorf("redelivered %s after the failure, before the delay %s", waited, delay)
	}
	if again.Body != "failing" || src.Attempts(again) != 2 {
		t.Errorf("redelivered %q with attempts %d, want the message with 2", again.Body, src.Attempts(again))
	}
	if err := src.Ack(t.Context(), []*source.Message{again}); err != nil {
		t.Fatal(err)
	}
}

// Relies on: basic.nack with requeue never dead-lettering on a classic
// queue.
func TestAGiveBackRequeuesWithoutDeadLettering(t *testing.T) {
	dlx, dlq := rabbittest.DeclareDLX(t)
	q := rabbittest.Name(t, "")
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{DeadLetterExchange: dlx})
	src := open(t, rabbitmq.Config{Queue: q, MaxReceiveCount: 1})
	rabbittest.Publish(t, q, "given back")
	for i := range 3 {
		m := receive(t, src, 1, 10*time.Second)[0]
		// A classic queue tells only that a message was delivered before.
		if got := src.Attempts(m); got != min(i+1, 2) {
			t.Errorf("delivery %d: attempts %d", i+1, got)
		}
		if !m.Record.Filterable("basicProperties") || m.Record.Filterable("eventSourceArn") {
			t.Error("record filterability is wrong")
		}
		if err := src.Nak(t.Context(), []*source.Message{m}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if n := rabbittest.Count(t, dlq); n != 0 {
		t.Errorf("%d messages dead-lettered by give-backs", n)
	}
	m := receive(t, src, 1, 10*time.Second)[0]
	if err := src.Ack(t.Context(), []*source.Message{m}); err != nil {
		t.Fatal(err)
	}
}

// Relies on: basic.nack without requeue dead-lettering (reason rejected).
func TestTermDeadLettersThroughTheQueuesExchange(t *testing.T) {
	rabbittest.ManagementURL(t) // skips without it: the source reads the queue's dead-letter exchange from the management API
	dlx, dlq := rabbittest.DeclareDLX(t)
	q := rabbittest.Name(t, "")
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{DeadLetterExchange: dlx})
	src := open(t, rabbitmq.Config{Queue: q})
	rabbittest.Publish(t, q, "bad request")
	m := receive(t, src, 1, 10*time.Second)[0]
	if err := src.Term(t.Context(), []*source.Message{m}); err != nil {
		t.Fatal(err)
	}
	waitCount(t, dlq, 1)
	if x := xDeath(t, rabbittest.Get(t, dlq)[0]); x["reason"] != "rejected" || x["queue"] != q {
		t.Errorf("x-death %v", x)
	}
	se := settleErr(t, src.Term(t.Context(), []*source.Message{m}))
	if !se.SenderFault || se.Failed[m.ReceiptHandle] == nil {
		t.Errorf("a second Term: %v", se)
	}
}

// Relies on: the broker requeueing a closed connection's unacked
// deliveries (redelivered=true) and the management API closing a
// connection (DELETE /api/connections/{name}).
func TestAConnectionClosedFromOutsideIsReconnectedAndNothingIsLost(t *testing.T) {
	rabbittest.ManagementURL(t) // skips without it: the connection is closed through the management API
	dlx, dlq := rabbittest.DeclareDLX(t)
	q := rabbittest.Name(t, "")
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{DeadLetterExchange: dlx})
	src := open(t, rabbitmq.Config{Queue: q, Prefetch: 3})
	sent := []string{"1", "2", "3", "4", "5", "6"}
	rabbittest.Publish(t, q, sent...)
	first := receive(t, src, 2, 10*time.Second)

	// Mid-receive: a receive is waiting when the connection goes.
	errs := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for {
			msgs, err := src.Receive(ctx, 10)
			if err != nil || ctx.Err() != nil {
				errs <- err
				return
			}
			first = append(first, msgs...) // delivered before the close
		}
	}()
	time.Sleep(200 * time.Millisecond)
	if n := closeConnections(t, q); n != 1 {
		t.Fatalf("closed %d connections of the source, want 1", n)
	}
	if err := <-errs; err == nil || !strings.Contains(err.Error(), "lost") {
		t.Errorf("the receive under way returned %v, want the lost connection", err)
	}

	se := settleErr(t, src.Ack(t.Context(), first))
	if !se.SenderFault || len(se.Failed) != len(first) {
		t.Errorf("acking tags of the closed channel: %v, want all %d stale", se, len(first))
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", src.logs)
		}
	})
	got := map[string]int{}
	for n := 0; n < len(sent); { // ack as they come: the prefetch is 3
		m := receive(t, src, 1, 30*time.Second)
		for _, m := range m {
			got[m.Body]++
		}
		n += len(m)
		if err := src.Ack(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range sent {
		if got[b] != 1 {
			t.Errorf("message %s received %d times after the reconnection", b, got[b])
		}
	}
	if n := rabbittest.Count(t, dlq) + rabbittest.Count(t, q); n != 0 {
		t.Errorf("%d messages left in the queue or dead-lettered", n)
	}
	if !strings.Contains(src.logs.String(), "reconnected") {
		t.Errorf("no reconnection in the logs:\n%s", src.logs)
	}
}

// Relies on: nothing of the broker's but that the management API's port
// is closed; the fallback keys then stand in for it.
func TestTheFallbackKeysStandInForAnUnreachableManagementAPI(t *testing.T) {
	dlx, dlq := rabbittest.DeclareDLX(t)
	q := rabbittest.Name(t, "")
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{DeadLetterExchange: dlx})
	src := open(t, rabbitmq.Config{Queue: q, ManagementURL: "http://127.0.0.1:1", DeadLetterExchange: dlx, DeliveryLimit: 7})
	logs := src.logs.String()
	if !strings.Contains(logs, "management API cannot be used") || !strings.Contains(logs, `"level":"WARN"`) {
		t.Errorf("no warning about the management API in\n%s", logs)
	}
	if src.info.DeadLetterARN != dlx || src.info.MaxReceiveCount != 7 {
		t.Errorf("source.Info %+v, want the fallback keys", src.info)
	}
	rabbittest.Publish(t, q, "x")
	m := receive(t, src, 1, 10*time.Second)[0]
	if err := src.Term(t.Context(), []*source.Message{m}); err != nil {
		t.Fatal(err)
	}
	waitCount(t, dlq, 1)
}

// Relies on: a passive declare of a missing queue or exchange closing the
// channel with 404 NOT_FOUND.
func TestOpenRefusesWhatIsMissing(t *testing.T) {
	existing := rabbittest.Name(t, "")
	rabbittest.DeclareQueue(t, existing, rabbittest.QueueOptions{})
	tests := []struct {
		name string
		cfg  rabbitmq.Config
		want string
	}{
		{"a missing queue", rabbitmq.Config{Queue: "pipes-no-such-queue"}, "queue pipes-no-such-queue does not exist in vhost /"},
		{"a missing dead-letter exchange", rabbitmq.Config{Queue: existing, ManagementURL: "off", DeadLetterExchange: "pipes-no-such-dlx"},
			"dead-letter exchange pipes-no-such-dlx of RabbitMQ queue " + existing + " does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.URL = rabbittest.URL(t)
			src, err := rabbitmq.New(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close(context.Background())
			_, err = src.Open(t.Context())
			if err == nil || !core.IsPermanent(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open: %v, want a permanent error saying %q", err, tt.want)
			}
		})
	}
}

// Relies on: a passive declare counting ready messages, and unacked
// deliveries staying with the consumer.
func TestPendingCountsReadyAndUnacked(t *testing.T) {
	q := rabbittest.Name(t, "")
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{})
	src := open(t, rabbitmq.Config{Queue: q, Prefetch: 2})
	rabbittest.Publish(t, q, "a", "b", "c", "d")
	pending := func(want int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			n, err := src.Pending(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if n == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("Pending %d, want %d", n, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	pending(4)
	m, err := src.Receive(t.Context(), 1)
	if err != nil || len(m) != 1 {
		t.Fatalf("Receive: %d messages, %v", len(m), err)
	}
	pending(4)
	if err := src.Ack(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	pending(3)
	for n := 0; n < 3; { // within the prefetch of 2
		got := receive(t, src, 1, 10*time.Second)
		if err := src.Ack(t.Context(), got); err != nil {
			t.Fatal(err)
		}
		n += len(got)
	}
	pending(0)
}

// Relies on: nothing of the broker's (no I/O before Open).
func TestNewChecksTheConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  rabbitmq.Config
		want string
	}{
		{"no url", rabbitmq.Config{Queue: "q"}, "no url"},
		{"an http url", rabbitmq.Config{URL: "http://h/", Queue: "q"}, `scheme is "http"`},
		{"no queue", rabbitmq.Config{URL: "amqp://h/"}, "no queue"},
		{"a prefetch too large", rabbitmq.Config{URL: "amqp://h/", Queue: "q", Prefetch: 10001}, "prefetch 10001 is outside 0..10000"},
		{"a negative max receive count", rabbitmq.Config{URL: "amqp://h/", Queue: "q", MaxReceiveCount: -1}, "max receive count -1"},
		{"a management url that is not http", rabbitmq.Config{URL: "amqp://h/", Queue: "q", ManagementURL: "ftp://h"}, "management url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := rabbitmq.New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

// Relies on: basic.nack with requeue and a closed connection both putting
// unacked messages back, without dead-lettering.
func TestCloseRequeuesWhatWasLeftUnsettled(t *testing.T) {
	dlx, dlq := rabbittest.DeclareDLX(t)
	q := rabbittest.Name(t, "")
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{Quorum: true, DeliveryLimit: 10, DeadLetterExchange: dlx})
	src, err := rabbitmq.New(rabbitmq.Config{URL: rabbittest.URL(t), Queue: q, WaitTime: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	rabbittest.Publish(t, q, "held", "forgotten", "buffered")
	got := receive(t, src, 2, 10*time.Second)[:2] // the third may stay buffered
	if err := src.Nak(t.Context(), got[:1], 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := src.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitCount(t, q, 3)
	if n := rabbittest.Count(t, dlq); n != 0 {
		t.Errorf("%d messages dead-lettered by Close", n)
	}
	if _, err := src.Receive(t.Context(), 10); err == nil {
		t.Error("Receive after Close succeeded")
	}
}

// Relies on: basic.reject with requeue putting a message back (a classic
// queue has no delivery limit to dead-letter it).
func TestPastMaxReceiveCountWithoutADeadLetterExchangeMessagesAreRequeuedNotDropped(t *testing.T) {
	q := rabbittest.Name(t, "")
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{})
	src := open(t, rabbitmq.Config{Queue: q, MaxReceiveCount: 1})
	rabbittest.Publish(t, q, "kept")
	m := receive(t, src, 1, 10*time.Second)[0]
	if err := src.Nak(t.Context(), []*source.Message{m}, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	again := receive(t, src, 1, 10*time.Second)[0]
	if again.Body != "kept" {
		t.Fatalf("received %q", again.Body)
	}
	if !strings.Contains(src.logs.String(), "no dead-letter exchange: they are requeued") {
		t.Errorf("no error logged:\n%s", src.logs)
	}
	if err := src.Ack(t.Context(), []*source.Message{again}); err != nil {
		t.Fatal(err)
	}
}

// A failure waits for its retry in a delay queue; a connection closed
// while the copy is on its way (or just after) loses nothing: either the
// copy was confirmed and comes back from the delay queue, or the original
// was still unacked and the broker redelivers it (both: a duplicate).
//
// Relies on: the broker requeueing the unacked deliveries of a closed
// connection, publisher confirms, and a delay queue's expired messages
// dead-lettered back through the default exchange.
func TestAMessageWaitingForItsRetryWhenTheConnectionGoesIsRedeliveredNotLost(t *testing.T) {
	rabbittest.ManagementURL(t) // skips without it: the connection is closed through the management API
	q := rabbittest.Name(t, "")
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{})
	src := open(t, rabbitmq.Config{Queue: q})
	rabbittest.Publish(t, q, "held")
	m := receive(t, src, 1, 10*time.Second)[0]
	if err := src.Nak(t.Context(), []*source.Message{m}, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	closeConnections(t, q)
	again := receive(t, src, 1, 30*time.Second)
	time.Sleep(3 * time.Second) // a duplicate, if any, comes back too
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	more, _ := src.Receive(ctx, 10)
	cancel()
	again = append(again, more...)
	for _, a := range again {
		// 2, or 3 when the reconnected connection was closed too (the
		// helper closes every connection of the queue it lists).
		if a.Body != "held" || src.Attempts(a) < 2 {
			t.Errorf("redelivered %q with attempts %d, want the message with 2 or more", a.Body, src.Attempts(a))
		}
	}
	_ = src.Ack(t.Context(), again) // a stale tag: the broker redelivers it, nothing lost
}

// Relies on: the broker cancelling the consumers of a deleted queue
// (basic.cancel) and a passive declare of it failing with 404.
func TestADeletedQueueMakesReceiveFailUntilItIsBack(t *testing.T) {
	q := rabbittest.Name(t, "")
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{})
	src := open(t, rabbitmq.Config{Queue: q})
	ch := rabbittest.Channel(t)
	if _, err := ch.QueueDelete(q, false, false, false); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := src.Receive(t.Context(), 10)
		if err != nil && strings.Contains(err.Error(), "does not exist") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Receive still says %v, want that the queue does not exist", err)
		}
	}
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{})
	rabbittest.Publish(t, q, "back")
	if m := receive(t, src, 1, 60*time.Second); m[0].Body != "back" {
		t.Errorf("received %q", m[0].Body)
	} else if err := src.Ack(t.Context(), m); err != nil {
		t.Fatal(err)
	}
}

// Relies on: the broker delivering each message to one consumer at a time.
func TestConcurrentReceivesAndSettlesLoseAndDuplicateNothing(t *testing.T) {
	q := rabbittest.Name(t, "")
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{})
	src := open(t, rabbitmq.Config{Queue: q, Prefetch: 20, WaitTime: 500 * time.Millisecond})
	const n = 200
	bodies := make([]string, n)
	for i := range bodies {
		bodies[i] = fmt.Sprint(i)
	}
	rabbittest.Publish(t, q, bodies...)
	var mu sync.Mutex
	seen := map[string]int{}
	total := 0
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for {
				mu.Lock()
				done := total >= n
				mu.Unlock()
				if done {
					return
				}
				msgs, err := src.Receive(t.Context(), 1+w*3)
				if err != nil {
					t.Error(err)
					return
				}
				var ack, back []*source.Message
				for i, m := range msgs {
					if m.ReceiveCount() == 1 && i%3 == 0 {
						back = append(back, m) // first deliveries, now and then, go back once
						continue
					}
					ack = append(ack, m)
				}
				if err := src.Nak(t.Context(), back, 0); err != nil {
					t.Error(err)
				}
				if err := src.Ack(t.Context(), ack); err != nil {
					t.Error(err)
				}
				mu.Lock()
				for _, m := range ack {
					seen[m.Body]++
				}
				total += len(ack)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, b := range bodies {
		if seen[b] != 1 {
			t.Errorf("message %s acked %d times", b, seen[b])
		}
	}
}

// Relies on: the management API showing a policy's keys in the queue's
// effective_policy_definition, and the broker dead-lettering by a policy's
// dead-letter-exchange.
func TestAPolicysDeadLetterExchangeAndDeliveryLimitAreRead(t *testing.T) {
	rabbittest.ManagementURL(t) // skips without it: the policy is set and read through the management API
	dlx, dlq := rabbittest.DeclareDLX(t)
	q := rabbittest.Name(t, "")
	policy := "pipes-test-" + q
	def := map[string]any{"pattern": "^" + regexp.QuoteMeta(q) + "$", "apply-to": "queues", "priority": 100,
		"definition": map[string]any{"dead-letter-exchange": dlx, "delivery-limit": 6}}
	if code := management(t, http.MethodPut, "/api/policies/%2F/"+url.PathEscape(policy), def, nil); code >= 300 {
		t.Fatalf("creating policy: HTTP %d", code)
	}
	t.Cleanup(func() { management(t, http.MethodDelete, "/api/policies/%2F/"+url.PathEscape(policy), nil, nil) })
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{Quorum: true})
	deadline := time.Now().Add(15 * time.Second)
	for { // the policy applies asynchronously
		var got struct {
			Policy map[string]any `json:"effective_policy_definition"`
		}
		management(t, http.MethodGet, "/api/queues/%2F/"+url.PathEscape(q), nil, &got)
		if got.Policy["dead-letter-exchange"] == dlx {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the policy does not apply to %s: %v", q, got.Policy)
		}
		time.Sleep(200 * time.Millisecond)
	}
	src := open(t, rabbitmq.Config{Queue: q})
	if src.info.DeadLetterARN != dlx || src.info.MaxReceiveCount != 6 {
		t.Fatalf("source.Info %+v, want the policy's exchange %s and limit 6", src.info, dlx)
	}
	rabbittest.Publish(t, q, "by policy")
	m := receive(t, src, 1, 10*time.Second)
	if err := src.Term(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	waitCount(t, dlq, 1)
}
