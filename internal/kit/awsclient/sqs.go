package awsclient

import (
	"errors"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQS classifies the errors of failed Amazon SQS calls, for the SQS source,
// the SQS target and anything else calling SQS: throttled on
// RequestThrottled and KmsThrottled (typed or by code); permanent on no
// such queue (typed or by code, JSON and query protocols), access denied,
// bad credentials or signature, invalid parameters, unsupported operations
// and KMS key problems; retryable, although 4xx, on OverLimit (too many
// messages in flight), PurgeQueueInProgress and QueueDeletedRecently; then
// the zero Classifier's rules.
var SQS = Classifier{
	Throttled: func(err error) bool {
		var rt *types.RequestThrottled
		var kt *types.KmsThrottled
		return errors.As(err, &rt) || errors.As(err, &kt)
	},
	ThrottleCodes: Codes("RequestThrottled", "KmsThrottled",
		"AWS.SimpleQueueService.RequestThrottled", "AWS.SimpleQueueService.KmsThrottled"),
	Permanent: func(err error) bool {
		var qd *types.QueueDoesNotExist
		return errors.As(err, &qd)
	},
	PermanentCodes: Codes("AccessDenied", "AccessDeniedException",
		"QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue",
		"InvalidAddress", "InvalidClientTokenId", "UnrecognizedClientException",
		"SignatureDoesNotMatch", "InvalidSecurity",
		"InvalidParameterValue", "InvalidAttributeName", "InvalidAttributeValue", "MissingParameter",
		"InvalidMessageContents", "UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation",
		"KmsAccessDenied", "KmsDisabled", "KmsNotFound", "KmsInvalidState",
		"KmsInvalidKeyUsage", "KmsOptInRequired"),
	RetryableCodes: Codes("OverLimit", "AWS.SimpleQueueService.OverLimit",
		"PurgeQueueInProgress", "AWS.SimpleQueueService.PurgeQueueInProgress",
		"QueueDeletedRecently", "AWS.SimpleQueueService.QueueDeletedRecently"),
}
