package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/redrive"
)

// The DLQ browser: /pipes/NAME/dlq lists the messages of a pipe's
// dead-letter queue the way `pipes dlq inspect` reads them (SQS: received,
// held hidden while the list is read, then made visible again; RabbitMQ:
// basic.get without ack, then requeued in place), and redrives a selection
// of them or all, with the token, the CSRF check and a rate, as the
// page's redrive action. The page deletes nothing but by a redrive.

// MaxListed is the most dead-letter messages the DLQ browser lists.
const MaxListed = 50

// DLQBrowser is the optional ability of a Redriver to list its dead-letter
// queue and to redrive a selection of it (sqs and rabbitmq sources).
type DLQBrowser interface {
	// Browse returns up to max messages of the dead-letter queue without
	// consuming them (pipes dlq inspect's hold and release). It blocks for
	// about a second at least: SQS has no peek.
	Browse(ctx context.Context, max int) ([]redrive.View, error)
	// RedriveIDs moves the messages with these ids back to the source
	// queue at most rate a second (0: no cap), sending each before it is
	// deleted (acked) from the dead-letter queue; the others stay. It
	// blocks until they are moved or the queue has no more.
	RedriveIDs(ctx context.Context, ids []string, rate float64, report func(redrive.Entry)) (redrive.Summary, error)
}

var (
	_ DLQBrowser = (*sqsQueues)(nil)
	_ DLQBrowser = (*rabbitQueues)(nil)
)

// DLQMessage is one dead-lettered message as the DLQ browser shows it.
type DLQMessage struct {
	// ID is its id in the dead-letter queue (what a redrive selects).
	ID string `json:"id"`
	// Deliveries says how often it was received (SQS
	// ApproximateReceiveCount) or dead-lettered (RabbitMQ x-death: count,
	// reason and queue of each entry), and pipes' attempt count.
	Deliveries string `json:"deliveries"`
	// AgeSeconds is the time since it was sent (SQS) or last
	// dead-lettered (RabbitMQ); null when unknown.
	AgeSeconds *float64 `json:"ageSeconds"`
	// Reason is why it failed, from the failure context pipes'
	// dead-letter stage adds (stage, ErrorCode, ErrorMessage), secrets
	// taken out; "" when pipes did not write it (the queue's redrive
	// policy or the broker moved it).
	Reason string `json:"reason,omitempty"`
	// LastFailure is, when Reason is "", the last failure pipes saw of a
	// message of the same id in its source ("at target: … (06:50:19
	// UTC)"), from the pipe's last 50 failures: the queue's redrive
	// policy keeps the message id, so this is most often why it was moved.
	LastFailure string `json:"lastFailure,omitempty"`
	// Preview is the start of the body, only when the pipe's logging
	// includes execution data, secrets taken out.
	Preview string `json:"preview,omitempty"`
	// Size is the body's length in bytes.
	Size int `json:"size"`
}

// DLQView is the DLQ browser's page and /api/pipes/NAME/dlq.
type DLQView struct {
	// Messages are the messages listed, from the head of the queue (at
	// most MaxListed).
	Messages []DLQMessage `json:"messages"`
	// ListedAt is when they were read.
	ListedAt time.Time `json:"listedAt"`
	// Error says why the list could not be read (or is not complete).
	Error string `json:"error,omitempty"`
	// ExecutionData tells whether bodies are previewed.
	ExecutionData bool `json:"executionData"`
}

// dlqPage is the data of dlq.html.
type dlqPage struct {
	page
	DLQ    DLQView
	Listed bool // false while a redrive runs: nothing was read
}

// browserOf is p's DLQBrowser, or nil.
func browserOf(p *pipeState) DLQBrowser {
	b, _ := p.Redriver.(DLQBrowser)
	return b
}

// errListing is refused while a listing of the pipe's dead-letter queue
// holds its messages.
var errListing = errors.New("the dead-letter queue is being listed: try again in a few seconds")

// listDLQ reads p's dead-letter queue. One listing at a time per pipe,
// and none while a redrive runs (it would hide the messages the redrive
// looks for).
func (s *Server) listDLQ(ctx context.Context, p *pipeState, b DLQBrowser) (DLQView, error) {
	v := DLQView{ExecutionData: p.ExecutionData, Messages: []DLQMessage{}}
	if !p.listing.CompareAndSwap(false, true) {
		return v, errListing
	}
	defer p.listing.Store(false)
	p.mu.Lock()
	running := p.job != nil && p.job.State == "running"
	p.mu.Unlock()
	if running {
		return v, errRedriveRunning
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	views, err := b.Browse(ctx, MaxListed)
	v.ListedAt = time.Now()
	for _, m := range views {
		v.Messages = append(v.Messages, s.dlqMessage(p, m, v.ListedAt))
	}
	if err != nil {
		v.Error = p.Scrub(err.Error())
		s.log.Warn("listing the dead-letter queue failed", "pipe", p.name, "error", v.Error)
	}
	return v, nil
}

// dlqMessage is the row of one listed message.
func (s *Server) dlqMessage(p *pipeState, m redrive.View, now time.Time) DLQMessage {
	out := DLQMessage{ID: m.ID, Size: len(m.Body)}
	var parts []string
	if m.ReceiveCount != "" {
		parts = append(parts, "received "+m.ReceiveCount+"×")
	}
	at := m.Sent
	for _, d := range m.Deaths {
		parts = append(parts, fmt.Sprintf("%s %d× from %s", d.Reason, d.Count, d.Queue))
		last := d.Last
		if last.IsZero() {
			last = d.First
		}
		if last.After(at) {
			at = last
		}
	}
	ctx := map[string]string{}
	for _, f := range m.Context {
		ctx[f.Name] = f.Value
	}
	if a := ctx[pipe.DLQAttempts]; a != "" {
		parts = append(parts, "pipes attempts "+a)
	} else if m.Attempts != "" {
		parts = append(parts, "pipes attempts "+m.Attempts)
	}
	out.Deliveries = strings.Join(parts, "; ")
	if !at.IsZero() {
		age := now.Sub(at).Seconds()
		out.AgeSeconds = &age
	}
	var reason []string
	if st := ctx[pipe.DLQStage]; st != "" {
		reason = append(reason, "at "+st)
	}
	if c := ctx[pipe.DLQErrorCode]; c != "" {
		reason = append(reason, c)
	}
	if msg := ctx[pipe.DLQErrorMessage]; msg != "" {
		reason = append(reason, msg)
	}
	out.Reason = p.Scrub(strings.Join(reason, ": "))
	if out.Reason == "" && p.Recorder != nil {
		if f, ok := p.Recorder.lastFailureOf(m.ID); ok {
			out.LastFailure = fmt.Sprintf("at %s: %s (%s UTC)", f.Stage, f.Error, f.At.UTC().Format(time.TimeOnly))
		}
	}
	if p.ExecutionData {
		out.Preview = p.Scrub(preview(m.Body))
	}
	return out
}

// preview is the start of a body as the page shows it: UTF-8 text as it
// is (the template escapes it), cut after redrive.PreviewBytes at a
// character boundary with "…"; other bytes as `pipes dlq inspect` shows
// them ("(binary)" and hex).
func preview(body []byte) string {
	if !utf8.Valid(body) {
		return redrive.Preview(body, redrive.PreviewBytes)
	}
	if len(body) <= redrive.PreviewBytes {
		return string(body)
	}
	cut := redrive.PreviewBytes
	for cut > 0 && !utf8.RuneStart(body[cut]) {
		cut--
	}
	return string(body[:cut]) + "…"
}

// dlqRoutes registers the DLQ browser's pages and API.
func (s *Server) dlqRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /pipes/{name}/dlq", s.dlqPage)
	mux.HandleFunc("POST /pipes/{name}/dlq/redrive", s.dlqFormRedrive)
	mux.HandleFunc("GET /api/pipes/{name}/dlq", s.apiDLQ)
	mux.HandleFunc("POST /api/pipes/{name}/dlq/redrive", s.apiDLQRedrive)
}

func (s *Server) dlqPage(w http.ResponseWriter, r *http.Request) {
	p, ok := s.pipeOf(w, r)
	if !ok {
		return
	}
	s.touchDepths(p)
	b := browserOf(p)
	if b == nil {
		http.Error(w, "this pipe has no dead-letter queue the page can list (sqs and rabbitmq sources)", http.StatusNotFound)
		return
	}
	d := s.detail(p)
	data := dlqPage{page: page{Title: p.name + ": dead-letter queue", Pipe: &d, CSRF: csrfFor(w, r), Rate: 10,
		Script: "dlq.js", API: "/api/pipes/" + url.PathEscape(p.name)}}
	if r.URL.Query().Get("done") == "redrive" {
		data.Message = "Redrive started."
	}
	v, err := s.listDLQ(r.Context(), p, b)
	data.DLQ, data.Listed = v, err == nil
	if err != nil && data.Message == "" {
		data.Message = err.Error()
	}
	s.render(w, http.StatusOK, "dlq.html", data)
}

func (s *Server) apiDLQ(w http.ResponseWriter, r *http.Request) {
	p, ok := s.pipeOf(w, r)
	if !ok {
		return
	}
	b := browserOf(p)
	if b == nil {
		s.writeJSON(w, http.StatusNotFound, map[string]string{"error": "this pipe has no dead-letter queue the page can list"})
		return
	}
	v, err := s.listDLQ(r.Context(), p, b)
	if err != nil {
		s.writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
		return
	}
	s.writeJSON(w, http.StatusOK, v)
}

// maxIDsForm bounds a redrive form: MaxListed ids and the other fields.
const maxIDsForm = 64 << 10

// dlqRedriveOf reads a redrive request's selection: the ids, or all.
func dlqRedriveOf(ids []string, scope string) ([]string, error) {
	switch scope {
	case "all":
		return nil, nil
	case "", "selected":
		var sel []string
		seen := map[string]bool{}
		for _, id := range ids {
			if id != "" && !seen[id] {
				seen[id] = true
				sel = append(sel, id)
			}
		}
		if len(sel) == 0 {
			return nil, errForbidden{http.StatusBadRequest, "no message selected: tick the messages to redrive, or redrive all"}
		}
		if len(sel) > MaxListed {
			return nil, errForbidden{http.StatusBadRequest, fmt.Sprintf("%d messages selected: at most %d at a time", len(sel), MaxListed)}
		}
		return sel, nil
	}
	return nil, errForbidden{http.StatusBadRequest, fmt.Sprintf("scope %q: selected or all", scope)}
}

// parseRate reads a redrive's rate: messages per second, 0 (no cap) to
// 10000, 10 when not given.
func parseRate(rate string) (float64, error) {
	if rate == "" {
		return 10, nil
	}
	v, err := strconv.ParseFloat(rate, 64)
	if err != nil || v < 0 || v > 10000 {
		return 0, errForbidden{http.StatusBadRequest, fmt.Sprintf("rate %q: give messages per second, 0 (no cap) to 10000", rate)}
	}
	return v, nil
}

// dlqRedrive starts the redrive of a selection (ids) or of everything
// (ids nil) of p's dead-letter queue.
func (s *Server) dlqRedrive(p *pipeState, ids []string, rate string) error {
	r, err := parseRate(rate)
	if err != nil {
		return err
	}
	if ids == nil {
		return s.startRedrive(p, r, nil)
	}
	b := browserOf(p)
	if b == nil {
		return errors.New("this pipe has no dead-letter queue that can be redriven by selection")
	}
	return s.startRedrive(p, r, func(ctx context.Context, rate float64, report func(redrive.Entry)) (redrive.Summary, error) {
		return b.RedriveIDs(ctx, ids, rate, report)
	})
}

func (s *Server) dlqFormRedrive(w http.ResponseWriter, r *http.Request) {
	p, ok := s.pipeOf(w, r)
	if !ok {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxIDsForm)
	err := s.authorize(r, true)
	if err == nil {
		var ids []string
		if ids, err = dlqRedriveOf(r.PostForm["id"], r.PostFormValue("scope")); err == nil {
			err = s.dlqRedrive(p, ids, r.PostFormValue("rate"))
		}
	}
	if err != nil {
		s.actionRefused(w, p, "redrive", err)
		return
	}
	http.Redirect(w, r, "/pipes/"+url.PathEscape(p.name)+"/dlq?done=redrive", http.StatusSeeOther)
}

func (s *Server) apiDLQRedrive(w http.ResponseWriter, r *http.Request) {
	p, ok := s.pipeOf(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	err := s.authorize(r, false)
	if err == nil {
		var ids []string
		if ids, err = dlqRedriveOf(q["id"], q.Get("scope")); err == nil {
			err = s.dlqRedrive(p, ids, q.Get("rate"))
		}
	}
	if err != nil {
		status := http.StatusConflict
		var fe errForbidden
		if errors.As(err, &fe) {
			status = fe.status
		}
		s.log.Warn("status page action refused", "pipe", p.name, "action", "redrive", "reason", err.Error())
		s.writeJSON(w, status, map[string]string{"error": err.Error()})
		return
	}
	s.writeJSON(w, http.StatusAccepted, s.detail(p))
}
