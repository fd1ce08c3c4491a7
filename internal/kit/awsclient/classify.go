package awsclient

import (
	"errors"
	"net/http"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/pipe"
)

// Classifier marks the error of a failed call to one AWS service. Its
// zero value knows the SDK's throttling codes, 429, and that every other
// 4xx except 408 is permanent. It is read-only once built and safe for
// concurrent use.
type Classifier struct {
	// ThrottleCodes are the service's API error codes for slowing down,
	// besides the SDK's.
	ThrottleCodes map[string]bool
	// Throttled, when set, reports other errors that mean slowing down
	// (typed errors of the service's SDK).
	Throttled func(error) bool
	// Permanent, when set, reports other errors retrying cannot help
	// (typed errors of the service's SDK).
	Permanent func(error) bool
	// PermanentCodes are the API error codes retrying cannot help.
	PermanentCodes map[string]bool
	// RetryableCodes are API error codes that are retryable whatever their
	// HTTP status.
	RetryableCodes map[string]bool
	// RetryableStatus are 4xx statuses, besides 408 and 429, that are
	// retryable.
	RetryableStatus []int
}

// Codes makes a set of error codes for a Classifier.
func Codes(codes ...string) map[string]bool {
	m := make(map[string]bool, len(codes))
	for _, c := range codes {
		m[c] = true
	}
	return m
}

// Classify marks err: pipe.Throttled when the service asked to slow down;
// pipe.Permanent when retrying cannot help (missing credentials, Permanent
// reports it, a permanent code, any other 4xx except 408, 429, RetryableCodes and
// RetryableStatus, a request the SDK refused to send); otherwise err as it
// is. nil stays nil.
func (c Classifier) Classify(err error) error {
	if err == nil {
		return nil
	}
	if c.isThrottle(err) {
		return pipe.Throttled(err)
	}
	if c.isPermanent(err) {
		return pipe.Permanent(err)
	}
	return err
}

func (c Classifier) isThrottle(err error) bool {
	if c.Throttled != nil && c.Throttled(err) {
		return true
	}
	var api smithy.APIError
	if len(c.ThrottleCodes) > 0 && errors.As(err, &api) && c.ThrottleCodes[api.ErrorCode()] {
		return true
	}
	if retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) == aws.TrueTernary {
		return true
	}
	var re *awshttp.ResponseError
	return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusTooManyRequests
}

func (c Classifier) isPermanent(err error) bool {
	if c.Permanent != nil && c.Permanent(err) {
		return true
	}
	var creds *CredentialsError
	if errors.As(err, &creds) {
		return true
	}
	var invalid *smithy.InvalidParamsError
	if errors.As(err, &invalid) {
		return true
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch code := api.ErrorCode(); {
		case c.PermanentCodes[code]:
			return true
		case c.RetryableCodes[code]:
			return false
		}
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		s := re.HTTPStatusCode()
		return s >= 400 && s <= 499 && s != http.StatusRequestTimeout && s != http.StatusTooManyRequests && !slices.Contains(c.RetryableStatus, s)
	}
	return false
}

// EntrySpecific reports whether a refused call, already classified, may be
// the fault of one of its entries rather than of the resource or the
// caller's rights: it is permanent and its API error code is one of codes.
func EntrySpecific(err error, codes map[string]bool) bool {
	if !core.IsPermanent(err) {
		return false
	}
	var api smithy.APIError
	if !errors.As(err, &api) {
		return false
	}
	return codes[api.ErrorCode()]
}
