package awsclient

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/pipesproject/pipes/internal/core"
)

func TestSQSClassifierKnowsSQSErrors(t *testing.T) {
	op := func(err error) error {
		return &smithy.OperationError{ServiceID: "SQS", OperationName: "ReceiveMessage", Err: err}
	}
	tests := []struct {
		name string
		err  error
		want string // "throttled", "permanent" or "retryable"
	}{
		{"a typed RequestThrottled is throttled", op(&types.RequestThrottled{Message: aws.String("x")}), "throttled"},
		{"a typed KmsThrottled is throttled", op(&types.KmsThrottled{}), "throttled"},
		{"a RequestThrottled code is throttled", statusErr(403, "RequestThrottled"), "throttled"},
		{"a KmsThrottled code is throttled", &smithy.GenericAPIError{Code: "KmsThrottled"}, "throttled"},
		{"a generic throttling code is throttled", &smithy.GenericAPIError{Code: "ThrottlingException"}, "throttled"},
		{"a typed QueueDoesNotExist is permanent", op(&types.QueueDoesNotExist{}), "permanent"},
		{"the query protocol's missing queue is permanent", op(&types.QueueDoesNotExist{ErrorCodeOverride: aws.String("AWS.SimpleQueueService.NonExistentQueue")}), "permanent"},
		{"a missing queue code without status is permanent", &smithy.GenericAPIError{Code: "QueueDoesNotExist"}, "permanent"},
		{"access denied is permanent", &smithy.GenericAPIError{Code: "AccessDenied"}, "permanent"},
		{"a bad signature is permanent", &smithy.GenericAPIError{Code: "SignatureDoesNotMatch"}, "permanent"},
		{"an unknown key id is permanent", &smithy.GenericAPIError{Code: "InvalidClientTokenId"}, "permanent"},
		{"an invalid parameter is permanent", &smithy.GenericAPIError{Code: "InvalidParameterValue"}, "permanent"},
		{"an unsupported operation is permanent", &smithy.GenericAPIError{Code: "AWS.SimpleQueueService.UnsupportedOperation"}, "permanent"},
		{"a denied KMS key is permanent", op(&types.KmsAccessDenied{}), "permanent"},
		{"a disabled KMS key is permanent", statusErr(400, "KmsDisabled"), "permanent"},
		{"a missing KMS key is permanent", statusErr(400, "KmsNotFound"), "permanent"},
		{"a KMS key in a bad state is permanent", statusErr(400, "KmsInvalidState"), "permanent"},
		{"another 4xx is permanent", statusErr(400, "SomethingElse"), "permanent"},
		{"too many messages in flight is retryable", statusErr(403, "OverLimit"), "retryable"},
		{"a purge in progress is retryable", statusErr(403, "AWS.SimpleQueueService.PurgeQueueInProgress"), "retryable"},
		{"a queue deleted recently is retryable", statusErr(400, "QueueDeletedRecently"), "retryable"},
		{"an internal error is retryable", &smithy.GenericAPIError{Code: "InternalError"}, "retryable"},
		{"a 500 is retryable", statusErr(500, "InternalError"), "retryable"},
		{"a connection error is retryable", errors.New("connection reset"), "retryable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SQS.Classify(tt.err)
			kind := "retryable"
			switch {
			case core.IsThrottled(got):
				kind = "throttled"
			case core.IsPermanent(got):
				kind = "permanent"
			}
			if kind != tt.want {
				t.Errorf("SQS.Classify(%v) is %s, want %s", tt.err, kind, tt.want)
			}
			if !errors.Is(got, tt.err) {
				t.Errorf("SQS.Classify(%v) = %v, which does not wrap the error", tt.err, got)
			}
		})
	}
}

func TestAPermanentHookMarksTypedErrors(t *testing.T) {
	type gone struct{ error }
	c := Classifier{Permanent: func(err error) bool { var g gone; return errors.As(err, &g) }}
	tests := []struct {
		name      string
		err       error
		permanent bool
	}{
		{"an error the hook reports is permanent", gone{errors.New("gone")}, true},
		{"an error it does not report is not", errors.New("reset"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := core.IsPermanent(c.Classify(tt.err)); got != tt.permanent {
				t.Errorf("permanent = %v, want %v", got, tt.permanent)
			}
		})
	}
}
