package stepfunctions

import "github.com/pipesproject/pipes/internal/kit/awsclient"

// classifier marks a failed call's error: Throttled when Step Functions
// asked to slow down (ThrottlingException, ExecutionLimitExceeded: too many
// executions running, KMS throttling); Permanent when retrying cannot help
// (no such state machine, one being deleted, an invalid ARN, name or
// input, a sync start of a standard workflow, access denied, any other 4xx
// except 408 and 429, a request the SDK refused to send); otherwise it is
// returned as it is.
var classifier = awsclient.Classifier{
	ThrottleCodes: awsclient.Codes("ThrottlingException", "ExecutionLimitExceeded", "KmsThrottlingException"),
	PermanentCodes: awsclient.Codes("StateMachineDoesNotExist", "StateMachineDeleting", "InvalidArn",
		"InvalidExecutionInput", "InvalidName", "StateMachineTypeNotSupported", "ValidationException",
		"AccessDeniedException", "KmsAccessDeniedException", "KmsInvalidStateException",
		"UnrecognizedClientException", "InvalidSignatureException", "ExecutionAlreadyExists"),
}
