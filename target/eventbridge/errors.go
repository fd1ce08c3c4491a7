package eventbridge

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

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

// classify marks a failed call's error: Throttled when EventBridge asked
// to slow down; Permanent when retrying cannot help (access denied, no
// such bus, validation, any other 4xx except 408 and 429, a request the SDK
// refused to send); otherwise it is returned as it is.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if isThrottle(err) {
		return pipe.Throttled(err)
	}
	if isPermanent(err) {
		return pipe.Permanent(err)
	}
	return err
}

func isThrottle(err error) bool {
	if retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) == aws.TrueTernary {
		return true
	}
	var re *awshttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusTooManyRequests
}

func isPermanent(err error) bool {
	var invalid *smithy.InvalidParamsError
	if errors.As(err, &invalid) {
		return true
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "AccessDeniedException", "AccessDenied", "ResourceNotFoundException",
			"ValidationException", "InvalidArgument", "UnrecognizedClientException",
			"InvalidClientTokenId", "InvalidSignatureException", "SignatureDoesNotMatch",
			"OperationDisabledException", "IllegalStatusException":
			return true
		}
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		s := re.HTTPStatusCode()
		return s >= 400 && s <= 499 && s != http.StatusRequestTimeout && s != http.StatusTooManyRequests
	}
	return false
}

// entrySpecific reports whether a refused call may be the fault of one of
// its entries rather than of the bus or the caller's rights.
func entrySpecific(err error) bool {
	if !pipe.IsPermanent(err) {
		return false
	}
	var api smithy.APIError
	if !errors.As(err, &api) {
		return false
	}
	switch api.ErrorCode() {
	case "ValidationException", "InvalidArgument":
		return true
	}
	return false
}
