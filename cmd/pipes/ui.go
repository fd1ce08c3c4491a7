package main

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/ui"
)

// envUIToken is the environment variable that gives the status page's
// token when --ui-token is not set.
const envUIToken = "PIPES_UI_TOKEN"

// uiFlags are `pipes run`'s status page flags.
type uiFlags struct {
	addr   string
	token  string
	sample time.Duration // --ui-sample-interval
	tail   bool
	prom   string // --ui-prometheus
}

func (f *uiFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.addr, "ui", "", `serve the live status page on this address, e.g. 127.0.0.1:8080 ("": off); a non-loopback address needs a token`)
	fl.BoolVar(&f.tail, "ui-tail", false, "offer the status page's live tail (sampled messages at each stage, as Server-Sent Events) for the pipes whose logging.include_execution_data is on")
	fl.StringVar(&f.token, "ui-token", "", "the secret the status page's actions (redrive, pause, resume) ask for; default $"+envUIToken+"; without one, actions are off")
	fl.StringVar(&f.prom, "ui-prometheus", "", "the Prometheus server that scrapes these pipes, e.g. http://prometheus:9090: the status page links each pipe's queries to its expression browser for history beyond 15 minutes")
	fl.DurationVar(&f.sample, "ui-sample-interval", 5*time.Second, "how often the status page samples the pipes for its rates and 15-minute charts, 1s to 1m (each pipe keeps 15 minutes of samples)")
}

// statusPage is the running status page; nil when --ui is off (its
// methods then do nothing).
type statusPage struct {
	srv   *ui.Server
	env   pipes.Env
	log   *slog.Logger
	recs  map[string]*ui.Recorder // by pipe name: a reloaded pipe keeps its history
	every time.Duration           // --ui-sample-interval
	tail  bool                    // --ui-tail
}

// startUI starts the status page of the built pipes when --ui is set. It
// must run before the pipes do: it sets their observers. A non-loopback
// address without a token is a usage error.
func startUI(f uiFlags, specs []config.Pipe, built []*pipe.Pipe, env pipes.Env, log *slog.Logger) (*statusPage, error) {
	if f.addr == "" {
		return nil, nil
	}
	token := f.token
	if token == "" {
		token = os.Getenv(envUIToken)
	}
	if f.sample < time.Second || f.sample > time.Minute {
		return nil, usageErr(fmt.Errorf("--ui-sample-interval %s: give 1s to 1m", f.sample))
	}
	sp := &statusPage{env: env, log: log, recs: map[string]*ui.Recorder{}, every: f.sample, tail: f.tail}
	cfg := ui.Config{Addr: f.addr, Token: token, Logger: log.With("component", "ui"), SampleEvery: f.sample, PrometheusURL: f.prom}
	for i, p := range built {
		cfg.Pipes = append(cfg.Pipes, sp.pipeOf(specs[i], p))
	}
	srv, err := ui.New(cfg)
	if err != nil {
		return nil, usageErr(fmt.Errorf("--ui: %w", err))
	}
	addr, err := srv.Start()
	if err != nil {
		return nil, runtimeErr(err)
	}
	sp.srv = srv
	log.Info("serving the status page", "addr", addr, "url", "http://"+addr+"/", "actions", token != "")
	return sp, nil
}

// pipeOf observes p (before it runs) and says what the page shows of it.
func (sp *statusPage) pipeOf(spec config.Pipe, p *pipe.Pipe) ui.Pipe {
	secrets := ui.Secrets(spec)
	rec, ok := sp.recs[spec.Name]
	if !ok {
		rec = ui.NewRecorder(sp.every, secrets.Text)
		sp.recs[spec.Name] = rec
	}
	p.SetObserver(rec)
	depths, redriver := ui.Queues(spec, sp.env.Broker, sp.log.With("pipe", spec.Name, "component", "ui-redrive"))
	up := ui.Pipe{Control: p, Recorder: rec, Settings: ui.Settings(spec), Scrub: secrets.Text,
		Depths: depths, Redriver: redriver, ExecutionData: spec.Logging.IncludeExecutionData, Tail: sp.tail}
	if sp.env.Metrics != nil {
		up.Latency, _ = sp.env.Metrics.TargetDuration.WithLabelValues(spec.Name).(ui.LatencyHistogram)
	}
	return up
}

// started shows a pipe a reload starts (before it runs), in place of its
// old definition.
func (sp *statusPage) started(spec config.Pipe, p *pipe.Pipe) {
	if sp == nil {
		return
	}
	if err := sp.srv.Put(sp.pipeOf(spec, p)); err != nil {
		sp.log.Warn("status page: showing a reloaded pipe", "pipe", spec.Name, "error", err)
	}
}

// removed stops showing a pipe a reload removed.
func (sp *statusPage) removed(name string) {
	if sp == nil {
		return
	}
	delete(sp.recs, name)
	sp.srv.Remove(name)
}

// stop stops the page.
func (sp *statusPage) stop() {
	if sp == nil {
		return
	}
	if err := sp.srv.Close(); err != nil {
		sp.log.Warn("stopping the status page", "error", err)
	}
}
