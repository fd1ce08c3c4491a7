package httpcore

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/pipesproject/pipes/pipe"
)

// Redacted stands in error texts where a secret was.
const Redacted = "[redacted]"

// Secrets are the values kept out of error texts: configured header
// values, and the credentials inside them and inside URLs. The zero value
// and nil hold none. Secrets are read-only once made, so safe for
// concurrent use.
type Secrets struct {
	values [][]byte // longest first, so that a value goes before its parts
}

// NewSecrets returns the secrets of header values and URLs. For each header
// value it keeps the value; when the value is a scheme and credentials
// ("Bearer t0ken", "Basic dXNlcjpwdw==", "Token t0ken"), the credentials
// too, and for Basic their decoded "user:password" and password. For each
// URL it keeps the userinfo (user, password) and every query parameter
// value. With each value it keeps its URL- and JSON-escaped forms, as a
// server may echo them so. Values shorter than 4 bytes are kept out: they
// would blank out ordinary text.
func NewSecrets(values []string, urls ...string) *Secrets {
	s := &Secrets{}
	for _, v := range values {
		s.addHeaderValue(v)
	}
	for _, raw := range urls {
		s.addURL(raw)
	}
	slices.SortFunc(s.values, func(a, b []byte) int { return len(b) - len(a) })
	s.values = slices.CompactFunc(s.values, bytes.Equal)
	return s
}

func (s *Secrets) addHeaderValue(v string) {
	s.add(v)
	scheme, cred, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !IsToken(scheme) {
		return
	}
	cred = strings.TrimSpace(cred)
	s.add(cred)
	if strings.EqualFold(scheme, "Basic") {
		if dec, err := base64.StdEncoding.DecodeString(cred); err == nil {
			s.add(string(dec))
			if _, pw, ok := strings.Cut(string(dec), ":"); ok {
				s.add(pw)
			}
		}
	}
}

func (s *Secrets) addURL(raw string) {
	u, err := url.Parse(raw)
	if err != nil {
		return
	}
	if u.User != nil {
		s.add(u.User.Username())
		if pw, ok := u.User.Password(); ok {
			s.add(pw)
			s.add(u.User.Username() + ":" + pw)
		}
	}
	for _, vs := range u.Query() {
		for _, v := range vs {
			s.add(v)
		}
	}
}

// add keeps v and the forms a server may echo it in.
func (s *Secrets) add(v string) {
	if len(v) < minSecretLen {
		return
	}
	forms := []string{v, url.QueryEscape(v), url.PathEscape(v)}
	if b, err := json.Marshal(v); err == nil {
		forms = append(forms, string(b[1:len(b)-1]))
	}
	for _, f := range forms {
		s.values = append(s.values, []byte(f))
	}
}

// longest is the length of the longest secret, 0 for none.
func (s *Secrets) longest() int {
	if s == nil || len(s.values) == 0 {
		return 0
	}
	return len(s.values[0])
}

// Redact returns text with every secret replaced by Redacted.
func (s *Secrets) Redact(text string) string {
	if s == nil {
		return text
	}
	for _, v := range s.values {
		if strings.Contains(text, string(v)) {
			text = strings.ReplaceAll(text, string(v), Redacted)
		}
	}
	return text
}

// Scrub returns b with every secret replaced by Redacted, control
// characters and invalid UTF-8 turned into spaces and runs of spaces
// collapsed, so that it can be quoted on one line.
func (s *Secrets) Scrub(b []byte) string {
	if s != nil {
		for _, v := range s.values {
			b = bytes.ReplaceAll(b, v, []byte(Redacted))
		}
	}
	var sb strings.Builder
	sb.Grow(len(b))
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size <= 1 || isControl(r) {
			r = ' '
		}
		sb.WriteRune(r)
		b = b[size:]
	}
	return strings.Join(strings.Fields(sb.String()), " ")
}

// holds reports whether the text of err, or of an error it wraps, holds a
// secret.
func (s *Secrets) holds(err error) bool {
	if err == nil {
		return false
	}
	text := err.Error()
	for _, v := range s.values {
		if strings.Contains(text, string(v)) {
			return true
		}
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
var kept = []error{pipe.ErrMalformedAnswer, ErrAnswerTooLarge, context.Canceled, context.DeadlineExceeded}

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
	if s == nil || len(s.values) == 0 || !s.holds(err) {
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
	if pipe.IsPermanent(err) {
		out = pipe.Permanent(out)
	}
	if pipe.IsThrottled(err) {
		out = pipe.Throttled(out)
	}
	return out
}
