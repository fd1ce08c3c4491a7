package rabbit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/filter"
	"github.com/pipesproject/pipes/internal/rabbittest"
	"github.com/pipesproject/pipes/redrive"
	"github.com/pipesproject/pipes/redrive/rabbit"
)

// deadLetters makes a source queue with a dead-letter exchange and queue,
// and dead-letters the bodies through it (basic.nack requeue=false), so
// the dead-letter queue holds them with the broker's x-death history, in
// order; each has message-id m-<i>, a "tenant" header and the context
// headers of pipes' dead-letter stage.
func deadLetters(t *testing.T, bodies ...string) (source, dlx, dlq string) {
	t.Helper()
	dlx, dlq = rabbittest.DeclareDLX(t)
	source = rabbittest.Name(t, "-src")
	rabbittest.DeclareQueue(t, source, rabbittest.QueueOptions{DeadLetterExchange: dlx})
	ch := rabbittest.Channel(t)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	for i, b := range bodies {
		dc, err := ch.PublishWithDeferredConfirmWithContext(t.Context(), "", source, true, false, amqp.Publishing{
			MessageId: fmt.Sprintf("m-%d", i), ContentType: "application/json", DeliveryMode: amqp.Persistent,
			Headers: amqp.Table{"tenant": "acme", "ErrorCode": "ClientError", "pipes-pipe": "orders", "x-pipes-attempts": int64(3)},
			Body:    []byte(b),
		})
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := dc.WaitContext(t.Context()); !ok || err != nil {
			t.Fatalf("publishing: not confirmed (%v)", err)
		}
	}
	for range bodies {
		d, ok, err := ch.Get(source, false)
		if err != nil || !ok {
			t.Fatalf("getting from %s: %v %v", source, ok, err)
		}
		if err := d.Nack(false, false); err != nil {
			t.Fatal(err)
		}
	}
	waitCount(t, dlq, len(bodies))
	return source, dlx, dlq
}

func waitCount(t *testing.T, queue string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for rabbittest.Count(t, queue) != n {
		if time.Now().After(deadline) {
			t.Fatalf("queue %s has %d messages, want %d", queue, rabbittest.Count(t, queue), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func dial(t *testing.T) *rabbit.Broker {
	t.Helper()
	b, err := rabbit.Dial(t.Context(), rabbit.Config{URL: rabbittest.URL(t), ManagementURL: rabbittest.ManagementURL(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func bodies(ds []amqp.Delivery) string {
	var out []string
	for _, d := range ds {
		out = append(out, string(d.Body))
	}
	return strings.Join(out, " ")
}

// Relies on: basic.get without ack, then basic.nack requeue (multiple),
// putting classic-queue messages back in their places.
func TestInspectShowsTheMessagesWithTheirDeathAndLeavesThemInOrder(t *testing.T) {
	_, _, dlq := deadLetters(t, `{"n":1}`, `{"n":2}`, `{"n":3}`)
	b := dial(t)
	for _, max := range []int{2, 10} {
		msgs, err := b.Inspect(t.Context(), dlq, max)
		if err != nil {
			t.Fatal(err)
		}
		if want := min(max, 3); len(msgs) != want {
			t.Fatalf("max %d: %d records, want %d", max, len(msgs), want)
		}
		for i, m := range msgs {
			j, _ := m.JSON()
			var rec struct {
				MessageID       string `json:"messageId"`
				EventSource     string `json:"eventSource"`
				Data            []byte `json:"data"`
				BasicProperties struct {
					Headers map[string]json.RawMessage `json:"headers"`
				} `json:"basicProperties"`
			}
			if err := json.Unmarshal(j, &rec); err != nil {
				t.Fatal(err)
			}
			if rec.MessageID != fmt.Sprintf("m-%d", i) || rec.EventSource != "aws:rmq" || string(rec.Data) != fmt.Sprintf(`{"n":%d}`, i+1) {
				t.Errorf("record %d: %s", i, j)
			}
			if x := string(rec.BasicProperties.Headers["x-death"]); !strings.Contains(x, `"reason":{"bytes":`) || !strings.Contains(x, `"count":1`) {
				t.Errorf("record %d: x-death shown as %s", i, x)
			}
		}
		if n := rabbittest.Count(t, dlq); n != 3 {
			t.Fatalf("after inspecting, the dead-letter queue has %d messages, want 3", n)
		}
	}
	if got := bodies(rabbittest.Get(t, dlq)); got != `{"n":1} {"n":2} {"n":3}` {
		t.Errorf("after inspecting, the dead-letter queue holds %s, want its order kept", got)
	}
}

func TestRedriveMovesCleanedCopiesToTheSourceQueue(t *testing.T) {
	source, _, dlq := deadLetters(t, `{"n":1}`, `{"n":2}`)
	b := dial(t)
	var entries []redrive.Entry
	sum, err := b.Redrive(t.Context(), rabbit.Options{From: dlq, To: source, Rate: 100, Report: func(e redrive.Entry) { entries = append(entries, e) }})
	if err != nil {
		t.Fatal(err)
	}
	if sum != (redrive.Summary{Moved: 2}) || len(entries) != 2 || entries[0].MessageID != "m-0" || entries[1].Outcome != redrive.Moved {
		t.Fatalf("summary %+v, entries %+v", sum, entries)
	}
	if n := rabbittest.Count(t, dlq); n != 0 {
		t.Errorf("the dead-letter queue has %d messages left, want 0", n)
	}
	got := rabbittest.Get(t, source)
	if bodies(got) != `{"n":1} {"n":2}` {
		t.Fatalf("the source queue holds %s", bodies(got))
	}
	for i, d := range got {
		for k := range d.Headers {
			if k == "x-death" || strings.HasPrefix(k, "x-first-death-") || strings.HasPrefix(k, "x-last-death-") || k == "x-pipes-attempts" || k == "ErrorCode" || k == "pipes-pipe" {
				t.Errorf("message %d kept header %s", i, k)
			}
		}
		at, _ := d.Headers[redrive.AttrRedrivenAt].(string)
		if ts, err := time.Parse(time.RFC3339Nano, at); err != nil || time.Since(ts) > time.Minute {
			t.Errorf("message %d: pipes-redriven-at = %q", i, at)
		}
		if d.Headers["tenant"] != "acme" || d.MessageId != fmt.Sprintf("m-%d", i) || d.ContentType != "application/json" || d.DeliveryMode != amqp.Persistent {
			t.Errorf("message %d lost its headers or properties: %+v", i, d)
		}
	}
}

func TestRedriveToAnUnroutableQueueLeavesEveryMessageInTheDLQ(t *testing.T) {
	_, _, dlq := deadLetters(t, `{"n":1}`, `{"n":2}`)
	b := dial(t)
	var entries []redrive.Entry
	sum, err := b.Redrive(t.Context(), rabbit.Options{From: dlq, To: rabbittest.Name(t, "-missing"), Report: func(e redrive.Entry) { entries = append(entries, e) }})
	if err != nil {
		t.Fatal(err)
	}
	if sum != (redrive.Summary{Failed: 2}) || len(entries) != 2 || !strings.Contains(entries[0].Error, "unroutable") {
		t.Fatalf("summary %+v, entries %+v", sum, entries)
	}
	if got := bodies(rabbittest.Get(t, dlq)); got != `{"n":1} {"n":2}` {
		t.Errorf("the dead-letter queue holds %s, want both, in order", got)
	}
}

func TestRedriveFiltersDryRunsAndStopsAtMax(t *testing.T) {
	all := []string{`{"kind":"order","n":1}`, `{"kind":"refund","n":2}`, `{"kind":"order","n":3}`, `{"kind":"order","n":4}`}
	orders, err := filter.CompilePattern(`{"data":{"kind":["order"]}}`)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		opt       rabbit.Options
		want      redrive.Summary
		moved     string
		left      string
		outcomes  string
		noHeaders bool
	}{
		{"a filter on data moves the matching messages and leaves the others", rabbit.Options{Filter: orders},
			redrive.Summary{Moved: 3, Skipped: 1}, `{"kind":"order","n":1} {"kind":"order","n":3} {"kind":"order","n":4}`, `{"kind":"refund","n":2}`, "moved skipped moved moved", false},
		{"a dry run moves nothing and shows the cleaned headers", rabbit.Options{DryRun: true},
			redrive.Summary{WouldMove: 4}, "", strings.Join(all, " "), "would_move would_move would_move would_move", true},
		{"max counts the moved messages, not the skipped ones", rabbit.Options{Filter: orders, Max: 2},
			redrive.Summary{Moved: 2, Skipped: 1}, `{"kind":"order","n":1} {"kind":"order","n":3}`, `{"kind":"refund","n":2} {"kind":"order","n":4}`, "moved skipped moved", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			source, _, dlq := deadLetters(t, all...)
			b := dial(t)
			var outcomes []string
			opt := tt.opt
			opt.From, opt.To = dlq, source
			opt.Report = func(e redrive.Entry) {
				outcomes = append(outcomes, string(e.Outcome))
				if e.Outcome == redrive.WouldMove {
					if e.Headers["x-death"] != nil || e.Headers["ErrorCode"] != nil || e.Headers["tenant"] == nil || e.Headers[redrive.AttrRedrivenAt] == nil || e.Body == "" {
						t.Errorf("dry-run entry %+v, want the cleaned headers and the body", e)
					}
				}
			}
			sum, err := b.Redrive(t.Context(), opt)
			if err != nil {
				t.Fatal(err)
			}
			if sum != tt.want || strings.Join(outcomes, " ") != tt.outcomes {
				t.Errorf("summary %+v, outcomes %v; want %+v, %s", sum, outcomes, tt.want, tt.outcomes)
			}
			if got := bodies(rabbittest.Get(t, source)); got != tt.moved {
				t.Errorf("moved %s, want %s", got, tt.moved)
			}
			if got := bodies(rabbittest.Get(t, dlq)); got != tt.left {
				t.Errorf("left %s, want %s (in order)", got, tt.left)
			}
		})
	}
}

func TestRedriveDoesNotMoveWhatComesBackDuringTheRun(t *testing.T) {
	// The destination dead-letters straight back: every copy returns to
	// the dead-letter queue at once (x-message-ttl 0 on a queue whose
	// dead-letter exchange feeds the dead-letter queue).
	_, dlx, dlq := deadLetters(t, `{"n":1}`, `{"n":2}`)
	back := rabbittest.Name(t, "-back")
	rabbittest.DeclareQueue(t, back, rabbittest.QueueOptions{DeadLetterExchange: dlx, Args: amqp.Table{"x-message-ttl": int32(0)}})
	b := dial(t)
	sum, err := b.Redrive(t.Context(), rabbit.Options{From: dlq, To: back})
	if err != nil {
		t.Fatal(err)
	}
	if sum != (redrive.Summary{Moved: 2}) {
		t.Errorf("summary %+v, want the 2 messages moved once each", sum)
	}
	waitCount(t, dlq, 2)
}

func TestRedriveRefusesBadOptions(t *testing.T) {
	b := dial(t)
	for _, opt := range []rabbit.Options{{From: "a"}, {From: "a", To: "a"}, {From: "a", To: "b", Rate: -1}} {
		if _, err := b.Redrive(t.Context(), opt); err == nil {
			t.Errorf("options %+v: no error", opt)
		}
	}
	if _, err := b.Redrive(t.Context(), rabbit.Options{From: rabbittest.Name(t, "-none"), To: "b"}); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("a missing dead-letter queue: %v", err)
	}
}

func TestFindDLQ(t *testing.T) {
	mgmt := rabbittest.ManagementURL(t)
	source, _, dlq := deadLetters(t)
	other := rabbittest.Name(t, "-other")
	rabbittest.DeclareQueue(t, other, rabbittest.QueueOptions{})
	ch := rabbittest.Channel(t)
	twoX := rabbittest.Name(t, "-twox")
	if err := ch.ExchangeDeclare(twoX, "fanout", false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{dlq, other} {
		if err := ch.QueueBind(q, "", twoX, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	twoSrc := rabbittest.Name(t, "-twosrc")
	rabbittest.DeclareQueue(t, twoSrc, rabbittest.QueueOptions{DeadLetterExchange: twoX})
	lone := rabbittest.Name(t, "-lone")
	rabbittest.DeclareQueue(t, lone, rabbittest.QueueOptions{})
	byKey := rabbittest.Name(t, "-bykey")
	rabbittest.DeclareQueue(t, byKey, rabbittest.QueueOptions{Args: amqp.Table{"x-dead-letter-exchange": ""}, DeadLetterRoutingKey: dlq})

	named := rabbit.Fallback{Exchange: "my-dlx", Set: true}
	byDefault := rabbit.Fallback{Exchange: "", RoutingKey: dlq, Set: true}
	tests := []struct {
		name     string
		mgmt     string
		queue    string
		fallback rabbit.Fallback
		want     string
		wantErr  []string
	}{
		{"the one queue bound to the dead-letter exchange", mgmt, source, rabbit.Fallback{}, dlq, nil},
		{"the default exchange with a dead-letter routing key names the queue", mgmt, byKey, rabbit.Fallback{}, dlq, nil},
		{"the API wins over the fallback keys", mgmt, source, rabbit.Fallback{Exchange: "", RoutingKey: other, Set: true}, dlq, nil},
		{"two queues bound are both named", mgmt, twoSrc, rabbit.Fallback{}, "", []string{"2 queues are bound", dlq, other}},
		{"a queue without a dead-letter exchange says so", mgmt, lone, rabbit.Fallback{}, "", []string{"has no dead-letter exchange"}},
		{"the management API off names the fallback exchange", "off", source, named, "", []string{"management API is off", "my-dlx"}},
		{"the management API off with the default exchange and a routing key names its queue", "off", byKey, byDefault, dlq, nil},
		{"the management API off with the default exchange and no routing key asks for one", "off", byKey, rabbit.Fallback{Set: true}, "", []string{"dead_letter_routing_key"}},
		{"the management API off without fallback keys says they can name it", "off", source, rabbit.Fallback{}, "", []string{"management API is off", "dead_letter_routing_key"}},
		{"the management API unreachable says so", "http://127.0.0.1:1", source, rabbit.Fallback{}, "", []string{"management API at http://127.0.0.1:1"}},
		{"the management API unreachable with the default exchange and a routing key names its queue", "http://127.0.0.1:1", byKey, byDefault, dlq, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := rabbit.Dial(t.Context(), rabbit.Config{URL: rabbittest.URL(t), ManagementURL: tt.mgmt})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			got, err := b.FindDLQ(t.Context(), tt.queue, tt.fallback)
			if tt.wantErr == nil {
				if err != nil || got.Queue != tt.want {
					t.Fatalf("FindDLQ = %+v, %v; want %s", got, err, tt.want)
				}
				return
			}
			if !errors.Is(err, rabbit.ErrNoDLQ) {
				t.Fatalf("FindDLQ = %+v, %v; want an ErrNoDLQ", got, err)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestDialErrorsNameNoPassword(t *testing.T) {
	host := strings.TrimPrefix(strings.TrimSuffix(rabbittest.URL(t), "/"), "amqp://guest:guest@")
	for _, u := range []string{
		"amqp://guest:s3cr3t-pw@" + host + "/",
		"amqp://guest:s3cr3t-pw@" + host + ":notaport/",
		"amqp://guest:s3cr3t-pw@127.0.0.1:1/",
		"http://guest:s3cr3t-pw@" + host + "/",
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		b, err := rabbit.Dial(ctx, rabbit.Config{URL: u})
		cancel()
		if err == nil {
			b.Close()
			t.Fatalf("%s: no error", strings.ReplaceAll(u, "s3cr3t-pw", "xxxxx"))
		}
		if strings.Contains(err.Error(), "s3cr3t-pw") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
}
