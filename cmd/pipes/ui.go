package main

import (
	"fmt"
	"log/slog"
	"os"

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
	addr  string
	token string
}

func (f *uiFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.addr, "ui", "", `serve the live status page on this address, e.g. 127.0.0.1:8080 ("": off); a non-loopback address needs a token`)
	fl.StringVar(&f.token, "ui-token", "", "the secret the status page's actions (redrive, pause, resume) ask for; default $"+envUIToken+"; without one, actions are off")
}

// startUI starts the status page of the built pipes when --ui is set and
// returns the function that stops it. It must run before the pipes do:
// it sets their observers. A non-loopback address without a token is a
// usage error.
func startUI(f uiFlags, specs []config.Pipe, built []*pipe.Pipe, env pipes.Env, log *slog.Logger) (func(), error) {
	if f.addr == "" {
		return func() {}, nil
	}
	token := f.token
	if token == "" {
		token = os.Getenv(envUIToken)
	}
	cfg := ui.Config{Addr: f.addr, Token: token, Logger: log.With("component", "ui")}
	for i, p := range built {
		spec := specs[i]
		secrets := ui.Secrets(spec)
		rec := ui.NewRecorder(0, secrets.Text)
		p.SetObserver(rec)
		depths, redriver := ui.Queues(spec, env.Broker, log.With("pipe", spec.Name, "component", "ui-redrive"))
		cfg.Pipes = append(cfg.Pipes, ui.Pipe{Control: p, Recorder: rec, Settings: ui.Settings(spec), Scrub: secrets.Text,
			Depths: depths, Redriver: redriver, ExecutionData: spec.Logging.IncludeExecutionData})
	}
	srv, err := ui.New(cfg)
	if err != nil {
		return nil, usageErr(fmt.Errorf("--ui: %w", err))
	}
	addr, err := srv.Start()
	if err != nil {
		return nil, runtimeErr(err)
	}
	log.Info("serving the status page", "addr", addr, "url", "http://"+addr+"/", "actions", token != "")
	return func() {
		if err := srv.Close(); err != nil {
			log.Warn("stopping the status page", "error", err)
		}
	}, nil
}
