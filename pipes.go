// Package pipes builds runnable pipes from pipeline files. It holds the
// Registry of source and target types: the built-ins register into a
// Registry value (no init() globals), and embedders add their own or plug
// Go callbacks in as `type: func` targets.
//
//	reg := pipes.NewRegistry()
//	reg.MustRegisterFunc("audit", pipe.TargetFunc(audit))
//	specs, err := config.Load("pipeline.yaml")
//	ps, err := reg.Build(ctx, specs, pipes.Env{})
//	err = pipe.NewRunner(ps...).Run(ctx)
//
// Two tested examples start a newcomer: ExampleRegistry_RegisterFunc (a
// Go function as a `type: func` target) and
// ExampleRegistry_MustRegisterTarget (a target type of your own in the
// pipeline file, which the Loader accepts once given the registry's
// TargetTypes). Package pipe's examples build pipes in Go without YAML,
// with a custom source, a custom target and a Runner.
package pipes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pipesproject/pipes/budget"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/filter"
	"github.com/pipesproject/pipes/internal/keyerr"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/retry"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/source/memory"
	"github.com/pipesproject/pipes/source/sqs"
	"github.com/pipesproject/pipes/target/httptarget"
	"github.com/pipesproject/pipes/target/stdout"
)

// Env is what the pipes of one process share.
type Env struct {
	// Broker holds the process's memory queues (nil: a new one).
	Broker *memory.Broker
	// Metrics receives every pipe's series (nil: unregistered).
	Metrics *pipe.Metrics
	// Logger receives logs (nil: text on standard error at info level, so
	// that failures are not lost; slog.New(slog.DiscardHandler) discards).
	Logger *slog.Logger
	// Budget bounds in-flight bytes across pipes (nil: no limit).
	Budget *budget.Budget
	// Stdout is where stdout targets write (nil: os.Stdout).
	Stdout io.Writer
	// ShutdownTimeout bounds a pipe's drain after it is told to stop.
	ShutdownTimeout time.Duration
	// Drain makes pipes stop once their sources are empty.
	Drain bool
	// DryRun replaces every target by a printer of what it would get (one
	// JSON line per record on Stdout) and deletes nothing: the messages are
	// kept hidden while the pipes run and released when they stop.
	DryRun bool
	// Tracer, when set, gives every batch of every pipe a span
	// (package tracing's OpenTelemetry one; nil: no tracing).
	Tracer pipe.Tracer

	outMu *sync.Mutex
}

// stdoutMu is the lock that keeps dry-run lines whole on Stdout.
func (e *Env) stdoutMu() *sync.Mutex {
	if e.outMu == nil {
		e.outMu = &sync.Mutex{}
	}
	return e.outMu
}

func (e *Env) defaults() {
	if e.Broker == nil {
		e.Broker = memory.NewBroker()
	}
	if e.Metrics == nil {
		e.Metrics = pipe.NewMetrics(nil)
	}
	if e.Logger == nil {
		e.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	if e.Stdout == nil {
		e.Stdout = os.Stdout
	}
}

// SourceFactory makes the source of a pipe from its spec. It may do I/O
// (preloading a file) but should not contact the queue: the pipe opens the
// source when it runs.
type SourceFactory func(ctx context.Context, spec config.Pipe, env *Env) (source.Source, error)

// TargetFactory makes the target of a pipe from its spec.
type TargetFactory func(ctx context.Context, spec config.Pipe, env *Env) (pipe.Target, error)

// Registry maps the type names of pipeline files to constructors. It is safe
// for concurrent use. Type names are stable: renaming one breaks users' files.
type Registry struct {
	mu      sync.RWMutex
	sources map[string]SourceFactory
	targets map[string]TargetFactory
	funcs   map[string]pipe.Target
}

// NewRegistry returns a registry holding the built-in sources (sqs, memory)
// and targets (http, stdout, func, sqs, sns, eventbridge, lambda, kinesis,
// firehose, stepfunctions, cloudwatch_logs, rabbitmq).
func NewRegistry() *Registry {
	r := &Registry{sources: map[string]SourceFactory{}, targets: map[string]TargetFactory{}, funcs: map[string]pipe.Target{}}
	r.MustRegisterSource("sqs", newSQSSource)
	r.MustRegisterSource("memory", newMemorySource)
	r.MustRegisterSource("rabbitmq", newRabbitSource)
	r.MustRegisterTarget("http", newHTTPTarget)
	r.MustRegisterTarget("stdout", newStdoutTarget)
	r.MustRegisterTarget("func", r.newFuncTarget)
	r.MustRegisterTarget("sqs", newSQSTarget)
	r.MustRegisterTarget("sns", newSNSTarget)
	r.MustRegisterTarget("eventbridge", newEventBridgeTarget)
	r.MustRegisterTarget("lambda", newLambdaTarget)
	r.MustRegisterTarget("kinesis", newAWSTarget)
	r.MustRegisterTarget("firehose", newAWSTarget)
	r.MustRegisterTarget("stepfunctions", newAWSTarget)
	r.MustRegisterTarget("cloudwatch_logs", newAWSTarget)
	r.MustRegisterTarget("rabbitmq", newRabbitTarget)
	return r
}

// RegisterSource adds a source type; a name already taken is an error.
func (r *Registry) RegisterSource(name string, f SourceFactory) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.sources[name]; ok {
		return fmt.Errorf("source type %q is already registered", name)
	}
	r.sources[name] = f
	return nil
}

// MustRegisterSource is RegisterSource that panics on error.
func (r *Registry) MustRegisterSource(name string, f SourceFactory) {
	if err := r.RegisterSource(name, f); err != nil {
		panic(err)
	}
}

// RegisterTarget adds a target type; a name already taken is an error.
func (r *Registry) RegisterTarget(name string, f TargetFactory) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.targets[name]; ok {
		return fmt.Errorf("target type %q is already registered", name)
	}
	r.targets[name] = f
	return nil
}

// TargetTypes returns the names of every registered target type, sorted,
// built-in ones included: a config.Loader given them (Loader.TargetTypes)
// accepts the embedder's own types in pipeline files.
func (r *Registry) TargetTypes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.targets))
	for name := range r.targets {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// MustRegisterTarget is RegisterTarget that panics on error.
func (r *Registry) MustRegisterTarget(name string, f TargetFactory) {
	if err := r.RegisterTarget(name, f); err != nil {
		panic(err)
	}
}

// RegisterFunc names a Go target for `type: func` with `func: <name>`.
func (r *Registry) RegisterFunc(name string, t pipe.Target) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.funcs[name]; ok {
		return fmt.Errorf("func target %q is already registered", name)
	}
	r.funcs[name] = t
	return nil
}

// MustRegisterFunc is RegisterFunc that panics on error.
func (r *Registry) MustRegisterFunc(name string, t pipe.Target) {
	if err := r.RegisterFunc(name, t); err != nil {
		panic(err)
	}
}

// Check validates specs beyond what config checks alone, without any I/O:
// every type is registered, func targets exist, filters and templates
// compile. Problems come back as config.Errors naming file, line and field.
func (r *Registry) Check(specs []config.Pipe) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var errs config.Errors
	for _, s := range specs {
		if _, ok := r.sources[s.Source.Type]; !ok {
			errs = append(errs, &config.Error{Pos: s.Source.Pos, Field: "source.type",
				Msg: fmt.Sprintf("source type %q is not available in this build (have %s)", s.Source.Type, keys(r.sources))})
		}
		if _, ok := r.targets[s.Target.Type]; !ok {
			errs = append(errs, &config.Error{Pos: s.Target.Pos, Field: "target.type",
				Msg: fmt.Sprintf("target type %q is not available in this build (have %s)", s.Target.Type, keys(r.targets))})
		} else if s.Target.Type == "func" {
			if _, ok := r.funcs[s.Target.Func]; !ok {
				errs = append(errs, &config.Error{Pos: s.Target.Pos, Field: "target.func",
					Msg: fmt.Sprintf("no Go func target is registered as %q (Registry.RegisterFunc)", s.Target.Func)})
			}
		}
		errs = append(errs, checkAWSTarget(s, "target", s.Target)...)
		if s.Target.Type == "http" {
			// Catches bad placeholders in the url, query and headers; no I/O.
			if t, err := newHTTPTarget(context.Background(), s, &Env{Logger: slog.New(slog.DiscardHandler)}); err != nil {
				errs = append(errs, located(err, "target", s.Target.Pos, s.Target.KeyPos)...)
			} else if c, ok := t.(interface{ Close(context.Context) error }); ok {
				_ = c.Close(context.Background())
			}
		}
		if s.Source.Type == "rabbitmq" {
			if _, err := newRabbitSource(context.Background(), s, &Env{Logger: slog.New(slog.DiscardHandler)}); err != nil {
				errs = append(errs, located(err, "source", s.Source.Pos, nil)...)
			}
		}
		if s.Target.Type == "rabbitmq" {
			// Catches bad routing key and header templates; no I/O.
			if _, err := rabbitTargetOf(s, s.Target, &Env{Logger: slog.New(slog.DiscardHandler)}); err != nil {
				errs = append(errs, located(err, "target", s.Target.Pos, s.Target.KeyPos)...)
			}
		}
		if dl := s.DeadLetter; dl != nil {
			errs = append(errs, checkAWSTarget(s, "dead_letter", dl.Target)...)
			if _, ok := r.targets[dl.Target.Type]; !ok {
				errs = append(errs, &config.Error{Pos: dl.Target.Pos, Field: "dead_letter.type",
					Msg: fmt.Sprintf("target type %q is not available in this build (have %s)", dl.Target.Type, keys(r.targets))})
			}
		}
		errs = append(errs, checkStages(s)...)
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// located is what building a block (field: "target", "dead_letter",
// "enrichment", "source") returned as config.Errors: one a problem, each
// line of a message on several lines its own (keyerr.Split), at the key
// the problem is about when the constructor said which (keyerr.Error;
// keys says where the file writes it), else at the block.
func located(err error, field string, block config.Pos, keys config.KeyPos) config.Errors {
	var errs config.Errors
	for _, p := range keyerr.Split(err) {
		e := &config.Error{Pos: block, Field: field, Msg: p.Msg}
		if p.Key != "" {
			e.Pos, e.Field = keys.At(p.Key, block), field+"."+p.Key
		}
		errs = append(errs, e)
	}
	return errs
}

func keys[V any](m map[string]V) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

// Build makes the pipes of specs, ready to run. It runs Check first.
func (r *Registry) Build(ctx context.Context, specs []config.Pipe, env Env) ([]*pipe.Pipe, error) {
	if err := r.Check(specs); err != nil {
		return nil, err
	}
	env.defaults()
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []*pipe.Pipe
	for _, s := range specs {
		p, err := r.build(ctx, s, &env)
		if err != nil {
			return nil, fmt.Errorf("building pipe %s (%s:%d): %w", s.Name, s.Pos.File, s.Pos.Line, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func (r *Registry) build(ctx context.Context, s config.Pipe, env *Env) (*pipe.Pipe, error) {
	src, err := r.sources[s.Source.Type](ctx, s, env)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	tgt, err := r.targets[s.Target.Type](ctx, s, env)
	if err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	if rp := s.Target.Retry; rp != nil {
		retries := env.Metrics.TargetRetries.WithLabelValues(s.Name)
		tgt = retry.Wrap(tgt, retry.Policy{
			MaxAttempts: rp.MaxAttempts, Backoff: rp.Backoff, MinDelay: rp.MinDelay,
			MaxDelay: rp.MaxDelay, MaxEventAge: rp.MaxEventAge, Jitter: rp.Jitter,
		}, retry.Options{
			Logger:  env.Logger.With("pipe", s.Name),
			OnRetry: func(n int) { retries.Add(float64(n)) },
		})
	}
	var dead pipe.Target
	if env.DryRun {
		tgt = dryRunTarget{pipe: s.Name, w: env.Stdout, mu: env.stdoutMu()}
	} else if dl := s.DeadLetter; dl != nil {
		switch {
		case config.IsAWSTarget(dl.Target.Type):
			// A dead-lettered event's payload is the raw body: templated
			// parameters are rendered against the record.
			dead, err = awsTarget(ctx, s, dl.Target, env, true)
		default:
			ds := s
			ds.Target = dl.Target
			dead, err = r.targets[dl.Target.Type](ctx, ds, env)
		}
		if err != nil {
			return nil, fmt.Errorf("dead_letter: %w", err)
		}
	}
	flt, tr, err := Stages(s)
	if err != nil {
		return nil, err
	}
	enr, err := EnricherWith(ctx, s, env)
	if err != nil {
		return nil, err
	}
	opt := pipe.Options{
		Name:                  s.Name,
		Source:                src,
		Filter:                flt,
		Enricher:              enr,
		DeadLetter:            dead,
		DeadLetterOnExhausted: s.DeadLetter != nil && s.DeadLetter.OnExhausted == "dead_letter",
		Transformer:           tr,
		Target:                tgt,
		BatchSize:             s.Source.BatchSize,
		BatchWindow:           s.Source.BatchWindow,
		MaxConcurrency:        s.Source.MaxConcurrency,
		InitialConcurrency:    s.Source.InitialConcurrency,
		ScaleUpPerMinute:      s.Source.ScaleUpPerMinute,
		RateLimit:             s.Source.RateLimit,
		Unwrap:                unwrapKind(s.Source.Unwrap),
		ShutdownTimeout:       env.ShutdownTimeout,
		Drain:                 env.Drain,
		DryRun:                env.DryRun,
		Budget:                env.Budget,
		Metrics:               env.Metrics,
		Logger:                env.Logger,
		LogLevel:              s.Logging.Level,
		IncludeExecutionData:  s.Logging.IncludeExecutionData,
		Tracer:                env.Tracer,
	}
	if s.Target.Type == "http" { // the targets whose calls have a timeout
		opt.TargetTimeout = s.Target.Timeout
	}
	if b := s.Source.RetryBackoff; b != nil {
		opt.RetryBackoff = &pipe.Backoff{Base: b.Base, Factor: b.Factor, Max: b.Max, Jitter: b.Jitter}
	}
	return pipe.New(opt)
}

// unwrapKind maps the file's `unwrap:` value to the runtime's.
func unwrapKind(v string) string {
	if v == "none" {
		return source.UnwrapNone
	}
	return v
}

func newSQSSource(ctx context.Context, s config.Pipe, env *Env) (source.Source, error) {
	m, name := env.Metrics, s.Name
	payloads, err := sqsPayloads(ctx, s, env)
	if err != nil {
		return nil, err
	}
	return sqs.New(ctx, sqs.Config{
		Payloads:          payloads,
		QueueURL:          s.Source.QueueURL,
		QueueARN:          s.Source.QueueARN,
		QueueName:         s.Source.QueueName,
		Region:            s.Source.Region,
		Endpoint:          s.Source.Endpoint,
		WaitTime:          s.Source.WaitTime,
		VisibilityTimeout: s.Source.VisibilityTimeout,
		OnCall:            func(op string) { m.CountCall(name, op) },
		Logger:            env.Logger.With("pipe", name),
		QueueAt:           s.Source.QueuePos.String(),
		EndpointAt:        s.Source.EndpointPos.String(),
	})
}

// memorySource is a memory queue that can also tell how many messages are
// left, for `pipes run --drain`.
type memorySource struct{ *memory.Queue }

// Pending counts the messages still in the queue, visible or not.
func (m memorySource) Pending(context.Context) (int, error) {
	st := m.Stats()
	return st.Visible + st.InFlight + st.Delayed, nil
}

func newMemorySource(ctx context.Context, s config.Pipe, env *Env) (source.Source, error) {
	opts := memory.Options{
		FIFO:              s.Source.FIFO,
		VisibilityTimeout: s.Source.VisibilityTimeout,
		WaitTime:          s.Source.WaitTime,
		Region:            s.Source.Region,
	}
	if rp := s.Source.RedrivePolicy; rp != nil {
		opts.MaxReceiveCount = rp.MaxReceiveCount
		opts.DeadLetterQueue = rp.DeadLetterQueue
	}
	name := s.Source.QueueName
	if name == "" {
		name = s.Name
	}
	q, err := env.Broker.Queue(name, opts)
	if err != nil {
		return nil, err
	}
	if s.Source.Preload != "" {
		path := s.Source.Preload
		if !filepath.IsAbs(path) {
			path = filepath.Join(s.Dir, path)
		}
		n, err := q.Preload(ctx, path)
		if err != nil {
			return nil, fmt.Errorf("preloading %s: %w", path, err)
		}
		env.Logger.Info("memory queue preloaded", "queue", name, "messages", n, "file", path)
	}
	return memorySource{q}, nil
}

func newHTTPTarget(ctx context.Context, s config.Pipe, env *Env) (pipe.Target, error) {
	sign, err := sigv4Sign(ctx, s.Target.Auth, s.Target.Region, s.Target.URL, nil)
	if err != nil {
		return nil, keyerr.New("auth", err)
	}
	return httptarget.New(httptarget.Config{
		Sign:               sign,
		URL:                s.Target.URL,
		Method:             s.Target.Method,
		Batch:              s.Target.Batch,
		Headers:            s.Target.Headers,
		Timeout:            s.Target.Timeout,
		InsecureSkipVerify: s.Target.InsecureSkipVerify,
		Query:              s.Target.Query,
		PathParameters:     s.Target.PathParameters,
		Vars:               templateVars(s),
		Logger:             env.Logger.With("pipe", s.Name),
	})
}

func newStdoutTarget(_ context.Context, s config.Pipe, env *Env) (pipe.Target, error) {
	cfg := stdout.Config{Writer: env.Stdout, Batch: s.Target.Batch, FailOn: s.Target.FailOn}
	if s.Target.FailOnPattern != "" {
		m, err := filter.CompilePatterns([]string{s.Target.FailOnPattern})
		if err != nil {
			return nil, fmt.Errorf("target.fail_on: %w", err)
		}
		cfg.FailOnMatch = m
	}
	return stdout.New(cfg), nil
}

func (r *Registry) newFuncTarget(_ context.Context, s config.Pipe, _ *Env) (pipe.Target, error) {
	t, ok := r.funcs[s.Target.Func]
	if !ok {
		return nil, errors.New("no func target registered as " + s.Target.Func)
	}
	return t, nil
}

// dryRunTarget prints what a target would get, one JSON line per record,
// and takes everything: `pipes run --dry-run`.
type dryRunTarget struct {
	pipe string
	w    io.Writer
	mu   *sync.Mutex
}

// Deliver writes one line per event: the pipe, the message id and the
// payload (as JSON when it is JSON, else as a string).
func (d dryRunTarget) Deliver(_ context.Context, events []*pipe.Event) (pipe.Result, error) {
	var buf bytes.Buffer
	for _, ev := range events {
		in := json.RawMessage(ev.RecordJSON)
		if !json.Valid(ev.RecordJSON) {
			in, _ = json.Marshal(string(ev.RecordJSON))
		}
		line, err := json.Marshal(struct {
			Pipe        string          `json:"pipe"`
			MessageID   string          `json:"messageId"`
			TargetInput json.RawMessage `json:"target_input"`
		}{d.pipe, ev.ID(), in})
		if err != nil {
			return pipe.Result{}, err
		}
		buf.Write(line)
		buf.WriteByte('\n')
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	_, err := d.w.Write(buf.Bytes())
	return pipe.Result{}, err
}
