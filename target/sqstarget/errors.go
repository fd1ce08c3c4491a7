package sqstarget

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/pipesproject/pipes/internal/kit/awsclient"
	"github.com/pipesproject/pipes/pipe"
)

// EntryError is SQS's reason for refusing one entry of a SendMessageBatch
// call. ErrorCode makes its code the ErrorCode of a dead-lettered item.
type EntryError struct {
	// Code is SQS's error code, e.g. "InvalidParameterValue".
	Code string
	// Message is SQS's explanation.
	Message string
	// SenderFault is true when the entry itself is at fault.
	SenderFault bool
}

// Error formats the code and the message.
func (e *EntryError) Error() string { return e.Code + ": " + e.Message }

// ErrorCode returns SQS's error code.
func (e *EntryError) ErrorCode() string { return e.Code }

// entryError classifies a refused entry: Permanent when it is the sender's
// fault, Throttled for a throttling code, else retryable.
func entryError(f types.BatchResultErrorEntry, queue string) error {
	e := &EntryError{Code: aws.ToString(f.Code), Message: aws.ToString(f.Message), SenderFault: f.SenderFault}
	err := fmt.Errorf("SQS refused the message for %s: %w", queue, e)
	_, throttle := retry.DefaultThrottleErrorCodes[e.Code]
	switch {
	case throttle || e.Code == "RequestThrottled" || e.Code == "KmsThrottled":
		return pipe.Throttled(err)
	case e.SenderFault:
		return pipe.Permanent(err)
	}
	return err
}

// classifier marks a failed call's error: Throttled when SQS asked to slow
// down; Permanent when retrying cannot help (access denied, no such queue,
// invalid parameters, any other 4xx except 408 and 429, a request the SDK
// refused to send); otherwise it is returned as it is. It is the one SQS
// classifier, shared with the SQS source.
var classifier = awsclient.SQS

// entrySpecificCodes are the codes of a refused call that may be the fault
// of one of its entries rather than of the queue or the caller's rights.
var entrySpecificCodes = awsclient.Codes("InvalidParameterValue", "InvalidAttributeName", "InvalidAttributeValue", "MissingParameter",
	"InvalidMessageContents", "UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation",
	"BatchRequestTooLong", "AWS.SimpleQueueService.BatchRequestTooLong", "MalformedInput")
