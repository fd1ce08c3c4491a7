package lambdatarget

import (
	"errors"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"github.com/pipesproject/pipes/pipe"
)

// classify marks a failed call's error: Throttled when Lambda asked to
// slow down; Permanent when retrying cannot help (no such function, access
// denied, invalid request content, a request too large, any other 4xx
// except 408, 409 and 429, a request the SDK refused to send); otherwise
// it is returned as it is.
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
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "EC2ThrottledException" {
		return true
	}
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
		case "ResourceNotFoundException", "AccessDeniedException", "AccessDenied",
			"InvalidRequestContentException", "RequestTooLargeException",
			"InvalidParameterValueException", "UnsupportedMediaTypeException",
			"SerializedRequestEntityTooLargeException", "RecursiveInvocationException",
			"UnrecognizedClientException", "InvalidSignatureException", "KMSAccessDeniedException":
			return true
		case "ResourceConflictException", "ResourceNotReadyException":
			return false
		}
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		s := re.HTTPStatusCode()
		return s >= 400 && s <= 499 && s != http.StatusRequestTimeout && s != http.StatusConflict && s != http.StatusTooManyRequests
	}
	return false
}
