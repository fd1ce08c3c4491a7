package sqs

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
)

// TestOnCallCountsEveryAttemptIncludingSDKRetries uses an HTTP server that
// answers GetQueueAttributes and fails every ReceiveMessage with a 500, so
// that the SDK retries it. The receive's first attempt is direct's (see
// directAPI); on its 500 the SDK client makes the call with its own three
// attempts: four in all.
func TestOnCallCountsEveryAttemptIncludingSDKRetries(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".GetQueueAttributes") {
			_, _ = io.WriteString(w, `{"Attributes":{"QueueArn":"arn:aws:sqs:us-east-1:123456789012:q","VisibilityTimeout":"30"}}`)
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"__type":"com.amazonaws.sqs#InternalError","message":"try again"}`)
	}))
	defer srv.Close()

	var calls callCounter
	awsCfg := testAWSConfig()
	awsCfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 3
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		})
	}
	src, err := New(t.Context(), Config{QueueURL: srv.URL + "/123456789012/q", Endpoint: srv.URL, AWSConfig: awsCfg, OnCall: calls.onCall})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := src.Open(t.Context()); err != nil {
		t.Fatalf("Open: %v", err)
	}
	if _, err := src.Receive(t.Context(), 10); err == nil {
		t.Fatalf("Receive succeeded against a failing server")
	}
	if got := calls.get("ReceiveMessage"); got != 4 {
		t.Errorf("OnCall saw %d ReceiveMessage attempts, want 4 (direct's and the SDK's 3)", got)
	}
	if got := calls.get("GetQueueAttributes"); got != 1 {
		t.Errorf("OnCall saw %d GetQueueAttributes attempts, want 1", got)
	}
}
