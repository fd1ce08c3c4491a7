package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/internal/scrub"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/ui"
)

// watchInterval is how often --watch looks at the pipeline files.
const watchInterval = time.Second

// supervisor runs the pipes of `pipes run` and reloads them: on a reload
// the files are read again, a pipe whose definition changed is stopped as
// for SIGTERM (drained within --shutdown-timeout) and started again with
// the new one, a new pipe is started, a pipe no longer in the files is
// stopped, and the others keep running untouched. Files that do not load,
// check or build are refused as a whole: the error is logged and the old
// pipes keep running. Its methods are safe for concurrent use.
type supervisor struct {
	reg  *pipes.Registry
	env  pipes.Env
	load func() ([]config.Pipe, error) // reads and checks the files again
	log  *slog.Logger

	// onStart, when set, is told of each pipe a reload starts, before it
	// runs; onRemove of each pipe a reload removes (the status page).
	onStart  func(config.Pipe, *pipe.Pipe)
	onRemove func(name string)

	mu      sync.Mutex
	running map[string]*running // by pipe name
	aborted bool
	failed  chan error // a pipe that cannot open its source for good
}

// running is one pipe the supervisor runs.
type running struct {
	spec   config.Pipe
	p      *pipe.Pipe
	cancel context.CancelFunc
	done   chan struct{}
}

func newSupervisor(reg *pipes.Registry, env pipes.Env, load func() ([]config.Pipe, error), log *slog.Logger) *supervisor {
	return &supervisor{reg: reg, env: env, load: load, log: log, running: map[string]*running{}, failed: make(chan error, 1)}
}

// Run starts the pipes and runs them until ctx is done (each then drains
// within its shutdown timeout), until, in drain mode, every one has
// stopped, or until a pipe cannot open its source for good (the others
// are stopped and its error returned). Each value of reloads makes it read
// the files again. It blocks until every pipe has stopped.
func (s *supervisor) Run(ctx context.Context, specs []config.Pipe, built []*pipe.Pipe, reloads <-chan struct{}) error {
	runCtx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	s.mu.Lock()
	for i, spec := range specs {
		s.startLocked(runCtx, spec, built[i])
	}
	s.mu.Unlock()
	var err error
loop:
	for {
		select {
		case <-runCtx.Done():
			break loop
		case err = <-s.failed:
			break loop
		case <-reloads:
			s.reload(runCtx)
		case <-s.allDone():
			break loop
		}
	}
	stopAll()
	s.mu.Lock()
	all := make([]*running, 0, len(s.running))
	for _, r := range s.running {
		all = append(all, r)
	}
	s.mu.Unlock()
	for _, r := range all {
		<-r.done
	}
	return err
}

// allDone is closed once every running pipe has stopped, in drain mode;
// nil (never) otherwise.
func (s *supervisor) allDone() <-chan struct{} {
	if !s.env.Drain {
		return nil
	}
	s.mu.Lock()
	dones := make([]chan struct{}, 0, len(s.running))
	for _, r := range s.running {
		dones = append(dones, r.done)
	}
	s.mu.Unlock()
	ch := make(chan struct{})
	go func() {
		for _, d := range dones {
			<-d
		}
		close(ch)
	}()
	return ch
}

// startLocked runs p in a goroutine of its own until its context is done.
func (s *supervisor) startLocked(ctx context.Context, spec config.Pipe, p *pipe.Pipe) {
	pctx, cancel := context.WithCancel(ctx)
	r := &running{spec: spec, p: p, cancel: cancel, done: make(chan struct{})}
	s.running[spec.Name] = r
	if s.aborted {
		p.Abort()
	}
	go func() {
		defer close(r.done)
		defer cancel()
		if err := p.Run(pctx); err != nil {
			select {
			case s.failed <- fmt.Errorf("pipe %s: %w", spec.Name, err):
			default:
			}
		}
	}()
}

// reload reads the files again and applies what changed; see supervisor.
func (s *supervisor) reload(ctx context.Context) {
	s.log.Info("reloading the pipeline files")
	specs, err := s.load()
	if err != nil {
		s.log.Error("reload refused: the pipeline files do not validate; the running pipes are kept", "error", errText(err))
		return
	}
	s.mu.Lock()
	var changed, added []config.Pipe
	keep := map[string]bool{}
	for _, spec := range specs {
		keep[spec.Name] = true
		old, ok := s.running[spec.Name]
		switch {
		case !ok:
			added = append(added, spec)
		case !samePipe(old.spec, spec):
			changed = append(changed, spec)
		}
	}
	s.mu.Unlock()
	fresh := append(append([]config.Pipe(nil), changed...), added...)
	built, err := s.reg.Build(ctx, fresh, s.env)
	if err != nil {
		s.log.Error("reload refused: the new pipes cannot be built; the running pipes are kept", "error", errText(err))
		return
	}
	s.mu.Lock()
	var stop []*running
	for name, r := range s.running {
		if !keep[name] {
			stop = append(stop, r)
			s.log.Info("pipe removed from the files: stopping it", "pipe", name)
		}
	}
	for _, spec := range changed {
		stop = append(stop, s.running[spec.Name])
		s.log.Info("pipe changed: draining it, then starting it again with the new definition", "pipe", spec.Name)
	}
	for _, r := range stop {
		delete(s.running, r.spec.Name)
	}
	s.mu.Unlock()
	// The stops run together, each draining within the shutdown timeout,
	// as for SIGTERM; the lock is not held meanwhile (readiness probes).
	for _, r := range stop {
		r.cancel()
	}
	for _, r := range stop {
		<-r.done
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ctx.Err() != nil {
		return // stopping: start nothing new
	}
	for _, r := range stop {
		if !keep[r.spec.Name] && s.onRemove != nil {
			s.onRemove(r.spec.Name)
		}
	}
	for i, spec := range fresh {
		if s.onStart != nil {
			s.onStart(spec, built[i])
		}
		s.startLocked(ctx, spec, built[i])
	}
	s.log.Info("pipeline files reloaded", "changed", len(changed), "added", len(added), "removed", len(stop)-len(changed), "unchanged", len(specs)-len(fresh))
}

// errText is an error on one line, for a log attribute.
func errText(err error) string {
	var ee *exitError
	if errors.As(err, &ee) {
		err = ee.err
	}
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}

// Abort cuts the stop of every pipe short, as Runner.Abort does.
func (s *supervisor) Abort() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.aborted = true
	for _, r := range s.running {
		r.p.Abort()
	}
}

// Pipes are the pipes running now, by name.
func (s *supervisor) Pipes() []*pipe.Pipe {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.running))
	for n := range s.running {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]*pipe.Pipe, len(names))
	for i, n := range names {
		out[i] = s.running[n].p
	}
	return out
}

// Ready reports whether every running pipe can poll its source (canPoll):
// a circuit held open by a failing target does not count.
func (s *supervisor) Ready() bool {
	ps := s.Pipes()
	for _, p := range ps {
		if !canPoll(p.Status()) {
			return false
		}
	}
	return len(ps) > 0
}

// Secrets are the values the named running pipe's definition keeps out of
// what the runner shows (as the status page keeps them out): for /status.
func (s *supervisor) Secrets(name string) scrub.Secrets {
	s.mu.Lock()
	r, ok := s.running[name]
	s.mu.Unlock()
	if !ok {
		return scrub.New()
	}
	return ui.Secrets(r.spec)
}

// samePipe reports whether two definitions of a pipe are the same, where
// they are written (Pos, Span) aside (a line added above a pipe moves it, but does
// not change it).
func samePipe(a, b config.Pipe) bool {
	return equalSkippingPos(reflect.ValueOf(a), reflect.ValueOf(b))
}

var (
	posType  = reflect.TypeFor[config.Pos]()
	spanType = reflect.TypeFor[config.Span]()
)

func equalSkippingPos(a, b reflect.Value) bool {
	if a.Type() != b.Type() {
		return false
	}
	if a.Type() == posType || a.Type() == spanType {
		return true
	}
	switch a.Kind() {
	case reflect.Struct:
		for i := range a.NumField() {
			if !equalSkippingPos(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return equalSkippingPos(a.Elem(), b.Elem())
	case reflect.Slice:
		if a.Type().Elem() == posType {
			return true
		}
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !equalSkippingPos(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.Len() != b.Len() {
			return false
		}
		for _, k := range a.MapKeys() {
			bv := b.MapIndex(k)
			if !bv.IsValid() || !equalSkippingPos(a.MapIndex(k), bv) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

// reloads gives a value on every SIGHUP (when the process's signals are
// handled: in is not nil) and, with watch, whenever the pipeline files
// change (looked at every second: their list, sizes, times and contents).
// It stops when ctx is done.
func reloads(ctx context.Context, in *interrupts, files []string, watch bool, log *slog.Logger) <-chan struct{} {
	out := make(chan struct{}, 1)
	kick := func() {
		select {
		case out <- struct{}{}:
		default:
		}
	}
	if in != nil {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		go func() {
			defer signal.Stop(hup)
			for {
				select {
				case <-ctx.Done():
					return
				case <-hup:
					log.Info("SIGHUP received: reloading the pipeline files")
					kick()
				}
			}
		}()
	}
	if watch {
		go func() {
			last := filesDigest(files)
			t := time.NewTicker(watchInterval)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if d := filesDigest(files); d != last {
						last = d
						log.Info("the pipeline files changed (--watch): reloading them")
						kick()
					}
				}
			}
		}()
	}
	return out
}

// filesDigest sums the names and contents of the pipeline files of paths
// (folders as `pipes run` reads them), so that any change, a new or removed
// file included, changes it.
func filesDigest(paths []string) string {
	h := sha256.New()
	for _, p := range paths {
		fmt.Fprintf(h, "%s\x00", p)
		info, err := os.Stat(p)
		if err != nil {
			fmt.Fprintf(h, "missing\x00")
			continue
		}
		names := []string{p}
		if info.IsDir() {
			entries, _ := os.ReadDir(p)
			names = names[:0]
			for _, e := range entries {
				ext := strings.ToLower(filepath.Ext(e.Name()))
				if e.Type().IsRegular() || e.Type()&fs.ModeSymlink != 0 {
					if ext == ".yaml" || ext == ".yml" {
						names = append(names, filepath.Join(p, e.Name()))
					}
				}
			}
		}
		for _, n := range names {
			data, err := os.ReadFile(n)
			fmt.Fprintf(h, "%s\x00%v\x00%d\x00", n, err != nil, len(data))
			h.Write(data)
		}
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}
