package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/budget"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/internal/procs"
	"github.com/pipesproject/pipes/internal/scrub"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/source/memory"
	"github.com/pipesproject/pipes/ui"
)

// defaultMetricsAddr is --metrics-addr's default. It is also the
// OpenTelemetry Prometheus exporter's default, and another pipes may hold
// it: when it is in use, the run serves on a free port instead.
const defaultMetricsAddr = "127.0.0.1:9464"

type runFlags struct {
	files            []string
	aws              []string // EventBridge Pipes definitions, imported in memory (import.go)
	params           []string // --param Key=Value for the --aws definitions
	awsf             awsFlags // --region, --profile, --endpoint-url (awsflags.go)
	metricsAddr      string
	metricsAddrSet   bool // --metrics-addr was given: a busy address fails the run
	logFormat        string
	logLevel         string
	shutdownTimeout  time.Duration
	drain            bool
	dryRun           bool
	maxInflightBytes int64
	ui               uiFlags // ui.go
	watch            bool
	otel             otelFlags // otel.go
}

func newRunCmd(in *interrupts, stdout, stderr io.Writer) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run -f FILE...",
		Short: "Run every pipe of the files until SIGINT/SIGTERM (or, with --drain, until the sources are empty)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.metricsAddrSet = cmd.Flags().Changed("metrics-addr")
			return runPipes(cmd.Context(), in, f, stdout, stderr)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&f.files, "file", "f", nil, "pipeline file or folder (repeatable)")
	fl.StringArrayVar(&f.aws, "aws", nil, "EventBridge Pipes definition to run (describe-pipe JSON, CreatePipe body, CloudFormation/SAM/CDK template), imported in memory (repeatable)")
	fl.StringArrayVar(&f.params, "param", nil, "Key=Value for a template parameter, a pseudo parameter (AWS::Region) or a reference of the --aws definitions, as pipes import aws takes it; over an environment variable of the parameter's name (repeatable)")
	fl.StringVar(&f.metricsAddr, "metrics-addr", defaultMetricsAddr, `address for /metrics, /healthz, /readyz and /status ("" turns it off); when the default is in use, a free port is taken instead (and logged)`)
	fl.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fl.StringVar(&f.logLevel, "log-level", "info", "runner log level: debug, info, warn or error (pipes' execution logs follow each pipe's logging.level)")
	fl.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long in-flight batches may finish after SIGTERM before they are released")
	fl.BoolVar(&f.drain, "drain", false, "exit 0 once every source is empty and nothing is in flight")
	fl.BoolVar(&f.dryRun, "dry-run", false, "call no target and delete nothing: print what each target would get, keep the messages hidden while running and release them at exit")
	fl.Int64Var(&f.maxInflightBytes, "max-inflight-bytes", 256<<20, "budget for the payload bytes of received, unsettled messages across all pipes (0: no limit); the process's memory is a small multiple of it")
	f.awsf.register(fl, "the sqs sources, lambda enrichments and AWS targets")
	f.ui.register(fl)
	f.otel.register(fl)
	fl.BoolVar(&f.watch, "watch", false, "reload the pipeline files when they change (as SIGHUP does): changed pipes are drained and started again, the others keep running")
	return cmd
}

func newLogger(w io.Writer, format, level string, trace bool) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %q is not one of debug, info, warn, error", level)
	}
	if trace && lv > slog.LevelDebug {
		lv = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is not one of text, json", format)
}

// loadSpecs loads and checks pipeline files; problems are usage errors.
func loadSpecs(reg *pipes.Registry, files []string) ([]config.Pipe, error) {
	if len(files) == 0 {
		return nil, usageErr(errors.New("no pipeline file: give one or more with -f FILE"))
	}
	specs, err := config.Load(files...)
	if err != nil {
		return nil, usageErr(err)
	}
	if len(specs) == 0 {
		return nil, usageErr(fmt.Errorf("no pipe found in %s", strings.Join(files, ", ")))
	}
	if err := reg.Check(specs); err != nil {
		return nil, usageErr(err)
	}
	return specs, nil
}

// runPipes runs the pipes of f.files until ctx is done or, with --drain,
// until their sources are empty. The signals of in (nil: none) are logged
// through the run's logger, and a second one cuts the stop short.
func runPipes(ctx context.Context, in *interrupts, f runFlags, stdout, stderr io.Writer) error {
	if err := f.awsf.check(); err != nil {
		return usageErr(err)
	}
	ctx = f.awsf.context(ctx)
	reg := pipes.NewRegistry()
	load := func(stderr io.Writer) ([]config.Pipe, error) {
		specs, err := loadRunSpecs(reg, f.files, f.aws, f.params, stderr)
		return f.awsf.apply(specs), err
	}
	specs, err := load(stderr)
	if err != nil {
		return err
	}
	trace := false
	for _, s := range specs {
		trace = trace || s.Logging.Level == "trace"
	}
	log, err := newLogger(stderr, f.logFormat, f.logLevel, trace)
	if err != nil {
		return usageErr(err)
	}
	if limit, gc := budget.ApplyMemoryLimit(f.maxInflightBytes, os.Getenv); limit > 0 {
		log.Debug("the Go memory limit follows --max-inflight-bytes (GOMEMLIMIT and GOGC override it)", "memory_limit_bytes", limit, "gc_percent", gc)
	}
	// GOMAXPROCS follows the work the pipes have waiting (the environment
	// variable overrides it): fewer idle threads woken to spin on every
	// answer. Not in a test binary, whose tests run many pipes side by side.
	sizeCtx, stopSizing := context.WithCancel(ctx)
	var sizing sync.WaitGroup
	if !testing.Testing() {
		sizing.Go(func() { procs.Run(sizeCtx, os.Getenv, log) })
	}
	defer func() { stopSizing(); sizing.Wait() }()
	promReg := prometheus.NewRegistry()
	promReg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	env := pipes.Env{
		Broker:          memory.NewBroker(),
		Metrics:         pipe.NewMetrics(promReg),
		Logger:          log,
		Budget:          budget.New(f.maxInflightBytes),
		Stdout:          stdout,
		ShutdownTimeout: f.shutdownTimeout,
		Drain:           f.drain,
		DryRun:          f.dryRun,
	}
	tracer, flushTraces, err := f.otel.start(ctx, log)
	if err != nil {
		return err
	}
	defer flushTraces()
	env.Tracer = tracer
	built, err := reg.Build(ctx, specs, env)
	if err != nil {
		return usageErr(err)
	}
	page, err := startUI(f.ui, specs, built, env, log)
	if err != nil {
		return err
	}
	defer page.stop()
	runner := newSupervisor(reg, env, func() ([]config.Pipe, error) { return load(io.Discard) }, log)
	runner.onStart, runner.onRemove = page.started, page.removed
	in.runStarted(log, f.shutdownTimeout, runner.Abort)
	defer in.runEnded()
	if f.metricsAddr != "" {
		stopServer, err := serveOps(f.metricsAddr, !f.metricsAddrSet, promReg, runner, log)
		if err != nil {
			return runtimeErr(err)
		}
		defer stopServer()
	}
	if err := runner.Run(ctx, specs, built, reloads(ctx, in, append(slices.Clone(f.files), f.aws...), f.watch, log)); err != nil {
		return runtimeErr(err)
	}
	if f.drain {
		summarizeMemory(stderr, env.Broker, specs)
	}
	return nil
}

// opsView is what /readyz and /status read of the running pipes.
type opsView interface {
	Ready() bool
	Pipes() []*pipe.Pipe
	Secrets(pipe string) scrub.Secrets
}

// canPoll reports whether a pipe's runner can poll its source: the source
// is open, the pipe is not stopping, and its receives do not keep failing.
// A circuit held open by a failing target does not make a pipe unready:
// readiness is the runner's (Kubernetes keeps routing and rolling out
// during a downstream outage, when a fix may have to be rolled out);
// /status and pipes_circuit_open say that the circuit is open. While the
// circuit holds polling the source is not asked, so its health is the
// last one seen: the circuit opened on batches it had delivered.
func canPoll(st core.Status) bool {
	return st.Started && !st.Stopping && (st.Ready || st.CircuitOpen)
}

// pipeHealth is one pipe in /status.
type pipeHealth struct {
	// Name is the pipe's name.
	Name string `json:"name"`
	// State is starting, running, paused, draining, source_failing
	// (its receives keep failing, or its source would not open) or
	// target_failing (the circuit is open: polling is held while the
	// target keeps failing); ui.StateOf decides it for the page too.
	State string `json:"state"`
	// Ready is what /readyz counts: the runner can poll the source.
	Ready bool `json:"ready"`
	// Circuit is the circuit breaker: closed, or open while a failing
	// target holds polling.
	Circuit string `json:"circuit"`
	// LastError is why the pipe is not running as it should (the source's
	// last error, or the target's while the circuit is open), with the
	// pipe's secrets blanked out; "" when it is.
	LastError string `json:"last_error,omitempty"`
	// Concurrency is the batches the pipe may have in flight now,
	// MaxConcurrency its ceiling, InFlight those at the target now.
	Concurrency    int `json:"concurrency"`
	MaxConcurrency int `json:"max_concurrency"`
	InFlight       int `json:"in_flight"`
}

// healthOf is p's row of /status.
func healthOf(p *pipe.Pipe, secrets scrub.Secrets) pipeHealth {
	st := p.Status()
	h := pipeHealth{Name: p.Name(), Ready: canPoll(st), Circuit: "closed",
		Concurrency: st.Concurrency, MaxConcurrency: st.MaxConcurrency, InFlight: st.InFlight}
	if st.CircuitOpen {
		h.Circuit = "open"
	}
	h.State = ui.StateOf(st).Code()
	if st.Err != nil {
		h.LastError = secrets.Text(st.Err.Error())
	}
	return h
}

// serveOps serves /metrics, /healthz, /readyz and /status until the
// returned function is called. When addr is in use and fallback is set
// (addr is the default, not one the user gave), it warns and serves on a
// free port of the same host instead.
func serveOps(addr string, fallback bool, reg *prometheus.Registry, runner opsView, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil && fallback && errors.Is(err, syscall.EADDRINUSE) {
		host, _, _ := net.SplitHostPort(addr)
		if ln, err = net.Listen("tcp", net.JoinHostPort(host, "0")); err == nil {
			log.Warn("the default metrics address is in use (another pipes run, or an OpenTelemetry Prometheus exporter, whose default it is too): serving metrics and health on a free port instead; choose one with --metrics-addr HOST:PORT",
				"in_use", addr, "addr", ln.Addr().String())
		}
	}
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("listening for metrics on %s: the address is in use (another pipes run?): choose another with --metrics-addr HOST:PORT (127.0.0.1:0 picks a free port), or turn the server off with --metrics-addr \"\": %w", addr, err)
		}
		return nil, fmt.Errorf("listening for metrics on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !runner.Ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			for _, p := range runner.Pipes() {
				if h := healthOf(p, runner.Secrets(p.Name())); !h.Ready {
					if h.LastError != "" {
						fmt.Fprintf(w, "%s: not ready: %s\n", h.Name, h.LastError)
					} else {
						fmt.Fprintf(w, "%s: not ready (%s)\n", h.Name, h.State)
					}
				}
			}
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("/status", func(w http.ResponseWriter, _ *http.Request) {
		report := struct {
			Ready bool         `json:"ready"`
			Pipes []pipeHealth `json:"pipes"`
		}{Ready: runner.Ready(), Pipes: []pipeHealth{}}
		for _, p := range runner.Pipes() {
			report.Pipes = append(report.Pipes, healthOf(p, runner.Secrets(p.Name())))
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(report)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "error", err)
		}
	}()
	log.Info("serving metrics and health", "addr", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}

// summarizeMemory tells, after a drain, what the memory queues hold: the
// end of the quickstart's lifecycle, dead-lettered messages included.
func summarizeMemory(w io.Writer, b *memory.Broker, specs []config.Pipe) {
	names := map[string]bool{} // queue name → is a dead-letter queue
	for _, s := range specs {
		if s.Source.Type != "memory" {
			continue
		}
		n := s.Source.QueueName
		if n == "" {
			n = s.Name
		}
		if _, ok := names[n]; !ok {
			names[n] = false
		}
		if rp := s.Source.RedrivePolicy; rp != nil {
			names[rp.DeadLetterQueue] = true
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		q, ok := b.Lookup(n)
		if !ok {
			continue
		}
		st := q.Stats()
		fmt.Fprintf(w, "queue %s: %d left, %d received, %d deleted, %d dead-lettered\n",
			n, st.Visible+st.InFlight+st.Delayed, st.Received, st.Deleted, st.DeadLettered)
		if names[n] {
			for _, m := range q.Snapshot() {
				fmt.Fprintf(w, "  %s after %s receives: %s\n", m.MessageID, m.Attributes[source.AttrReceiveCount], m.Body)
			}
		}
	}
}
