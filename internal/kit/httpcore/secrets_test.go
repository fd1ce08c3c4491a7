package httpcore

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/internal/kit/partial"
	"github.com/pipesproject/pipes/pipe"
)

func TestSecretsRedactEveryFormOfAValue(t *testing.T) {
	s := NewSecrets([]string{"Bearer t0ken-abc", "Basic dXNlcjpwYXNzd29yZA==", "a/b+c<d>?", "abc"},
		"https://admin:hunter22@example.com/x?key=k3y-value&n=1")
	tests := []struct{ name, in, want string }{
		{"a whole header value", "got Bearer t0ken-abc", "got [redacted]"},
		{"the credentials after a scheme", "invalid token: t0ken-abc", "invalid token: [redacted]"},
		{"basic credentials, encoded", "bad dXNlcjpwYXNzd29yZA==", "bad [redacted]"},
		{"basic credentials, decoded", "user:password denied", "[redacted] denied"},
		{"a basic password alone", "password is wrong", "[redacted] is wrong"},
		{"a JSON-escaped value", `{"key":"a/b+c\u003cd\u003e?"}`, `{"key":"[redacted]"}`},
		{"a URL-escaped value", "key=a%2Fb%2Bc%3Cd%3E%3F", "key=[redacted]"},
		{"the URL's password", "for hunter22", "for [redacted]"},
		{"the URL's userinfo", "admin:hunter22@", "[redacted]@"},
		{"a URL query value", "bad key k3y-value", "bad key [redacted]"},
		{"a basic user alone", "no user here", "no [redacted] here"},
		{"the credentials base64-encoded", "token b64 " + b64("t0ken-abc"), "token b64 [redacted]"},
		{"the credentials base64-encoded, URL-safe and raw", "token " + base64.RawURLEncoding.EncodeToString([]byte("a/b+c<d>?")), "token [redacted]"},
		{"the whole header value base64-encoded", "was " + b64("Bearer t0ken-abc"), "was [redacted]"},
		{"the URL's userinfo as Basic credentials", "got Basic " + b64("admin:hunter22"), "got Basic [redacted]"},
		{"a query value base64-encoded", "sig=" + b64("k3y-value"), "sig=[redacted]"},
		{"a value shorter than 4 bytes is kept", "abc n=1 " + b64("abc"), "abc n=1 " + b64("abc")},
		{"text without secrets is kept", "not found", "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.Redact(tt.in); got != tt.want {
				t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestErrorRedactsTheWholeChainAndKeepsTheClassification(t *testing.T) {
	s := NewSecrets([]string{"Bearer t0ken-abc"})
	leak := errors.New("echo t0ken-abc")
	tests := []struct {
		name  string
		err   error
		check func(error) bool
	}{
		{"permanent", fmt.Errorf("delivering: %w", pipe.Permanent(leak)), core.IsPermanent},
		{"throttled", pipe.Throttled(fmt.Errorf("answered 429: %w", leak)), core.IsThrottled},
		{"malformed", fmt.Errorf("%w: id %w", partial.ErrMalformedAnswer, leak), func(e error) bool { return errors.Is(e, partial.ErrMalformedAnswer) }},
		{"cancelled", fmt.Errorf("cancelled: %w: %w", context.Canceled, leak), func(e error) bool { return errors.Is(e, context.Canceled) }},
		{"a secret only in a wrapped error's text", &hiding{leak}, func(e error) bool { return true }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := s.Error(tt.err)
			for e := got; e != nil; e = errors.Unwrap(e) {
				if strings.Contains(e.Error(), "t0ken") {
					t.Errorf("error %q holds the secret", e)
				}
			}
			if !tt.check(got) {
				t.Errorf("error %v lost its classification", got)
			}
		})
	}
	clean := fmt.Errorf("x: %w", context.DeadlineExceeded)
	if got := s.Error(clean); got != clean {
		t.Errorf("an error without secrets was replaced: %v", got)
	}
}

// TestSecretsRedactACredentialBase64EncodedInsideALongerText: a server
// that base64-encodes a JSON document quoting the token (a JWT-like echo)
// shows at most its edges, at each of the three offsets it can start at.
func TestSecretsRedactACredentialBase64EncodedInsideALongerText(t *testing.T) {
	const token = "sk-live-0123456789abcdef"
	s := NewSecrets([]string{"Bearer " + token})
	for _, prefix := range []string{`{"t":"`, `{"t": "`, `{"t":  "`} {
		text := b64(prefix + token + `"}`)
		got := s.Redact("echo " + text)
		if !strings.Contains(got, Redacted) || strings.Contains(got, b64(token)[4:20]) {
			t.Errorf("offset %d: %q from %q", len(prefix)%3, got, text)
		}
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// hiding is an error whose text does not show the error it wraps.
type hiding struct{ err error }

func (h *hiding) Error() string { return "something failed" }
func (h *hiding) Unwrap() error { return h.err }
