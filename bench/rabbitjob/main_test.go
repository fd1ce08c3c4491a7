package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/internal/rabbittest"
	"github.com/pipesproject/pipes/source/rabbitmq"
)

// pipesRecord is the record pipes sends for d read from queue, decoded.
func pipesRecord(t *testing.T, d amqp.Delivery, queue string) any {
	t.Helper()
	uri, err := amqp.ParseURI(rabbittest.DefaultURL)
	if err != nil {
		t.Fatal(err)
	}
	data, err := rabbitmq.Record(d, queue, uri.Vhost, rabbitmq.ARN(uri, queue)).JSON()
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// decoded is v through JSON and back, as a target reads it.
func decoded(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestTheRecordIsTheOnePipesSends(t *testing.T) {
	ts := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, tc := range []struct {
		name string
		d    amqp.Delivery
	}{
		{name: "the bench's message", d: amqp.Delivery{MessageId: "m-1", ContentType: "application/json", DeliveryMode: 2, Timestamp: ts, Body: []byte(`{"n":1}`)}},
		{name: "every property", d: amqp.Delivery{MessageId: "m-2", ContentType: "text/plain", ContentEncoding: "gzip", DeliveryMode: 1, Priority: 3,
			CorrelationId: "c", ReplyTo: "r", Expiration: "60000", Type: "t", UserId: "guest", AppId: "a", Redelivered: true, Body: []byte("x")}},
		{name: "string, number and table headers", d: amqp.Delivery{MessageId: "m-3", Body: []byte("y"),
			Headers: amqp.Table{"s": "ab", "n": int32(7), "b": true, "t": amqp.Table{"in": "c"}, "l": []any{"d", int64(1)}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			uri, _ := amqp.ParseURI(rabbittest.DefaultURL)
			k := &consumer{arn: rabbitmq.ARN(uri, "orders"), key: "orders::" + uri.Vhost}
			got, want := decoded(t, k.record(&tc.d)), pipesRecord(t, tc.d, "orders")
			if !reflect.DeepEqual(got, want) {
				t.Errorf("record\n%v\nwant pipes'\n%v", got, want)
			}
		})
	}
}

// collector is an HTTP target that keeps the items of the JSON arrays it
// is posted.
type collector struct {
	mu      sync.Mutex
	items   []map[string]any
	batches int
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	var items []map[string]any
	if err := json.Unmarshal(data, &items); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.items = append(c.items, items...)
	c.batches++
	c.mu.Unlock()
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}

func TestTheConsumerDrainsAQueueInBatchesAndAcksThem(t *testing.T) {
	for _, channels := range []bool{false, true} {
		t.Run(fmt.Sprintf("channels %v", channels), func(t *testing.T) {
			url := rabbittest.URL(t)
			queue := rabbittest.Name(t, "")
			rabbittest.DeclareQueue(t, queue, rabbittest.QueueOptions{})
			ch := rabbittest.Channel(t)
			const n = 57
			ts := time.Now().UTC().Truncate(time.Second)
			for i := range n {
				err := ch.PublishWithContext(context.Background(), "", queue, false, false, amqp.Publishing{
					MessageId: fmt.Sprintf("m-%d", i), ContentType: "application/json", DeliveryMode: amqp.Persistent,
					Timestamp: ts, Body: fmt.Appendf(nil, `{"n":%d}`, i),
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			col := &collector{}
			srv := httptest.NewServer(col)
			defer srv.Close()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- consume(ctx, config{url: url, queue: queue, target: srv.URL, concurrency: 4, batch: 10, channels: channels},
					slog.New(slog.NewTextHandler(io.Discard, nil)))
			}()
			deadline := time.Now().Add(30 * time.Second)
			for col.count() < n && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			// Acks have no answer: give the last ones a moment to arrive.
			for time.Now().Before(deadline) {
				q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
				if err != nil {
					t.Fatal(err)
				}
				if q.Messages == 0 {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("consume: %v", err)
			}
			if got := col.count(); got != n {
				t.Fatalf("the target got %d items, want %d", got, n)
			}
			if col.batches < n/10 || col.batches > n {
				t.Errorf("%d batches for %d messages", col.batches, n)
			}
			// Everything was acked: nothing comes back once the consumer is gone.
			time.Sleep(200 * time.Millisecond)
			q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			if q.Messages != 0 {
				t.Errorf("%d messages left in the queue after the drain", q.Messages)
			}
			seen := map[string]bool{}
			for _, it := range col.items {
				id, _ := it["messageId"].(string)
				seen[id] = true
				if it["eventSource"] != "aws:rmq" || !strings.HasSuffix(it["eventSourceArn"].(string), "/"+queue) {
					t.Errorf("item %s: %v", id, it)
				}
			}
			if len(seen) != n {
				t.Errorf("%d distinct ids, want %d", len(seen), n)
			}
			// One item, field by field, against pipes' record of the same message.
			var i int
			_, _ = fmt.Sscanf(col.items[0]["messageId"].(string), "m-%d", &i)
			want := pipesRecord(t, amqp.Delivery{MessageId: fmt.Sprintf("m-%d", i), ContentType: "application/json", DeliveryMode: 2,
				Timestamp: ts, Body: fmt.Appendf(nil, `{"n":%d}`, i)}, queue)
			if got := decoded(t, col.items[0]); !reflect.DeepEqual(got, want) {
				t.Errorf("posted record\n%v\nwant pipes'\n%v", got, want)
			}
		})
	}
}
