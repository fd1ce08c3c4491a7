package awsclient

import (
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"

	"github.com/pipesproject/pipes/internal/h1"
)

// LeanHTTPClient returns the HTTP client for an SDK client on pipes' hot
// path (the SQS source): over internal/h1's transport, which reads each
// answer on the calling goroutine, with the TLS settings of hc (the
// SDK's default client, AWS_CA_BUNDLE and FIPS curves included). hc is
// returned as it is when it is someone else's (an aws.Config given with
// its own HTTPClient), has a timeout set, or when h1 is turned off
// (PIPES_HTTP_TRANSPORT=net/http, or a proxy in the environment).
func LeanHTTPClient(hc aws.HTTPClient, maxIdlePerHost int) aws.HTTPClient {
	if !h1.Enabled() {
		return hc
	}
	var opt h1.Options
	switch c := hc.(type) {
	case nil:
	case *awshttp.BuildableClient:
		if c.GetTimeout() > 0 {
			return hc
		}
		if _, set := c.GetReadTimeout(); set {
			return hc
		}
		tr := c.GetTransport()
		if tr.TLSClientConfig != nil {
			opt.TLSConfig = tr.TLSClientConfig.Clone()
		}
		opt.TLSHandshakeTimeout = tr.TLSHandshakeTimeout
		opt.IdleTimeout = tr.IdleConnTimeout
		opt.DialTimeout = c.GetDialer().Timeout
		opt.Fallback = tr
	default:
		return hc
	}
	opt.MaxIdlePerHost = maxIdlePerHost
	return leanClient{h1.New(opt)}
}

// leanClient is an aws.HTTPClient over an h1 transport. Redirects are not
// followed (as with the SDK's own client).
type leanClient struct{ t *h1.Transport }

// Do sends req.
func (c leanClient) Do(req *http.Request) (*http.Response, error) { return c.t.RoundTrip(req) }

// CloseIdleConnections closes the idle keep-alive connections.
func (c leanClient) CloseIdleConnections() { c.t.CloseIdleConnections() }

// IsLean reports whether hc is an HTTP client LeanHTTPClient made (one
// over internal/h1).
func IsLean(hc aws.HTTPClient) bool {
	_, ok := hc.(leanClient)
	return ok
}
