package awsbatch

import (
	"fmt"

	"github.com/pipesproject/pipes/pipe"
)

// EntryError is a service's reason for refusing one entry of a batch call
// whose answer gives an error code and message per entry (EventBridge,
// Kinesis, Firehose; eventbridge.EntryError is this type). ErrorCode makes
// its code the ErrorCode of a dead-lettered item.
type EntryError struct {
	// Code is the service's error code, e.g.
	// "ProvisionedThroughputExceededException".
	Code string
	// Message is the service's explanation.
	Message string
}

// Error formats the code and the message.
func (e *EntryError) Error() string { return e.Code + ": " + e.Message }

// ErrorCode returns the service's error code.
func (e *EntryError) ErrorCode() string { return e.Code }

// EntryCodes classify the error codes of refused entries. It is read-only
// once built and safe for concurrent use.
type EntryCodes struct {
	// Throttle are the codes that mean slowing down: pipe.Throttled.
	Throttle map[string]bool
	// Retryable are the codes of transient failures.
	Retryable map[string]bool
	// OthersPermanent makes every other code pipe.Permanent; without it
	// they are retryable.
	OthersPermanent bool
}

// Refused returns the classified error of an entry refused with code and
// message; what says what was refused ("Kinesis refused the record for
// orders").
func (c EntryCodes) Refused(what, code, message string) error {
	err := fmt.Errorf("%s: %w", what, &EntryError{Code: code, Message: message})
	switch {
	case c.Throttle[code]:
		return pipe.Throttled(err)
	case c.Retryable[code] || !c.OthersPermanent:
		return err
	}
	return pipe.Permanent(err)
}
