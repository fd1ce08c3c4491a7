package httpcore

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/internal/kit/partial"
	"github.com/pipesproject/pipes/internal/scrub"
	"github.com/pipesproject/pipes/pipe"
)

// Redacted stands in error texts where a secret was.
const Redacted = "[redacted]"

// Secrets are the values kept out of error texts: configured header
// values, and the credentials inside them and inside URLs, in every form
// (scrub.Forms). The zero value and nil hold none. Secrets are read-only
// once made, so safe for concurrent use.
type Secrets struct {
	forms  scrub.Secrets
	maxLen int // the length of the longest form, 0 for none
}

// NewSecrets returns the secrets of header values and URLs. For each header
// value it keeps the value; when the value is a scheme and credentials
// ("Bearer t0ken", "Basic dXNlcjpwdw==", "Token t0ken"), the credentials
// too, and for Basic their decoded "user:password", user and password
// (scrub.HeaderValue). For each URL it keeps the userinfo (user, password,
// and "user:password", which an HTTP client sends base64-encoded as Basic
// credentials) and every query parameter value. With each value it keeps
// every form a server may echo it in: URL- and JSON-escaped, and
// base64-encoded, alone or inside a longer encoded text (scrub.Forms).
// Values shorter than 4 bytes are kept out: they would blank out ordinary
// text.
func NewSecrets(values []string, urls ...string) *Secrets {
	var vals []string
	for _, v := range values {
		vals = append(vals, scrub.HeaderValue(v)...)
	}
	for _, raw := range urls {
		vals = append(vals, urlSecrets(raw)...)
	}
	vals = slices.DeleteFunc(vals, func(v string) bool { return len(v) < minSecretLen })
	s := &Secrets{forms: scrub.New(vals...)}
	if len(s.forms) > 0 {
		s.maxLen = len(s.forms[0]) // longest first
	}
	return s
}

// urlSecrets are the secret values of a URL: its userinfo and query values.
func urlSecrets(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	var out []string
	if u.User != nil {
		out = append(out, u.User.Username())
		if pw, ok := u.User.Password(); ok {
			out = append(out, scrub.Userinfo(u.User.Username(), pw)...)
		}
	}
	for _, vs := range u.Query() {
		out = append(out, vs...)
	}
	return out
}

// longest is the length of the longest secret, 0 for none.
func (s *Secrets) longest() int {
	if s == nil {
		return 0
	}
	return s.maxLen
}

// Redact returns text with every secret replaced by Redacted.
func (s *Secrets) Redact(text string) string {
	if s == nil {
		return text
	}
	return s.forms.Replace(text, Redacted)
}

// Scrub returns b with every secret replaced by Redacted, control
// characters and invalid UTF-8 turned into spaces and runs of spaces
// collapsed, so that it can be quoted on one line.
func (s *Secrets) Scrub(b []byte) string {
	text := s.Redact(string(b))
	var sb strings.Builder
	sb.Grow(len(text))
	for len(text) > 0 {
		r, size := utf8.DecodeRuneInString(text)
		if r == utf8.RuneError && size <= 1 || isControl(r) {
			r = ' '
		}
		sb.WriteRune(r)
		text = text[size:]
	}
	return strings.Join(strings.Fields(sb.String()), " ")
}

// holds reports whether the text of err, or of an error it wraps, holds a
// secret.
func (s *Secrets) holds(err error) bool {
	if err == nil {
		return false
	}
	if s.forms.Contains(err.Error()) {
		return true
	}
	switch e := err.(type) {
	case interface{ Unwrap() error }:
		return s.holds(e.Unwrap())
	case interface{ Unwrap() []error }:
		return slices.ContainsFunc(e.Unwrap(), s.holds)
	}
	return false
}

// kept are the sentinels a redacted error still matches with errors.Is.
var kept = []error{partial.ErrMalformedAnswer, ErrAnswerTooLarge, context.Canceled, context.DeadlineExceeded}

// redactedError stands for an error whose text held a secret.
type redactedError struct {
	text   string
	is     []error
	status int // the answer's HTTP status, 0 when none
}

// HTTPStatusCode is the status of the answer the error was about (0: none).
func (e *redactedError) HTTPStatusCode() int { return e.status }

func (e *redactedError) Error() string { return e.text }

func (e *redactedError) Is(target error) bool { return slices.Contains(e.is, target) }

// Error returns err when neither its text nor any wrapped error's text
// holds a secret. Otherwise it returns an error of the same text with the
// secrets redacted, which wraps nothing (a wrapped error would show the
// secret) but keeps the classification: pipe.Permanent, pipe.Throttled,
// and errors.Is for pipe.ErrMalformedAnswer, ErrAnswerTooLarge and the
// context errors.
func (s *Secrets) Error(err error) error {
	if s == nil || len(s.forms) == 0 || !s.holds(err) {
		return err
	}
	r := &redactedError{text: s.Redact(err.Error())}
	if se, ok := errors.AsType[interface {
		error
		HTTPStatusCode() int
	}](err); ok {
		r.status = se.HTTPStatusCode()
	}
	for _, k := range kept {
		if errors.Is(err, k) {
			r.is = append(r.is, k)
		}
	}
	var out error = r
	if core.IsPermanent(err) {
		out = pipe.Permanent(out)
	}
	if core.IsThrottled(err) {
		out = pipe.Throttled(out)
	}
	return out
}
