package pipes

import (
	"context"

	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
	rabbitsource "github.com/pipesproject/pipes/source/rabbitmq"
	rabbittarget "github.com/pipesproject/pipes/target/rabbitmq"
)

// newRabbitSource builds a `type: rabbitmq` source of pipe s. It does no
// network I/O: the pipe opens it.
func newRabbitSource(_ context.Context, s config.Pipe, env *Env) (source.Source, error) {
	src := s.Source
	return rabbitsource.New(rabbitsource.Config{
		URL: src.URL, Queue: src.Queue, Prefetch: src.Prefetch,
		BatchSize: src.BatchSize, MaxConcurrency: src.MaxConcurrency,
		MaxReceiveCount: src.MaxReceiveCount, ManagementURL: src.ManagementURL,
		DeadLetterExchange: src.DeadLetterExchange, DeadLetterRoutingKey: src.DeadLetterRoutingKey,
		DeliveryLimit: src.DeliveryLimit,
		Logger:        env.Logger.With("pipe", s.Name),
		URLAt:         src.EndpointPos.String(), QueueAt: src.QueuePos.String(),
	})
}

// newRabbitTarget builds a `type: rabbitmq` target (or dead_letter target)
// of pipe s. It does no network I/O.
func newRabbitTarget(_ context.Context, s config.Pipe, env *Env) (pipe.Target, error) {
	return rabbitTargetOf(s, s.Target, env)
}

func rabbitTargetOf(s config.Pipe, t config.Target, env *Env) (pipe.Target, error) {
	return rabbittarget.New(rabbittarget.Config{
		URL: t.URL, Exchange: t.Exchange, RoutingKey: t.RoutingKey, Headers: t.Headers,
		Persistent: t.Persistent, Mandatory: t.Mandatory, Timeout: t.Timeout,
		Logger: env.Logger.With("pipe", s.Name), PipeName: s.Name,
	})
}
