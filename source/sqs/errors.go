package sqs

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/pipesproject/pipes/internal/kit/awsclient"
)

// classify marks a failed SQS call's error with awsclient.SQS:
// pipe.Throttled when SQS asked to slow down, pipe.Permanent when retrying
// cannot help (access denied, no such queue, invalid request, missing
// credentials), the error as it is otherwise.
var classify = awsclient.SQS.Classify

// openError is a failed Open said in one line: where the file names what
// failed, what failed and what to check. It wraps the SDK's classified
// error (pipe.IsPermanent and errors.As see through it); its text leaves
// the SDK's out (Open logs that at debug level).
type openError struct {
	msg string
	err error
}

func (e *openError) Error() string { return e.msg }
func (e *openError) Unwrap() error { return e.err }

// explain turns the error of Open's SQS call op into an *openError when it
// is one of the problems a user fixes: the endpoint cannot be reached, the
// queue does not exist, access is denied. Other errors are wrapped as
// they were ("doing: err"). The SDK's own text goes to the debug log.
// Matching is on typed errors (errors.As), not on error-code strings:
// SQS-compatible servers do not all send AWS's codes.
func (s *Source) explain(op, doing string, err error) error {
	classified := classify(err)
	msg := s.describe(err)
	if msg == "" {
		return fmt.Errorf("%s: %w", doing, classified)
	}
	s.log.Debug("SQS call failed", "operation", op, "queue", s.name, "error", err.Error())
	return &openError{msg: msg, err: classified}
}

// describe is explain's line for err, "" when err is none of its problems.
func (s *Source) describe(err error) string {
	at := func(pos string) string {
		if pos == "" {
			return ""
		}
		return pos + ": "
	}
	var qd *types.QueueDoesNotExist
	if errors.As(err, &qd) {
		return fmt.Sprintf("%sSQS queue %s does not exist at %s: create it with `pipes send --create`, or check `%s`",
			at(s.cfg.QueueAt), s.name, s.endpoint, s.queueKey())
	}
	if denied(err) {
		return fmt.Sprintf("%saccess to SQS queue %s is denied: check that the credentials' role or user may call sqs:GetQueueUrl, sqs:GetQueueAttributes, sqs:ReceiveMessage, sqs:DeleteMessage and sqs:ChangeMessageVisibility on it, and the queue's policy (--log-level debug shows SQS's answer)",
			at(s.cfg.QueueAt), s.name)
	}
	var send *smithyhttp.RequestSendError
	if errors.As(err, &send) {
		where := s.cfg.EndpointAt
		if where == "" {
			where = s.cfg.QueueAt
		}
		check := "check that the server is running there and the source's `endpoint` (or AWS_ENDPOINT_URL_SQS)"
		if s.cfg.Endpoint == "" && strings.HasSuffix(s.endpoint, ".amazonaws.com") {
			check = "check the network (a proxy, a firewall) and the source's `region`"
		}
		return fmt.Sprintf("%scannot reach the SQS endpoint %s (%s): %s", at(where), s.endpoint, sendReason(err), check)
	}
	return ""
}

// queueKey is the pipeline file key that names the queue.
func (s *Source) queueKey() string {
	switch {
	case s.cfg.QueueURL != "":
		return "queue_url"
	case s.cfg.QueueARN != "":
		return "queue_arn"
	}
	return "queue_name"
}

// denied reports an access denied answer: AccessDenied or
// AccessDeniedException (typed as an API error), or HTTP 403 without a
// code of bad credentials.
func denied(err error) bool {
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "AccessDenied", "AccessDeniedException", "AWS.SimpleQueueService.AccessDenied":
			return true
		case "InvalidClientTokenId", "SignatureDoesNotMatch", "UnrecognizedClientException", "InvalidSecurity":
			return false
		}
	}
	var re *awshttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusForbidden
}

// sendReason is why a request could not be sent, in a few words:
// "connection refused", "no such host", "timed out".
func sendReason(err error) string {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		if dns.IsNotFound {
			return "no such host " + dns.Name
		}
		return "cannot resolve " + dns.Name
	}
	var op *net.OpError
	if errors.As(err, &op) {
		if op.Timeout() {
			return "timed out"
		}
		if op.Err != nil {
			msg := op.Err.Error()
			if i := strings.LastIndex(msg, ": "); i >= 0 {
				msg = msg[i+2:]
			}
			return msg
		}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timed out"
	}
	return "the request could not be sent"
}
