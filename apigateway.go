package pipes

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/pipesproject/pipes/internal/kit/awsclient"
)

// API Gateway: an http target or enrichment with `auth: aws_sigv4` signs
// each request with SigV4 for execute-api (IAM authorization of a REST or
// HTTP API), with the credentials of the AWS configuration chain.

// signFunc signs one HTTP request (httpcore.Config.Sign).
type signFunc = func(ctx context.Context, r *http.Request, payloadHash string) error

// sigv4Sign returns the request signer of an http target or enrichment
// whose auth is "aws_sigv4" (nil for no auth): SigV4 for execute-api in
// region when set, else the URL's (an execute-api host), else the AWS
// configuration's. awsCfg nil loads the default configuration (env,
// profile, IMDS, IRSA; no network I/O until a request is signed).
func sigv4Sign(ctx context.Context, auth, region, rawURL string, awsCfg *aws.Config) (signFunc, error) {
	if auth == "" {
		return nil, nil
	}
	cfg, err := awsclient.Load(ctx, awsCfg)
	if err != nil {
		return nil, fmt.Errorf("auth aws_sigv4: loading the AWS configuration: %w", err)
	}
	if region == "" {
		// Placeholders may stand in the path, never in the host.
		if u, err := url.Parse(strings.NewReplacer("<", "", ">", "").Replace(rawURL)); err == nil {
			region = awsclient.RegionFromExecuteAPI(u.Hostname())
		}
	}
	if region == "" {
		region = cfg.Region
	}
	if region == "" {
		return nil, errors.New("auth aws_sigv4: no AWS region: the url is not an execute-api one ({api-id}.execute-api.{region}.amazonaws.com); set region, AWS_REGION or a profile's region")
	}
	return awsclient.RequestSigner(cfg.Credentials, awsclient.ExecuteAPI, region), nil
}
