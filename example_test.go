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
			got = append(got, string(ev.Payload))
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
