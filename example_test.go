package pipes_test

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source/memory"
)

// A Go program embeds pipes: it registers a Go function as a target, reads
// the pipeline from YAML and runs it until the queue is drained.
func ExampleRegistry_RegisterFunc() {
	ctx := context.Background()
	var mu sync.Mutex
	var got []string
	reg := pipes.NewRegistry()
	reg.MustRegisterFunc("collect", pipe.TargetFunc(func(_ context.Context, events []*pipe.Event) (pipe.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range events {
			got = append(got, string(ev.RecordJSON))
		}
		return pipe.Result{}, nil
	}))
	specs, err := config.Loader{}.Parse("example.yaml", []byte(`
name: greetings
source: {type: memory, wait_time: 50ms}
filter:
  patterns: ['{"body": {"lang": ["en", "fr"]}}']
target:
  type: func
  func: collect
  input_template: "<$.body.text>"
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	broker := memory.NewBroker()
	built, err := reg.Build(ctx, specs, pipes.Env{Broker: broker, Drain: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	q, _ := broker.Lookup("greetings")
	for _, body := range []string{`{"lang":"en","text":"hello"}`, `{"lang":"de","text":"hallo"}`, `{"lang":"fr","text":"bonjour"}`} {
		q.Send(ctx, memory.SendInput{Body: body})
	}
	if err := pipe.NewRunner(built...).Run(ctx); err != nil {
		fmt.Println(err)
		return
	}
	sort.Strings(got)
	fmt.Println(got)
	// Output: [bonjour hello]
}

// A target type of its own in the pipeline file: register a constructor
// under a type name, and `target: {type: audit}` builds it, with the
// pipe's spec (its name, the target's keys) to read its settings from.
func ExampleRegistry_MustRegisterTarget() {
	ctx := context.Background()
	var mu sync.Mutex
	var lines []string
	reg := pipes.NewRegistry()
	reg.MustRegisterTarget("audit", func(_ context.Context, spec config.Pipe, _ *pipes.Env) (pipe.Target, error) {
		prefix := spec.Name // a real factory reads its keys from spec.Target
		return pipe.TargetFunc(func(_ context.Context, events []*pipe.Event) (pipe.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			for _, ev := range events {
				body, _ := ev.Body()
				lines = append(lines, fmt.Sprintf("%s: %v", prefix, body))
			}
			return pipe.Result{}, nil
		}), nil
	})
	// The loader learns the registered types, "audit" among them.
	specs, err := config.Loader{TargetTypes: reg.TargetTypes()}.Parse("audit.yaml", []byte(`
name: logins
source: {type: memory, wait_time: 50ms}
target: {type: audit}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	broker := memory.NewBroker()
	built, err := reg.Build(ctx, specs, pipes.Env{Broker: broker, Drain: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	q, _ := broker.Lookup("logins")
	q.Send(ctx, memory.SendInput{Body: "alice"})
	if err := pipe.NewRunner(built...).Run(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(lines)
	// Output: [logins: alice]
}
