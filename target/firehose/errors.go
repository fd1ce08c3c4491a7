package firehose

import (
	"github.com/pipesproject/pipes/internal/kit/awsbatch"
	"github.com/pipesproject/pipes/internal/kit/awsclient"
)

// entryCodes classify the ErrorCode of a refused record: the delivery
// stream is over its throughput (ServiceUnavailableException, throttled),
// or Firehose failed inside (retryable). Other codes stay retryable: the
// pipe's retries and dead-letter queue bound them.
var entryCodes = awsbatch.EntryCodes{
	Throttle:  awsclient.Codes("ServiceUnavailableException"),
	Retryable: awsclient.Codes("InternalFailure"),
}

// classifier marks a failed call's error: Throttled when Firehose asked to
// slow down (ServiceUnavailableException, besides the SDK's codes and 429);
// Permanent when retrying cannot help (access denied, no such stream,
// invalid argument, KMS refusals, any other 4xx except 408 and 429, a
// request the SDK refused to send); otherwise it is returned as it is.
var classifier = awsclient.Classifier{
	ThrottleCodes: awsclient.Codes("ServiceUnavailableException", "LimitExceededException"),
	PermanentCodes: awsclient.Codes("AccessDeniedException", "ResourceNotFoundException", "InvalidArgumentException",
		"ValidationException", "UnrecognizedClientException", "InvalidSignatureException",
		"InvalidKMSResourceException", "InvalidSourceException"),
	RetryableCodes: awsclient.Codes("ResourceInUseException", "InternalFailure"),
}

// entrySpecificCodes are the codes of a refused call that may be the fault
// of one of its records rather than of the stream or the caller's rights.
var entrySpecificCodes = awsclient.Codes("InvalidArgumentException", "ValidationException")
