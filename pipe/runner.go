package pipe

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"
)

// Runner runs many pipes in one process until they stop. It is what
// `pipes run` drives; embedders may use it too.
type Runner struct {
	pipes []*Pipe
}

// NewRunner makes a runner of the given pipes.
func NewRunner(pipes ...*Pipe) *Runner { return &Runner{pipes: pipes} }

// Pipes are the runner's pipes.
func (r *Runner) Pipes() []*Pipe { return r.pipes }

// Run runs every pipe until ctx is done (each then drains within its
// shutdown timeout) or, for pipes in drain mode, until their sources are
// empty. It blocks until all pipes have stopped. If a pipe cannot open its
// source for good, the others are stopped too and the error is returned.
func (r *Runner) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	for _, p := range r.pipes {
		g.Go(func() error {
			if err := p.Run(ctx); err != nil {
				return fmt.Errorf("pipe %s: %w", p.Name(), err)
			}
			return nil
		})
	}
	return g.Wait()
}

// Abort cuts the stop of every pipe short (see Pipe.Abort): what a second
// SIGTERM or Ctrl-C does. It does not block.
func (r *Runner) Abort() {
	for _, p := range r.pipes {
		p.Abort()
	}
}

// Ready reports whether every pipe is polling (for readiness probes: false
// while starting and while draining).
func (r *Runner) Ready() bool {
	for _, p := range r.pipes {
		if !p.Ready() {
			return false
		}
	}
	return len(r.pipes) > 0
}
