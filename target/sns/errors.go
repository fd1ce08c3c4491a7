package sns

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/pipesproject/pipes/internal/kit/awsclient"
	"github.com/pipesproject/pipes/pipe"
)

// EntryError is SNS's reason for refusing one entry of a PublishBatch call.
// ErrorCode makes its code the ErrorCode of a dead-lettered item.
type EntryError struct {
	// Code is SNS's error code, e.g. "InvalidParameter".
	Code string
	// Message is SNS's explanation.
	Message string
	// SenderFault is true when the entry itself is at fault.
	SenderFault bool
}

// Error formats the code and the message.
func (e *EntryError) Error() string { return e.Code + ": " + e.Message }

// ErrorCode returns SNS's error code.
func (e *EntryError) ErrorCode() string { return e.Code }

// throttleCodes are SNS's codes for slowing down, besides the SDK's.
var throttleCodes = map[string]bool{"Throttled": true, "KMSThrottling": true}

// entryError classifies a refused entry: Throttled for a throttling code,
// Permanent when it is the sender's fault, else retryable.
func entryError(f types.BatchResultErrorEntry, topic string) error {
	e := &EntryError{Code: aws.ToString(f.Code), Message: aws.ToString(f.Message), SenderFault: f.SenderFault}
	err := fmt.Errorf("SNS refused the message for %s: %w", topic, e)
	_, throttle := retry.DefaultThrottleErrorCodes[e.Code]
	switch {
	case throttle || throttleCodes[e.Code]:
		return pipe.Throttled(err)
	case e.SenderFault:
		return pipe.Permanent(err)
	}
	return err
}

// classifier marks a failed call's error: Throttled when SNS asked to slow
// down; Permanent when retrying cannot help (authorization error, no such
// topic, invalid parameters, any other 4xx except 408 and 429, a request
// the SDK refused to send); otherwise it is returned as it is.
var classifier = awsclient.Classifier{
	ThrottleCodes: throttleCodes,
	PermanentCodes: awsclient.Codes("AuthorizationError", "AccessDenied", "AccessDeniedException",
		"NotFound", "ResourceNotFound", "InvalidClientTokenId", "UnrecognizedClientException",
		"SignatureDoesNotMatch", "InvalidSecurity",
		"InvalidParameter", "ParameterValueInvalid", "ValidationException",
		"BatchEntryIdsNotDistinct", "BatchRequestTooLong", "EmptyBatchRequest",
		"InvalidBatchEntryId", "TooManyEntriesInBatchRequest",
		"KMSAccessDenied", "KMSDisabled", "KMSInvalidState", "KMSNotFound", "KMSOptInRequired"),
}

// entrySpecificCodes are the codes of a refused call that may be the fault
// of one of its entries rather than of the topic or the caller's rights.
var entrySpecificCodes = awsclient.Codes("InvalidParameter", "ParameterValueInvalid", "ValidationException", "BatchRequestTooLong")
