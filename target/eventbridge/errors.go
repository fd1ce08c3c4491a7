package eventbridge

import (
	"github.com/pipesproject/pipes/internal/kit/awsbatch"
	"github.com/pipesproject/pipes/internal/kit/awsclient"
)

// EntryError is EventBridge's reason for refusing one entry of a PutEvents
// call: its Code (e.g. "ThrottlingException") and Message. ErrorCode makes
// its code the ErrorCode of a dead-lettered item.
type EntryError = awsbatch.EntryError

// entryCodes classify a refused entry: ThrottlingException is Throttled,
// InternalException and InternalFailure are retryable, every other code is
// Permanent.
var entryCodes = awsbatch.EntryCodes{
	Throttle:        awsclient.Codes("ThrottlingException"),
	Retryable:       awsclient.Codes("InternalException", "InternalFailure"),
	OthersPermanent: true,
}

// entryError classifies an entry refused with code and message on bus.
func entryError(code, message, bus string) error {
	return entryCodes.Refused("EventBridge refused the event for bus "+bus, code, message)
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
