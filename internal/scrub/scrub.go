// Package scrub takes secrets (AMQP and management passwords) out of the
// text of errors that come from libraries, keeping what the error is for
// errors.Is and errors.As. One copy for the RabbitMQ source, target and
// dead-letter tools.
package scrub

import (
	"net/url"
	"strings"
)

// Placeholder stands in an error's text where a secret was.
const Placeholder = "xxxxx"

// Secrets are the strings kept out of error texts, with the escaped forms
// they take inside URLs.
type Secrets []string

// New returns the secrets of values (empty ones are left out), each with
// its URL query and path escapes.
func New(values ...string) Secrets {
	var s Secrets
	for _, v := range values {
		if v == "" {
			continue
		}
		s = append(s, v)
		for _, e := range []string{url.QueryEscape(v), url.PathEscape(v)} {
			if e != v {
				s = append(s, e)
			}
		}
	}
	return s
}

// Error returns err with every secret in its text replaced by Placeholder,
// or err itself when its text holds none. The result unwraps to err, so
// errors.Is and errors.As (pipe.IsPermanent, say) still see what it wraps;
// code that prints an unwrapped error must scrub it too.
func (s Secrets) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := s.Text(msg)
	if clean == msg {
		return err
	}
	return &scrubbed{msg: clean, err: err}
}

// Text returns text with every secret replaced by Placeholder.
func (s Secrets) Text(text string) string {
	for _, v := range s {
		if v != "" && strings.Contains(text, v) {
			text = strings.ReplaceAll(text, v, Placeholder)
		}
	}
	return text
}

type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }
