package lambdatarget

import (
	"net/http"

	"github.com/pipesproject/pipes/internal/kit/awsclient"
)

// classifier marks a failed call's error: Throttled when Lambda asked to
// slow down; Permanent when retrying cannot help (no such function, access
// denied, invalid request content, a request too large, any other 4xx
// except 408, 409 and 429, a request the SDK refused to send); otherwise
// it is returned as it is.
var classifier = awsclient.Classifier{
	ThrottleCodes: awsclient.Codes("EC2ThrottledException"),
	PermanentCodes: awsclient.Codes("ResourceNotFoundException", "AccessDeniedException", "AccessDenied",
		"InvalidRequestContentException", "RequestTooLargeException",
		"InvalidParameterValueException", "UnsupportedMediaTypeException",
		"SerializedRequestEntityTooLargeException", "RecursiveInvocationException",
		"UnrecognizedClientException", "InvalidSignatureException", "KMSAccessDeniedException"),
	RetryableCodes:  awsclient.Codes("ResourceConflictException", "ResourceNotReadyException"),
	RetryableStatus: []int{http.StatusConflict},
}
