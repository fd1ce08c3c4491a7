package ui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pipesproject/pipes/internal/core"
	"golang.org/x/time/rate"
)

// The live tail: /pipes/NAME/tail shows, as they happen, sampled messages
// passing a pipe's stages (received, filter, enrichment, target input,
// outcome), streamed from /api/pipes/NAME/tail as Server-Sent Events. It
// is off unless asked for (Pipe.Tail, `pipes run --ui-tail`) and only for
// pipes whose logging includes execution data; samples are scrubbed as
// failures' are. Each viewer gets at most TailRate events a second; with
// no viewer the tail holds nothing and the pipe builds no event.

// Bounds of the tail.
const (
	// TailRate is the most events a second a viewer gets.
	TailRate = 10
	// MaxTailViewers is the most viewers of one pipe's tail at a time.
	MaxTailViewers = 8
	// tailFollowed is the most messages a viewer follows at once; a
	// message is followed from its receive to its outcome.
	tailFollowed = 10
	// tailBuffer is a viewer's queue of events not written yet.
	tailBuffer = 2 * TailRate
	// tailForget drops a followed message whose outcome never came.
	tailForget = time.Minute
)

// TailEvent is one message at one stage as the tail streams it.
type TailEvent struct {
	Stage     string    `json:"stage"`
	MessageID string    `json:"messageId"`
	Detail    string    `json:"detail,omitempty"`
	Sample    string    `json:"sample,omitempty"`
	At        time.Time `json:"at"`
}

// tail fans a pipe's tap out to its viewers. Safe for concurrent use.
type tail struct {
	scrub   func(string) string
	viewers atomic.Int32 // len(subs), read without the lock by Tapping

	mu   sync.Mutex
	subs map[*viewer]struct{}
}

// viewer is one open tail stream.
type viewer struct {
	lim    *rate.Limiter
	ch     chan TailEvent
	follow map[string]time.Time // message id → when followed
}

func newTail(scrub func(string) string) *tail {
	return &tail{scrub: scrub, subs: map[*viewer]struct{}{}}
}

// errTailFull is refused to a viewer beyond MaxTailViewers.
var errTailFull = fmt.Errorf("the tail has %d viewers already: close one", MaxTailViewers)

// join adds a viewer; leave must follow.
func (t *tail) join() (*viewer, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.subs) >= MaxTailViewers {
		return nil, errTailFull
	}
	v := &viewer{lim: rate.NewLimiter(TailRate, TailRate), ch: make(chan TailEvent, tailBuffer), follow: map[string]time.Time{}}
	t.subs[v] = struct{}{}
	t.viewers.Store(int32(len(t.subs)))
	return v, nil
}

func (t *tail) leave(v *viewer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.subs, v)
	t.viewers.Store(int32(len(t.subs)))
}

// tapping reports whether anyone watches.
func (t *tail) tapping() bool { return t.viewers.Load() > 0 }

// tapped hands e to the viewers that follow its message, within their
// rates; a viewer starts following a message at its receive when it has
// room for the message's five stages. It never blocks: an event a viewer
// has no room for is dropped.
func (t *tail) tapped(e core.TapEvent) {
	var out *TailEvent // built once, for the first viewer that takes it
	t.mu.Lock()
	defer t.mu.Unlock()
	for v := range t.subs {
		now := e.At
		if e.Stage == core.TapReceived {
			v.forget(now)
			if len(v.follow) >= tailFollowed || v.lim.TokensAt(now) < 5 {
				continue
			}
			v.follow[e.MessageID] = now
		}
		if _, ok := v.follow[e.MessageID]; !ok {
			continue
		}
		if e.Stage == core.TapOutcome {
			delete(v.follow, e.MessageID)
		}
		if !v.lim.AllowN(now, 1) {
			continue
		}
		if out == nil {
			out = &TailEvent{Stage: e.Stage, MessageID: e.MessageID, Detail: t.scrub(e.Detail), Sample: t.scrub(e.Sample), At: e.At}
		}
		select {
		case v.ch <- *out:
		default:
		}
	}
}

// forget drops the messages followed for longer than tailForget.
func (v *viewer) forget(now time.Time) {
	for id, at := range v.follow {
		if now.Sub(at) > tailForget {
			delete(v.follow, id)
		}
	}
}

// tailPage is the data of tail.html.
type tailPage struct {
	page
	On     bool // the tail is on for this pipe
	Stream string
}

// tailRoutes registers the tail's page and stream.
func (s *Server) tailRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /pipes/{name}/tail", s.tailPage)
	mux.HandleFunc("GET /api/pipes/{name}/tail", s.tailStream)
}

// tail is the pipe's tail, nil when it is off.
func (p *pipeState) tail() *tail { return p.Recorder.tail.Load() }

func (s *Server) tailPage(w http.ResponseWriter, r *http.Request) {
	p, ok := s.pipeOf(w, r)
	if !ok {
		return
	}
	d := s.detail(p)
	s.render(w, http.StatusOK, "tail.html", tailPage{page: page{Title: p.name + ": live tail", Pipe: &d, Script: "tail.js"},
		On: p.tail() != nil, Stream: "/api/pipes/" + url.PathEscape(p.name) + "/tail"})
}

// tailHeartbeat is how often an idle stream sends a comment, so that
// proxies keep it open.
const tailHeartbeat = 15 * time.Second

func (s *Server) tailStream(w http.ResponseWriter, r *http.Request) {
	p, ok := s.pipeOf(w, r)
	if !ok {
		return
	}
	t := p.tail()
	if t == nil {
		http.Error(w, "the live tail is off: it needs the pipe's logging.include_execution_data and pipes run --ui-tail", http.StatusNotFound)
		return
	}
	v, err := t.join()
	if err != nil {
		http.Error(w, err.Error(), http.StatusTooManyRequests)
		return
	}
	defer t.leave(v)
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second)) // the server's WriteTimeout does not end a stream
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write([]byte(": pipes live tail of " + p.name + "\n\n")) {
		return
	}
	beat := time.NewTicker(tailHeartbeat)
	defer beat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		case <-beat.C:
			if !write([]byte(": keep-alive\n\n")) {
				return
			}
		case e := <-v.ch:
			b, _ := json.Marshal(e) // strings and a time always encode
			if !write(append(append([]byte("event: tap\ndata: "), b...), '\n', '\n')) {
				return
			}
		}
	}
}
