package httpcore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pipesproject/pipes/pipe"
)

func TestSecretsRedactEveryFormOfAValue(t *testing.T) {
	s := NewSecrets([]string{"Bearer t0ken-abc", "Basic dXNlcjpwYXNzd29yZA==", "a/b+c<d>", "abc"},
		"https://admin:hunter22@example.com/x?key=k3y-value&n=1")
	tests := []struct{ name, in, want string }{
		{"a whole header value", "got Bearer t0ken-abc", "got [redacted]"},
		{"the credentials after a scheme", "invalid token: t0ken-abc", "invalid token: [redacted]"},
		{"basic credentials, encoded", "bad dXNlcjpwYXNzd29yZA==", "bad [redacted]"},
		{"basic credentials, decoded", "user:password denied", "[redacted] denied"},
		{"a basic password alone", "password is wrong", "[redacted] is wrong"},
		{"a JSON-escaped value", `{"key":"a/b+c\u003cd\u003e"}`, `{"key":"[redacted]"}`},
		{"a URL-escaped value", "key=a%2Fb%2Bc%3Cd%3E", "key=[redacted]"},
		{"the URL's password", "for hunter22", "for [redacted]"},
		{"the URL's userinfo", "admin:hunter22@", "[redacted]@"},
		{"a URL query value", "bad key k3y-value", "bad key [redacted]"},
		{"a value shorter than 4 bytes is kept", "abc n=1", "abc n=1"},
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
		{"permanent", fmt.Errorf("delivering: %w", pipe.Permanent(leak)), pipe.IsPermanent},
		{"throttled", pipe.Throttled(fmt.Errorf("answered 429: %w", leak)), pipe.IsThrottled},
		{"malformed", fmt.Errorf("%w: id %w", pipe.ErrMalformedAnswer, leak), func(e error) bool { return errors.Is(e, pipe.ErrMalformedAnswer) }},
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

// hiding is an error whose text does not show the error it wraps.
type hiding struct{ err error }

func (h *hiding) Error() string { return "something failed" }
func (h *hiding) Unwrap() error { return h.err }
