package kinesis

import (
	"github.com/pipesproject/pipes/internal/kit/awsbatch"
	"github.com/pipesproject/pipes/internal/kit/awsclient"
)

// entryCodes classify the ErrorCode of a refused record: the stream's
// shard is over its throughput (throttled), or Kinesis failed inside
// (retryable). Other codes (KMS refusals seen per record) stay retryable:
// the pipe's retries and dead-letter queue bound them.
var entryCodes = awsbatch.EntryCodes{
	Throttle:  awsclient.Codes("ProvisionedThroughputExceededException", "KMSThrottlingException"),
	Retryable: awsclient.Codes("InternalFailure"),
}

// classifier marks a failed call's error: Throttled when Kinesis asked to
// slow down (besides the SDK's codes, the account's and the shards'
// limits); Permanent when retrying cannot help (access denied, no such
// stream, invalid argument, KMS refusals, any other 4xx except 408 and
// 429, a request the SDK refused to send); otherwise it is returned as it
// is.
var classifier = awsclient.Classifier{
	ThrottleCodes: awsclient.Codes("ProvisionedThroughputExceededException", "LimitExceededException", "KMSThrottlingException"),
	PermanentCodes: awsclient.Codes("AccessDeniedException", "ResourceNotFoundException", "InvalidArgumentException",
		"ValidationException", "UnrecognizedClientException", "InvalidSignatureException",
		"KMSAccessDeniedException", "KMSDisabledException", "KMSInvalidStateException",
		"KMSNotFoundException", "KMSOptInRequired"),
	RetryableCodes: awsclient.Codes("ResourceInUseException", "InternalFailure"),
}

// entrySpecificCodes are the codes of a refused call that may be the fault
// of one of its records rather than of the stream or the caller's rights.
var entrySpecificCodes = awsclient.Codes("InvalidArgumentException", "ValidationException")
