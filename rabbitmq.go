package pipes

import (
	"context"

	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/pipe"
	rabbittarget "github.com/pipesproject/pipes/target/rabbitmq"
)

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
