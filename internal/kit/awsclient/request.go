package awsclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// ExecuteAPI is the SigV4 service name of API Gateway's invoke endpoints.
const ExecuteAPI = "execute-api"

// RequestSigner returns a function that signs an HTTP request with SigV4
// for service in region, with the credentials of creds (retrieved, and
// cached by the provider, per request): the Sign of an httpcore.Config,
// for an http target or enrichment calling API Gateway (`auth:
// aws_sigv4`). Its errors never hold the credentials. It is safe for
// concurrent use.
func RequestSigner(creds aws.CredentialsProvider, service, region string) func(ctx context.Context, r *http.Request, payloadHash string) error {
	signer := NewSigner()
	return func(ctx context.Context, r *http.Request, payloadHash string) error {
		if creds == nil {
			return errors.New("no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile or a role")
		}
		c, err := creds.Retrieve(ctx)
		if err != nil {
			return fmt.Errorf("getting AWS credentials: %w", err)
		}
		return signer.SignHTTP(ctx, c, r, payloadHash, service, region, time.Now())
	}
}

// RegionFromExecuteAPI returns the region of an API Gateway invoke host
// ({api-id}.execute-api.{region}.amazonaws.com, or a private API's
// {api-id}-{vpce-id}.execute-api.{region}.vpce.amazonaws.com), "" for any
// other host (a custom domain: give the region).
func RegionFromExecuteAPI(host string) string {
	labels := strings.Split(strings.ToLower(host), ".")
	for i, l := range labels {
		if l == ExecuteAPI && i+2 < len(labels) {
			return labels[i+1]
		}
	}
	return ""
}
