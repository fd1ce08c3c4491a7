package rabbitmq_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/internal/syncbuf"
	"github.com/pipesproject/pipes/source"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/internal/rabbittest"
	"github.com/pipesproject/pipes/source/rabbitmq"
)

// logs is a log or output destination the test reads while the code under test writes it.
type logs = syncbuf.Buffer

// opened is a source under test, opened, with its logs.
type opened struct {
	*rabbitmq.Source
	info source.Info
	logs *logs
}

// open makes a source on cfg (URL defaulted to the test broker), opens it
// and closes it when the test ends.
func open(t *testing.T, cfg rabbitmq.Config) *opened {
	t.Helper()
	if cfg.URL == "" {
		cfg.URL = rabbittest.URL(t)
	}
	if cfg.WaitTime == 0 {
		cfg.WaitTime = time.Second
	}
	l := &logs{}
	cfg.Logger = slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
	src, err := rabbitmq.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	info, err := src.Open(t.Context())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := src.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &opened{Source: src, info: info, logs: l}
}

// receive receives until n messages came or within passes.
func receive(t *testing.T, src source.Source, n int, within time.Duration) []*source.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	var got []*source.Message
	for len(got) < n {
		msgs, err := src.Receive(ctx, 10)
		if ctx.Err() != nil {
			t.Fatalf("received %d of %d messages within %s", len(got), n, within)
		}
		if err != nil {
			t.Logf("Receive: %v", err) // a reconnection under way
			time.Sleep(100 * time.Millisecond)
			continue
		}
		got = append(got, msgs...)
	}
	return got
}

// publish publishes one message with the given properties.
func publish(t *testing.T, queue string, p amqp.Publishing) {
	t.Helper()
	ch := rabbittest.Channel(t)
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(t.Context(), "", queue, true, false, p)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := dc.WaitContext(t.Context()); !ok || err != nil {
		t.Fatalf("publish not confirmed: %v", err)
	}
}

// management calls the management API as guest and decodes its JSON answer
// into out (when not nil).
func management(t *testing.T, method, path string, body, out any) int {
	t.Helper()
	return rabbittest.Management(t, method, path, body, out)
}

// closeConnections closes, through the management API, the connections
// whose client-provided name contains part (the source names its
// connection after its queue), and returns how many it closed. It waits up
// to 10 s for the broker to list them.
func closeConnections(t *testing.T, part string) int {
	t.Helper()
	return rabbittest.CloseConnections(t, func(name string) bool { return strings.Contains(name, part) })
}

// settleErr asserts err is a *pipe.SettleError.
func settleErr(t *testing.T, err error) *core.SettleError {
	t.Helper()
	var se *core.SettleError
	if !errors.As(err, &se) {
		t.Fatalf("got %v, want a *pipe.SettleError", err)
	}
	return se
}

// xDeath is the first x-death entry of a delivery.
func xDeath(t *testing.T, d amqp.Delivery) amqp.Table {
	t.Helper()
	list, _ := d.Headers["x-death"].([]any)
	if len(list) == 0 {
		t.Fatalf("dead letter %q has no x-death header: %v", d.Body, d.Headers)
	}
	return list[0].(amqp.Table)
}

// waitCount waits up to 10 s for the queue to hold n ready messages.
func waitCount(t *testing.T, queue string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for rabbittest.Count(t, queue) != n {
		if time.Now().After(deadline) {
			t.Fatalf("queue %s holds %d messages, want %d", queue, rabbittest.Count(t, queue), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
