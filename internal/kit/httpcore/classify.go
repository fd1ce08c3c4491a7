// Package httpcore is the HTTP client core that pipes' http enrichment and
// http target share: checking the configuration (URL, method, headers),
// building and sending a request, reading the answer with a size cap,
// classifying a non-2xx answer into pipe.Permanent, pipe.Throttled or
// retryable, and keeping secrets (header values, URL credentials) out of
// every error text.
package httpcore

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/pipesproject/pipes/pipe"
)

// Failure returns the error of a non-2xx answer with status, quoting
// snippet when it is not empty: pipe.Throttled for 429; retryable for 408
// and 5xx; pipe.Permanent for a redirect (they are not followed), any
// other 4xx and a 1xx answer that is not interim.
func Failure(status int, snippet string) error {
	// The status text is ours, not the server's reason phrase, which could
	// echo anything.
	var statusErr error = &StatusError{Status: status, err: fmt.Errorf("answered %d %s", status, http.StatusText(status))}
	if snippet != "" {
		statusErr = &StatusError{Status: status, err: fmt.Errorf("answered %d %s: %q", status, http.StatusText(status), snippet)}
	}
	switch {
	case status == http.StatusTooManyRequests:
		return pipe.Throttled(statusErr)
	case status == http.StatusRequestTimeout || status >= 500:
		return statusErr
	case status >= 300 && status <= 399:
		return pipe.Permanent(fmt.Errorf("%w (redirects are not followed: set url to the final address)", statusErr))
	default:
		// Other 4xx, and 1xx answers that are not interim.
		return pipe.Permanent(statusErr)
	}
}

// StatusError is the error of a non-2xx answer: its text says the status
// (and quotes the start of the answer); HTTPStatusCode gives the status to
// logs (Pipes' error.httpStatusCode) through errors.As.
type StatusError struct {
	// Status is the answer's HTTP status.
	Status int
	// RetryAfter is what the answer's Retry-After header asked for, on a
	// 429 or 503 (0: none, or not readable).
	RetryAfter time.Duration
	err        error
}

// maxRetryAfter is the longest Retry-After honoured: SQS's longest
// visibility timeout, 12 hours.
const maxRetryAfter = 12 * time.Hour

// ParseRetryAfter reads a Retry-After header value (RFC 9110 §10.2.3):
// a number of seconds, or an HTTP date, taken from now. It reports false
// for a value that is neither; a date in the past is 0, and a delay longer
// than 12 hours (SQS's longest visibility timeout) is cut to 12 hours.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		var secs int64
		for i := 0; i < len(v); i++ {
			c := v[i]
			if c < '0' || c > '9' {
				return 0, false
			}
			if secs < int64(maxRetryAfter/time.Second) {
				secs = secs*10 + int64(c-'0')
			}
		}
		return min(time.Duration(secs)*time.Second, maxRetryAfter), true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(at.Sub(now), 0), maxRetryAfter), true
}

// RetryAfterOf returns the Retry-After of the answer err is the failure
// of (StatusError.RetryAfter), or 0.
func RetryAfterOf(err error) time.Duration {
	var se *StatusError
	if errors.As(err, &se) {
		return se.RetryAfter
	}
	return 0
}

func (e *StatusError) Error() string { return e.err.Error() }

// HTTPStatusCode is the answer's status.
func (e *StatusError) HTTPStatusCode() int { return e.Status }

func isControl(r rune) bool { return unicode.IsControl(r) }

// Truncate cuts s to at most n bytes on a rune boundary, marking the cut
// with "…" (counted in the n bytes).
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// IsToken reports whether s is an HTTP token (RFC 9110), as header names
// and methods must be.
func IsToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// ValidHeaderValue reports whether v can be sent as a header value: no
// control characters other than tab.
func ValidHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
