package eventbridge

import (
	"fmt"

	"github.com/pipesproject/pipes/internal/kit/awsclient"
	"github.com/pipesproject/pipes/pipe"
)

// EntryError is EventBridge's reason for refusing one entry of a PutEvents
// call. ErrorCode makes its code the ErrorCode of a dead-lettered item.
type EntryError struct {
	// Code is EventBridge's error code, e.g. "ThrottlingException".
	Code string
	// Message is EventBridge's explanation.
	Message string
}

// Error formats the code and the message.
func (e *EntryError) Error() string { return e.Code + ": " + e.Message }

// ErrorCode returns EventBridge's error code.
func (e *EntryError) ErrorCode() string { return e.Code }

// entryError classifies a refused entry: ThrottlingException is Throttled,
// InternalException and InternalFailure are retryable, every other code is
// Permanent.
func entryError(code, message, bus string) error {
	err := fmt.Errorf("EventBridge refused the event for bus %s: %w", bus, &EntryError{Code: code, Message: message})
	switch code {
	case "ThrottlingException":
		return pipe.Throttled(err)
	case "InternalException", "InternalFailure":
		return err
	}
	return pipe.Permanent(err)
}

// classifier marks a failed call's error: Throttled when EventBridge asked
// to slow down; Permanent when retrying cannot help (access denied, no
// such bus, validation, any other 4xx except 408 and 429, a request the SDK
// refused to send); otherwise it is returned as it is.
var classifier = awsclient.Classifier{
	PermanentCodes: awsclient.Codes("AccessDeniedException", "AccessDenied", "ResourceNotFoundException",
		"ValidationException", "InvalidArgument", "UnrecognizedClientException",
		"InvalidClientTokenId", "InvalidSignatureException", "SignatureDoesNotMatch",
		"OperationDisabledException", "IllegalStatusException"),
}

// entrySpecificCodes are the codes of a refused call that may be the fault
// of one of its entries rather than of the bus or the caller's rights.
var entrySpecificCodes = awsclient.Codes("ValidationException", "InvalidArgument")
