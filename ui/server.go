// Package ui is pipes' live status page (`pipes run --ui ADDR`): one row
// per pipe with its state, concurrency, rates and 15-minute sparklines,
// queue and dead-letter queue depths; a detail view per pipe with its last
// failures, its configuration with secrets masked and its scaling
// decision; and two actions behind a confirmation, the token and a CSRF
// check: redrive the dead-letter queue and pause or resume polling. The
// pages are server-rendered (html/template) and work without JavaScript; a
// small script refreshes them every 2 s from the JSON API that scripts can
// use too: /api/pipes, /api/pipes/NAME, /api/pipes/NAME/failures.
//
// The package consumes small interfaces: a pipe's Control (*pipe.Pipe
// implements it), its Recorder (a the Observer of Pipe.SetObserver), a Depther and a
// Redriver.
package ui

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/redrive"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Control is what the page reads and does of a pipe. *pipe.Pipe
// implements it.
type Control interface {
	Name() string
	Status() core.Status
	Pause()
	Resume()
}

var _ Control = (*pipe.Pipe)(nil)

// Pipe is one pipe as the page knows it.
type Pipe struct {
	// Control is the running pipe.
	Control Control
	// Recorder is the pipe's observer (pipe.SetObserver); required.
	Recorder *Recorder
	// Settings is the pipe's configuration with its secrets masked
	// (Settings).
	Settings []Setting
	// Scrub takes the pipe's secrets out of texts the page shows (errors);
	// nil keeps them as they are.
	Scrub func(string) string
	// Depths reads its queue and dead-letter queue depths; nil: unknown.
	Depths Depther
	// Redriver moves its dead-letter queue back; nil: no redrive action.
	Redriver Redriver
	// ExecutionData tells whether the pipe's logging includes execution
	// data (only then do failures carry a payload sample).
	ExecutionData bool
	// Latency is its batch latency histogram, for the charts' p50 and
	// p99; nil: no latency chart.
	Latency LatencyHistogram
	// Tail turns on the live tail (tail.go); it needs ExecutionData.
	Tail bool
}

// Config says how the status page is served.
type Config struct {
	// Addr is the address to listen on ("127.0.0.1:8080").
	Addr string
	// Token is the secret that every action needs; "" turns actions off,
	// and then Addr must be a loopback address. Off loopback every request
	// needs it (Bearer, or the password of Basic authentication).
	Token string
	// Pipes are the pipes shown, in order.
	Pipes []Pipe
	// Logger receives the server's logs (nil: discard).
	Logger *slog.Logger
	// SampleEvery is how often the Recorders are sampled (default 5 s; it
	// must match the Recorders').
	SampleEvery time.Duration
	// DepthEvery is the least time between two reads of a pipe's queue
	// depths (default and at most 30 s); they are read only while the page
	// or the API is requested.
	DepthEvery time.Duration
	// PrometheusURL, when set, is the Prometheus server that scrapes
	// these pipes (http://prometheus:9090): the page links each pipe's
	// queries to its expression browser for history beyond 15 minutes.
	// It must hold no credentials (the page shows it).
	PrometheusURL string
}

// Server serves the status page. Create it with New, start it with Start
// and stop it with Close; Handler serves it without listening (tests).
type Server struct {
	cfg      Config
	log      *slog.Logger
	pipesMu  sync.RWMutex // guards pipes and byName (Put after a reload)
	pipes    []*pipeState
	byName   map[string]*pipeState
	tmpl     *template.Template
	loopback bool
	prom     *url.URL // Config.PrometheusURL; nil: none

	ctx    context.Context // cancelled by Close: depth reads, redrives
	cancel context.CancelFunc
	wg     sync.WaitGroup
	srv    *http.Server
	ln     net.Listener
}

// pipeState is a pipe with what the server keeps of it.
type pipeState struct {
	Pipe
	name string

	mu        sync.Mutex
	depths    *Depths
	depthsAt  time.Time // when the last read finished
	depthsErr string
	reading   bool
	askedAt   time.Time // when the last read was started
	sampledAt time.Time // when the sample loop last sampled it (series.go)
	job       *redriveJob
	listing   atomic.Bool // the DLQ browser holds the dead-letter queue's messages (dlq.go)
}

// redriveJob is the progress of a redrive started from the page.
type redriveJob struct {
	State      string     `json:"state"` // running | done | failed
	Rate       float64    `json:"rate"`
	Moved      int        `json:"moved"`
	Skipped    int        `json:"skipped"`
	Failed     int        `json:"failed"`
	StartedAt  time.Time  `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	Error      string     `json:"error,omitempty"`
}

// ErrTokenNeeded is returned by New for a non-loopback address without a
// token.
var ErrTokenNeeded = errors.New("the status page on a non-loopback address needs a token: set --ui-token or PIPES_UI_TOKEN")

// New checks cfg and makes the server. An address that is not loopback
// ("0.0.0.0:8080", ":8080", a LAN address) is refused without a token.
func New(cfg Config) (*Server, error) {
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("status page address %q: %w", cfg.Addr, err)
	}
	loop := isLoopback(host)
	if !loop && cfg.Token == "" {
		return nil, fmt.Errorf("status page address %s: %w", cfg.Addr, ErrTokenNeeded)
	}
	if cfg.SampleEvery <= 0 {
		cfg.SampleEvery = 5 * time.Second
	}
	if cfg.DepthEvery <= 0 || cfg.DepthEvery > 30*time.Second {
		cfg.DepthEvery = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	tmpl, err := template.New("").Funcs(funcs).Funcs(dashFuncs).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("parsing the status page templates: %w", err)
	}
	prom, err := parsePrometheusURL(cfg.PrometheusURL)
	if err != nil {
		return nil, fmt.Errorf("status page: %w", err)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, tmpl: tmpl, loopback: loop, byName: map[string]*pipeState{}, prom: prom}
	for _, p := range cfg.Pipes {
		if err := s.Put(p); err != nil {
			return nil, err
		}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Put shows p, in place of the pipe of the same name if there is one (a
// pipe started again by a reload: give it the same Recorder to keep its
// history), else after the others. It is safe to call while serving.
func (s *Server) Put(p Pipe) error {
	if p.Control == nil || p.Recorder == nil {
		return errors.New("status page: every pipe needs its Control and Recorder")
	}
	if p.Scrub == nil {
		p.Scrub = func(s string) string { return s }
	}
	if p.Tail && p.ExecutionData {
		p.Recorder.EnableTail()
	}
	ps := &pipeState{Pipe: p, name: p.Control.Name()}
	s.pipesMu.Lock()
	defer s.pipesMu.Unlock()
	if old, ok := s.byName[ps.name]; ok {
		old.mu.Lock()
		ps.depths, ps.depthsAt, ps.depthsErr, ps.job = old.depths, old.depthsAt, old.depthsErr, old.job
		old.mu.Unlock()
		for i, q := range s.pipes {
			if q == old {
				s.pipes[i] = ps
			}
		}
	} else {
		s.pipes = append(s.pipes, ps)
	}
	s.byName[ps.name] = ps
	return nil
}

// Remove stops showing the pipe of that name (removed by a reload).
func (s *Server) Remove(name string) {
	s.pipesMu.Lock()
	defer s.pipesMu.Unlock()
	old, ok := s.byName[name]
	if !ok {
		return
	}
	delete(s.byName, name)
	s.pipes = slices.DeleteFunc(s.pipes, func(q *pipeState) bool { return q == old })
}

// shown is a copy of the pipes shown now, in order.
func (s *Server) shown() []*pipeState {
	s.pipesMu.RLock()
	defer s.pipesMu.RUnlock()
	return slices.Clone(s.pipes)
}

// isLoopback reports whether host names the loopback interface.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Start listens on cfg.Addr and serves until Close; it starts the
// sampling of the Recorders. It returns the address listened on.
func (s *Server) Start() (string, error) {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return "", fmt.Errorf("listening for the status page on %s: %w", s.cfg.Addr, err)
	}
	s.ln = ln
	s.srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute}
	s.wg.Go(func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("status page server stopped", "error", err)
		}
	})
	s.wg.Go(s.sampleLoop)
	return ln.Addr().String(), nil
}

// sampleLoop samples every Recorder every SampleEvery until Close.
func (s *Server) sampleLoop() {
	t := time.NewTicker(s.cfg.SampleEvery)
	defer t.Stop()
	now := time.Now()
	for _, p := range s.shown() {
		p.sample(now)
	}
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-t.C:
			for _, p := range s.shown() {
				p.sample(now)
			}
		}
	}
}

// Close stops the server: it cancels the redrives under way (what they
// left in a dead-letter queue stays there) and waits for its goroutines.
func (s *Server) Close() error {
	s.cancel()
	var err error
	if s.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err = s.srv.Shutdown(ctx)
	}
	s.wg.Wait()
	return err
}

// newCSRF makes a random CSRF token.
func newCSRF() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// touchDepths starts a read of p's depths when the last one is older than
// DepthEvery and none is under way. It does not block.
func (s *Server) touchDepths(p *pipeState) {
	if p.Depths == nil {
		return
	}
	p.mu.Lock()
	if p.reading || time.Since(p.askedAt) < s.cfg.DepthEvery || s.ctx.Err() != nil {
		p.mu.Unlock()
		return
	}
	p.reading, p.askedAt = true, time.Now()
	p.mu.Unlock()
	s.wg.Go(func() { s.readDepths(p) })
}

// refreshDepths makes the next request read p's depths again (after a
// redrive).
func (p *pipeState) refreshDepths() {
	p.mu.Lock()
	p.askedAt = time.Time{}
	p.mu.Unlock()
}

func (s *Server) readDepths(p *pipeState) {
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	d, err := p.Depths.Depths(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reading, p.depthsAt = false, time.Now()
	if err != nil {
		p.depthsErr = p.Scrub(err.Error())
		s.log.Warn("reading queue depths failed", "pipe", p.name, "error", p.depthsErr)
		if d.Queue == nil {
			return
		}
	} else {
		p.depthsErr = ""
	}
	p.depths = &d
}

// errRedriveRunning is refused when a redrive of the pipe is under way.
var errRedriveRunning = errors.New("a redrive of this pipe is under way")

// startRedrive starts a redrive of p's dead-letter queue at rate: move,
// or all of it when move is nil (a selection: dlq.go).
func (s *Server) startRedrive(p *pipeState, rate float64, move func(context.Context, float64, func(redrive.Entry)) (redrive.Summary, error)) error {
	if p.Redriver == nil {
		return errors.New("this pipe has no dead-letter queue that can be redriven from here")
	}
	if move == nil {
		move = p.Redriver.Redrive
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.job != nil && p.job.State == "running" {
		return errRedriveRunning
	}
	if p.listing.Load() {
		return errListing
	}
	job := &redriveJob{State: "running", Rate: rate, StartedAt: time.Now()}
	p.job = job
	s.log.Info("redrive started from the status page", "pipe", p.name, "rate", rate)
	s.wg.Go(func() {
		sum, err := move(s.ctx, rate, func(e redrive.Entry) {
			p.mu.Lock()
			defer p.mu.Unlock()
			switch e.Outcome {
			case redrive.Moved:
				job.Moved++
			case redrive.Skipped:
				job.Skipped++
			case redrive.Failed:
				job.Failed++
			}
		})
		now := time.Now()
		p.mu.Lock()
		job.FinishedAt = &now
		job.Moved, job.Skipped, job.Failed = sum.Moved, sum.Skipped, sum.Failed
		job.State = "done"
		if err != nil {
			job.State, job.Error = "failed", p.Scrub(err.Error())
		}
		p.mu.Unlock()
		p.refreshDepths()
		s.log.Info("redrive from the status page ended", "pipe", p.name, "moved", sum.Moved, "failed", sum.Failed, "state", job.State)
	})
	return nil
}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"rate": fmtRate,
	"int":  func(f float64) string { return fmt.Sprintf("%.0f", f) },
	"age":  fmtAge,
	"sparkOf": func(series []float64, key, label string, sampleSeconds float64) spark {
		return spark{Key: key, Label: label, Points: sparkPoints(series, sampleSeconds)}
	},
	"time":  func(t time.Time) string { return t.UTC().Format("15:04:05 UTC") },
	"depth": fmtDepth,
	"lower": strings.ToLower,
}

func fmtRate(f float64) string {
	if f >= 100 {
		return fmt.Sprintf("%.0f/s", f)
	}
	return fmt.Sprintf("%.1f/s", f)
}

func fmtAge(p *float64) string {
	if p == nil {
		return "–"
	}
	return (time.Duration(*p * float64(time.Second))).Round(time.Second).String()
}

func fmtDepth(d *Depth) string {
	if d == nil {
		return "–"
	}
	if d.InFlight < 0 {
		return fmt.Sprintf("%d", d.Visible)
	}
	return fmt.Sprintf("%d (%d in flight)", d.Visible, d.InFlight)
}

// spark is one sparkline of a template.
type spark struct{ Key, Label, Points string }

// Sparkline geometry: the SVG's viewBox.
const sparkW, sparkH = 120.0, 24.0

// sparkPoints is the points attribute of a sparkline's polyline: one point
// per sample (the newest at the right, History across the width, or the
// samples there are while the run is younger: not squashed to the right),
// the highest value at the top. app.js draws the same.
func sparkPoints(series []float64, sampleSeconds float64) string {
	if len(series) == 0 || sampleSeconds <= 0 {
		return ""
	}
	top := 0.0
	for _, v := range series {
		top = max(top, v)
	}
	slots := max(1, min(History.Seconds()/sampleSeconds, float64(len(series)-1)))
	var b strings.Builder
	start := sparkW - float64(len(series)-1)*sparkW/slots
	for i, v := range series {
		y := sparkH - 1
		if top > 0 {
			y = sparkH - 1 - v/top*(sparkH-2)
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.1f,%.1f", max(0, start+float64(i)*sparkW/slots), y)
	}
	return b.String()
}
