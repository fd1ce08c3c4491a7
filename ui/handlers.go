package ui

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// csrfCookie holds the page's CSRF token (double submit: the form's csrf
// field must equal it).
const csrfCookie = "pipes_csrf"

// Handler serves the pages, the API and the static files.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", s.overview)
	mux.HandleFunc("GET /pipes/{name}", s.pipePage)
	mux.HandleFunc("GET /pipes/{name}/failures/{seq}", s.failurePage)
	mux.HandleFunc("GET /pipes/{name}/confirm/{action}", s.confirmPage)
	mux.HandleFunc("POST /pipes/{name}/actions/{action}", s.formAction)
	mux.HandleFunc("GET /api/pipes", s.apiPipes)
	mux.HandleFunc("GET /api/pipes/{name}", s.apiPipe)
	mux.HandleFunc("GET /api/pipes/{name}/failures", s.apiFailures)
	mux.HandleFunc("GET /api/pipes/{name}/series", s.apiSeries)
	mux.HandleFunc("POST /api/pipes/{name}/{action}", s.apiAction)
	s.dlqRoutes(mux)
	s.tailRoutes(mux)
	return s.guard(mux)
}

// guard sets the security headers of every answer and refuses a Host
// that is not loopback on a loopback server (DNS rebinding).
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin") // not no-referrer: a form would then send Origin: null
		h.Set("Cache-Control", "no-store")
		if s.loopback {
			host := r.Host
			if hh, _, err := net.SplitHostPort(host); err == nil {
				host = hh
			}
			if !isLoopback(strings.Trim(host, "[]")) {
				http.Error(w, "this status page answers only to a loopback host name", http.StatusMisdirectedRequest)
				return
			}
		} else if !s.tokenIn(r) {
			// Off loopback, reading needs the token too: a browser asks
			// for it (Basic, any user name); scripts send it as Bearer.
			h.Set("WWW-Authenticate", `Basic realm="pipes status", charset="UTF-8"`)
			http.Error(w, "this status page needs the token (--ui-token): Authorization: Bearer TOKEN, or the password of Basic authentication", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) pipeOf(w http.ResponseWriter, r *http.Request) (*pipeState, bool) {
	s.pipesMu.RLock()
	p, ok := s.byName[r.PathValue("name")]
	s.pipesMu.RUnlock()
	if !ok {
		http.Error(w, "no such pipe", http.StatusNotFound)
	}
	return p, ok
}

// page data shared by every template.
type page struct {
	Title   string
	API     string // the JSON the script refreshes the page from ("": none)
	CSRF    string
	Message string
	Pipes   []PipeView
	Summary Summary
	Pipe    *DetailView
	Failure *Failure
	Action  string
	Rate    float64
	Script  string // a script of its own under /static, besides app.js
}

// csrfFor returns the request's CSRF token, setting a new cookie when it
// has none.
func csrfFor(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) == 32 {
		return c.Value
	}
	v := newCSRF()
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: v, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	return v
}

func (s *Server) render(w http.ResponseWriter, status int, name string, data any) {
	var buf bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&buf, name, data); err != nil {
		s.log.Error("rendering the status page", "page", name, "error", err)
		http.Error(w, "rendering the page failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encoding failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func (s *Server) views() []PipeView {
	shown := s.shown()
	out := make([]PipeView, 0, len(shown))
	for _, p := range shown {
		s.touchDepths(p)
		v, _ := s.view(p)
		out = append(out, v)
	}
	return out
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	v := s.views()
	s.render(w, http.StatusOK, "overview.html", page{Title: "pipes", API: "/api/pipes", Pipes: v, Summary: summarize(v)})
}

func (s *Server) pipePage(w http.ResponseWriter, r *http.Request) {
	p, ok := s.pipeOf(w, r)
	if !ok {
		return
	}
	s.touchDepths(p)
	d := s.detail(p)
	msg := ""
	switch r.URL.Query().Get("done") {
	case "redrive":
		msg = "Redrive started."
	case "pause":
		msg = "Polling paused."
	case "resume":
		msg = "Polling resumed."
	}
	s.render(w, http.StatusOK, "pipe.html", page{Title: p.name, API: "/api/pipes/" + url.PathEscape(p.name), Pipe: &d, Message: msg})
}

func (s *Server) failurePage(w http.ResponseWriter, r *http.Request) {
	p, ok := s.pipeOf(w, r)
	if !ok {
		return
	}
	seq, err := strconv.ParseInt(r.PathValue("seq"), 10, 64)
	f, found := p.Recorder.Failure(seq)
	if err != nil || !found {
		http.Error(w, "no such failure (only the last 50 are kept)", http.StatusNotFound)
		return
	}
	d := s.detail(p)
	s.render(w, http.StatusOK, "failure.html", page{Title: p.name + ": failure " + strconv.FormatInt(seq, 10), Pipe: &d, Failure: &f})
}

// actions are what the page can do.
var actions = map[string]string{"redrive": "Redrive the dead-letter queue", "pause": "Pause polling", "resume": "Resume polling"}

func (s *Server) confirmPage(w http.ResponseWriter, r *http.Request) {
	p, ok := s.pipeOf(w, r)
	if !ok {
		return
	}
	a := r.PathValue("action")
	if _, ok := actions[a]; !ok {
		http.Error(w, "no such action", http.StatusNotFound)
		return
	}
	d := s.detail(p)
	s.render(w, http.StatusOK, "confirm.html", page{Title: actions[a] + ": " + p.name, Pipe: &d, Action: a, CSRF: csrfFor(w, r), Rate: 10})
}

// errForbidden is an action refused by the token or the CSRF check.
type errForbidden struct {
	status int
	msg    string
}

func (e errForbidden) Error() string { return e.msg }

// sameToken compares tokens in constant time (of their hashes, so the
// length leaks nothing either).
func sameToken(got, want string) bool {
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1 && want != ""
}

// tokenIn reports whether the request carries the token as a Bearer
// token or as the password of Basic authentication.
func (s *Server) tokenIn(r *http.Request) bool {
	if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return sameToken(bearer, s.cfg.Token)
	}
	_, pass, ok := r.BasicAuth()
	return ok && sameToken(pass, s.cfg.Token)
}

// crossSite reports a request a browser sent from another site.
func crossSite(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return true
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return true
		}
	}
	return false
}

// authorize checks an action's token and, for a form, its CSRF token.
func (s *Server) authorize(r *http.Request, form bool) error {
	if s.cfg.Token == "" {
		return errForbidden{http.StatusForbidden, "actions are off: start pipes run with --ui-token or PIPES_UI_TOKEN to allow them"}
	}
	if crossSite(r) {
		return errForbidden{http.StatusForbidden, "cross-site request refused"}
	}
	if form {
		c, err := r.Cookie(csrfCookie)
		if err != nil || subtle.ConstantTimeCompare([]byte(c.Value), []byte(r.PostFormValue("csrf"))) != 1 {
			return errForbidden{http.StatusForbidden, "the form has expired or did not come from this page (CSRF check): open it again"}
		}
		if !sameToken(r.PostFormValue("token"), s.cfg.Token) {
			return errForbidden{http.StatusUnauthorized, "wrong or missing token"}
		}
		return nil
	}
	bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || !sameToken(bearer, s.cfg.Token) {
		return errForbidden{http.StatusUnauthorized, "wrong or missing token: send Authorization: Bearer TOKEN"}
	}
	return nil
}

// act does action on p.
func (s *Server) act(p *pipeState, action, rate string) error {
	switch action {
	case "pause":
		s.log.Info("pause from the status page", "pipe", p.name)
		p.Control.Pause()
	case "resume":
		s.log.Info("resume from the status page", "pipe", p.name)
		p.Control.Resume()
	case "redrive":
		r := 10.0
		if rate != "" {
			v, err := strconv.ParseFloat(rate, 64)
			if err != nil || v < 0 || v > 10000 {
				return errForbidden{http.StatusBadRequest, fmt.Sprintf("rate %q: give messages per second, 0 (no cap) to 10000", rate)}
			}
			r = v
		}
		return s.startRedrive(p, r, nil)
	default:
		return errForbidden{http.StatusNotFound, "no such action"}
	}
	return nil
}

func (s *Server) formAction(w http.ResponseWriter, r *http.Request) {
	p, ok := s.pipeOf(w, r)
	if !ok {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	a := r.PathValue("action")
	if err := s.authorize(r, true); err != nil {
		s.actionRefused(w, p, a, err)
		return
	}
	if err := s.act(p, a, r.PostFormValue("rate")); err != nil {
		s.actionRefused(w, p, a, err)
		return
	}
	http.Redirect(w, r, "/pipes/"+url.PathEscape(p.name)+"?done="+url.QueryEscape(a), http.StatusSeeOther)
}

func (s *Server) actionRefused(w http.ResponseWriter, p *pipeState, action string, err error) {
	status := http.StatusConflict
	var fe errForbidden
	if errors.As(err, &fe) {
		status = fe.status
	}
	s.log.Warn("status page action refused", "pipe", p.name, "action", action, "reason", err.Error())
	d := s.detail(p)
	s.render(w, status, "pipe.html", page{Title: p.name, Pipe: &d, Message: "Refused: " + err.Error()})
}

func (s *Server) apiPipes(w http.ResponseWriter, _ *http.Request) {
	v := s.views()
	s.writeJSON(w, http.StatusOK, struct {
		Summary Summary    `json:"summary"`
		Pipes   []PipeView `json:"pipes"`
	}{summarize(v), v})
}

func (s *Server) apiPipe(w http.ResponseWriter, r *http.Request) {
	p, ok := s.pipeOf(w, r)
	if !ok {
		return
	}
	s.touchDepths(p)
	s.writeJSON(w, http.StatusOK, s.detail(p))
}

func (s *Server) apiFailures(w http.ResponseWriter, r *http.Request) {
	p, ok := s.pipeOf(w, r)
	if !ok {
		return
	}
	s.writeJSON(w, http.StatusOK, struct {
		Failures []Failure `json:"failures"`
	}{p.Recorder.Failures()})
}

func (s *Server) apiAction(w http.ResponseWriter, r *http.Request) {
	p, ok := s.pipeOf(w, r)
	if !ok {
		return
	}
	a := r.PathValue("action")
	err := s.authorize(r, false)
	if err == nil {
		err = s.act(p, a, r.URL.Query().Get("rate"))
	}
	if err != nil {
		status := http.StatusConflict
		var fe errForbidden
		if errors.As(err, &fe) {
			status = fe.status
		}
		s.log.Warn("status page action refused", "pipe", p.name, "action", a, "reason", err.Error())
		s.writeJSON(w, status, map[string]string{"error": err.Error()})
		return
	}
	s.writeJSON(w, http.StatusAccepted, s.detail(p))
}
