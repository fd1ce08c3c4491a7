package cloudwatchlogs

import "github.com/pipesproject/pipes/internal/kit/awsclient"

// classifier marks a failed call's error: Throttled when CloudWatch Logs
// asked to slow down; Permanent when retrying cannot help (a log group that
// does not exist, access denied, invalid parameters, a KMS key it cannot
// use, any other 4xx except 408 and 429, a request the SDK refused to
// send); otherwise it is returned as it is (LimitExceededException, which
// CreateLogStream answers when too many are created at once, is
// retryable).
var classifier = awsclient.Classifier{
	ThrottleCodes: awsclient.Codes("ThrottlingException"),
	PermanentCodes: awsclient.Codes("ResourceNotFoundException", "InvalidParameterException",
		"AccessDeniedException", "UnrecognizedClientException", "InvalidSignatureException",
		"ValidationException"),
	RetryableCodes: awsclient.Codes("LimitExceededException", "ServiceUnavailableException", "OperationAbortedException"),
}

// entrySpecificCodes are the codes of a refused call that may be the fault
// of one of its entries rather than of the group or the caller's rights.
var entrySpecificCodes = awsclient.Codes("InvalidParameterException")
