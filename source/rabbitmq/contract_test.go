package rabbitmq_test

import (
	"testing"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/internal/rabbittest"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/source/rabbitmq"
	"github.com/pipesproject/pipes/source/sourcetest"
)

// The RabbitMQ source passes the contract suite every source runs, on the
// machine's broker. Its records are not SQS-shaped, and its deliveries are
// not leases (a message stays with the consumer until it is settled), so
// the visibility-expiry check is skipped; a Nak with a delay settles the
// receipt (the message waits in a delay queue).
func TestSourceContract(t *testing.T) {
	url := rabbittest.URL(t)
	sourcetest.Run(t, sourcetest.Harness{
		EventSource:  core.EventSourceRabbitMQ,
		NotSQSShaped: true,
		NoLeases:     true,
		// A failure waits in a delay queue, its original acked.
		DelayedNakSettles: true,
		New: func(t *testing.T, opts sourcetest.QueueOptions) (source.Source, func(t *testing.T, bodies ...string)) {
			q := rabbittest.Name(t, "")
			rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{})
			src, err := rabbitmq.New(rabbitmq.Config{URL: url, Queue: q, WaitTime: opts.WaitTime})
			if err != nil {
				t.Fatal(err)
			}
			return src, func(t *testing.T, bodies ...string) { rabbittest.Publish(t, q, bodies...) }
		},
	})
}
