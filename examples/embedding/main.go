// Command embedding runs a pipe inside a Go program: the pipeline is read
// from YAML, the target is a Go callback registered under a name, and the
// source is an in-process memory queue the program fills itself.
//
//	go run ./examples/embedding
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source/memory"
)

const pipeline = `
name: invoices
source:
  type: memory
  queue_name: invoices
  wait_time: 100ms
  visibility_timeout: 1s
  redrive_policy: {max_receive_count: 2, dead_letter_queue: invoices-dlq}
filter:
  patterns:
    - {"body": {"total": [{"numeric": [">", 0]}]}}
target:
  type: func
  func: book
  input_template: '{"invoice": "<$.body.id>", "total": <$.body.total>}'
`

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "embedding:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	reg := pipes.NewRegistry()
	// The target: a Go function with the same partial-failure answer as any
	// target. Invoices with a total above 1000 are refused; they are retried
	// and then dead-lettered by the queue's redrive policy.
	reg.MustRegisterFunc("book", pipe.TargetFunc(func(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
		var res pipe.Result
		for _, ev := range events {
			var in struct {
				Invoice string  `json:"invoice"`
				Total   float64 `json:"total"`
			}
			if err := json.Unmarshal(ev.RecordJSON, &in); err != nil {
				res.Failures = append(res.Failures, pipe.ItemFailure{ID: ev.ID(), Err: err})
				continue
			}
			if in.Total > 1000 {
				res.Failures = append(res.Failures, pipe.ItemFailure{ID: ev.ID(), Err: fmt.Errorf("invoice %s needs approval", in.Invoice)})
				continue
			}
			fmt.Printf("booked %s: %.2f\n", in.Invoice, in.Total)
		}
		return res, nil
	}))

	specs, err := config.Loader{}.Parse("embedded.yaml", []byte(pipeline))
	if err != nil {
		return err
	}
	broker := memory.NewBroker()
	built, err := reg.Build(ctx, specs, pipes.Env{
		Broker: broker,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Drain:  true, // stop once the queue is empty: a batch job
	})
	if err != nil {
		return err
	}
	q, _ := broker.Lookup("invoices")
	for i, total := range []float64{120, 0, 5400, 80.5} {
		body := fmt.Sprintf(`{"id":"inv-%d","total":%g}`, i+1, total)
		if _, err := q.Send(ctx, memory.SendInput{Body: body}); err != nil {
			return err
		}
	}
	if err := pipe.NewRunner(built...).Run(ctx); err != nil {
		return err
	}
	dlq, _ := broker.Lookup("invoices-dlq")
	for _, m := range dlq.Snapshot() {
		fmt.Println("needs approval:", strings.TrimSpace(m.Body))
	}
	return nil
}
