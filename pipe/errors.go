package pipe

import "errors"

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as a client error that retrying will not fix (a 4xx
// answer other than 408 and 429, an invalid request, access denied).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err, or an error it wraps, was marked Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

type throttledError struct{ err error }

func (e *throttledError) Error() string { return e.err.Error() }
func (e *throttledError) Unwrap() error { return e.err }

// Throttled marks err as the target asking to slow down (HTTP 429, an SDK
// throttling code). A pipe halves its concurrency when it sees one.
func Throttled(err error) error {
	if err == nil {
		return nil
	}
	return &throttledError{err: err}
}

// IsThrottled reports whether err, or an error it wraps, was marked Throttled.
func IsThrottled(err error) bool {
	var t *throttledError
	return errors.As(err, &t)
}

type exhaustedError struct {
	err      error
	attempts int
}

func (e *exhaustedError) Error() string { return e.err.Error() }
func (e *exhaustedError) Unwrap() error { return e.err }

// Exhausted marks err as the last failure of an item whose in-runner
// retries ran out after attempts deliveries. With `on_exhausted:
// dead_letter` the pipe sends such items to its dead-letter target.
func Exhausted(err error, attempts int) error {
	if err == nil {
		return nil
	}
	return &exhaustedError{err: err, attempts: attempts}
}

// IsExhausted reports whether err says an item's retries ran out, and after
// how many attempts.
func IsExhausted(err error) (bool, int) {
	var e *exhaustedError
	if errors.As(err, &e) {
		return true, e.attempts
	}
	return false, 0
}
