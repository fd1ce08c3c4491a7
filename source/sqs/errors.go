package sqs

import (
	"errors"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/pipesproject/pipes/pipe"
)

// classify marks err as pipe.Throttled when SQS asked to slow down and as
// pipe.Permanent when retrying cannot help (access denied, no such queue,
// invalid request); other errors are returned as they are.
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
	var rt *types.RequestThrottled
	var kt *types.KmsThrottled
	if errors.As(err, &rt) || errors.As(err, &kt) {
		return true
	}
	if retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) == aws.TrueTernary {
		return true
	}
	var re *awshttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusTooManyRequests
}

func isPermanent(err error) bool {
	var qd *types.QueueDoesNotExist
	if errors.As(err, &qd) {
		return true
	}
	var api smithy.APIError
	if !errors.As(err, &api) {
		return false
	}
	switch api.ErrorCode() {
	case "AccessDenied", "AccessDeniedException",
		"QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue",
		"InvalidAddress", "InvalidClientTokenId", "UnrecognizedClientException",
		"SignatureDoesNotMatch", "InvalidSecurity",
		"InvalidParameterValue", "InvalidAttributeName", "MissingParameter",
		"KmsAccessDenied", "KmsDisabled", "KmsNotFound", "KmsInvalidState",
		"KmsInvalidKeyUsage", "KmsOptInRequired", "UnsupportedOperation":
		return true
	}
	return false
}
