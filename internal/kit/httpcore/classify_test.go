package httpcore

import (
	"encoding/base64"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pipesproject/pipes/internal/core"
)

func TestFailureClassifiesTheStatus(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		snippet  string
		wantKind string // "throttled", "permanent" or "retryable"
		wantText string
	}{
		{"429 is throttled", 429, "", "throttled", "answered 429 Too Many Requests"},
		{"408 is retryable", 408, "", "retryable", "answered 408 Request Timeout"},
		{"5xx is retryable and quotes the snippet", 503, "busy", "retryable", `answered 503 Service Unavailable: "busy"`},
		{"a redirect is permanent and says it is not followed", 302, "", "permanent",
			"answered 302 Found (redirects are not followed: set url to the final address)"},
		{"another 4xx is permanent", 404, "no such path", "permanent", `answered 404 Not Found: "no such path"`},
		{"a 1xx that is not interim is permanent", 101, "", "permanent", "answered 101 Switching Protocols"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Failure(tt.status, tt.snippet)
			kind := "retryable"
			switch {
			case core.IsThrottled(err):
				kind = "throttled"
			case core.IsPermanent(err):
				kind = "permanent"
			}
			if kind != tt.wantKind || !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("Failure(%d) = %s %q, want %s containing %q", tt.status, kind, err, tt.wantKind, tt.wantText)
			}
		})
	}
}

func TestScrubRedactsSecretsAndKeepsOneLine(t *testing.T) {
	secrets := NewSecrets([]string{"Bearer s3cr3t", "k3y!"})
	tests := []struct{ name, in, want string }{
		{"plain text is kept", "not found", "not found"},
		{"secrets are redacted", "bad token Bearer s3cr3t and k3y!", "bad token [redacted] and [redacted]"},
		{"control characters and newlines become one space", "a\n\n\tb\x00c", "a b c"},
		{"invalid UTF-8 becomes a space", "a\xffb", "a b"},
		{"empty stays empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := secrets.Scrub([]byte(tt.in)); got != tt.want {
				t.Errorf("Scrub(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
	// The longest form is the query-escaped base64 ("...dA%3D%3D").
	if got := secrets.longest(); got != len(url.QueryEscape(base64.StdEncoding.EncodeToString([]byte("Bearer s3cr3t")))) {
		t.Errorf("longest = %d", got)
	}
	if got := (*Secrets)(nil).longest(); got != 0 {
		t.Errorf("longest of nil = %d", got)
	}
}

func TestTruncateCutsOnARuneBoundaryAndMarksTheCut(t *testing.T) {
	tests := []struct {
		name, in string
		n        int
		want     string
	}{
		{"a short string is kept", "abc", 5, "abc"},
		{"a string of exactly n is kept", "abcde", 5, "abcde"},
		{"a long string is cut with the mark counted", "abcdefgh", 5, "ab…"},
		{"a cut inside a rune moves back", "éééé", 6, "é…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Truncate(tt.in, tt.n); got != tt.want {
				t.Errorf("Truncate(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
			}
		})
	}
}

func TestHeaderNamesAndValuesAreChecked(t *testing.T) {
	tests := []struct {
		name        string
		in          string
		token, html bool
	}{
		{"a header name is a token", "X-Api-Key", true, true},
		{"an empty string is no token", "", false, true},
		{"a space is no token but a valid value", "a b", false, true},
		{"a tab is a valid value", "a\tb", false, true},
		{"a newline is neither", "a\nb", false, false},
		{"DEL is neither", "a\x7fb", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsToken(tt.in); got != tt.token {
				t.Errorf("IsToken(%q) = %t", tt.in, got)
			}
			if got := ValidHeaderValue(tt.in); got != tt.html {
				t.Errorf("ValidHeaderValue(%q) = %t", tt.in, got)
			}
		})
	}
}

func FuzzScrubAndTruncate(f *testing.F) {
	for _, s := range []string{"plain", "tok3n in\nlines", "\xff\xfe", strings.Repeat("é", 200)} {
		f.Add(s)
	}
	secrets := NewSecrets([]string{"tok3n"})
	f.Fuzz(func(t *testing.T, s string) {
		got := Truncate(secrets.Scrub([]byte(s)), 64)
		if len(got) > 64 || !utf8.ValidString(got) || strings.Contains(got, "tok3n") || strings.ContainsAny(got, "\n\r\t") {
			t.Fatalf("Scrub and Truncate of %q gave %q", s, got)
		}
	})
}

func BenchmarkScrubA4KAnswer(b *testing.B) {
	answer := []byte(strings.Repeat("error: upstream failed, token tok3n\n", 4<<10/36))
	secrets := NewSecrets([]string{"Bearer tok3n"})
	b.ReportAllocs()
	for b.Loop() {
		_ = Truncate(secrets.Scrub(answer), 256)
	}
}
