package awsclient

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// signBoth signs two copies of r, with Signer and with the SDK's
// v4.Signer, and fails when the signed requests differ in any header or
// in Host.
func signBoth(t testing.TB, s *Signer, r *http.Request, creds aws.Credentials, payloadHash, service, region string, at time.Time) {
	t.Helper()
	mine, theirs := cloneReq(r), cloneReq(r)
	errMine := s.SignHTTP(context.Background(), creds, mine, payloadHash, service, region, at)
	errTheirs := v4.NewSigner().SignHTTP(context.Background(), creds, theirs, payloadHash, service, region, at)
	if (errMine == nil) != (errTheirs == nil) {
		t.Fatalf("errors differ: mine %v, the SDK's %v", errMine, errTheirs)
	}
	if !reflect.DeepEqual(mine.Header, theirs.Header) {
		t.Fatalf("headers differ for %s %s (headers %q):\nmine   %q\nthe SDK's %q", r.Method, r.URL, r.Header, mine.Header, theirs.Header)
	}
	if mine.Host != theirs.Host {
		t.Fatalf("Host differs: mine %q, the SDK's %q", mine.Host, theirs.Host)
	}
}

func cloneReq(r *http.Request) *http.Request {
	c := *r
	c.Header = make(http.Header, len(r.Header))
	for k, v := range r.Header {
		c.Header[k] = append([]string(nil), v...)
	}
	u := *r.URL
	c.URL = &u
	return &c
}

func newReq(t testing.TB, method, rawURL string, h map[string][]string, length int64) *http.Request {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	r := &http.Request{Method: method, URL: u, Host: u.Host, Header: http.Header{}, ContentLength: length}
	maps.Copy(r.Header, h)
	return r
}

func TestSignerMatchesTheSDK(t *testing.T) {
	at := time.Date(2026, 12, 1, 23, 59, 58, 0, time.UTC)
	body := `{"QueueUrl":"https://sqs.us-east-1.amazonaws.com/123456789012/q","MaxNumberOfMessages":10}`
	sum := sha256.Sum256([]byte(body))
	hash := hex.EncodeToString(sum[:])
	creds := aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}
	session := creds
	session.SessionToken = "FwoGZXIvYXdzEJr//////////wEaDO session token"
	sqsHeaders := map[string][]string{
		"Content-Type":             {"application/x-amz-json-1.0"},
		"X-Amz-Target":             {"AmazonSQS.ReceiveMessage"},
		"X-Amzn-Query-Mode":        {"true"},
		"Amz-Sdk-Invocation-Id":    {"8e6d1a8c-3c1f-4e0a-9d7e-9a1f0a3c2b1d"},
		"Amz-Sdk-Request":          {"attempt=1; max=3"},
		"User-Agent":               {"aws-sdk-go-v2/1.48.0"},
		"X-Amzn-Trace-Id":          {"Root=1-abc"},
		"Accept-Encoding":          {"identity"},
		"X-Amz-Date":               {"19990101T000000Z"},
		"Authorization":            {"stale"},
		"X-Amz-Security-Token":     {"stale token"},
		"Expect":                   {"100-continue"},
		"Transfer-Encoding":        {"chunked"},
		"X-Custom-Spaces":          {"  a   b  c  ", "\t d  \t"},
		"X-Empty":                  {""},
		"X-Many":                   {"1", "2", "3"},
		"Content-Length":           {"99"},
		"Host":                     {"other.example"},
		"content-length-not-quite": {"x"},
		"x-lower-case":             {"raw key"},
	}
	s := NewSigner()
	for _, c := range []struct {
		name, method, url string
		headers           map[string][]string
		length            int64
		creds             aws.Credentials
		region, service   string
	}{
		{"sqs call", "POST", "https://sqs.us-east-1.amazonaws.com/", sqsHeaders, int64(len(body)), creds, "us-east-1", "sqs"},
		{"session token", "POST", "https://sqs.us-east-1.amazonaws.com/", sqsHeaders, int64(len(body)), session, "us-east-1", "sqs"},
		{"local endpoint with a port", "POST", "http://127.0.0.1:41227/", sqsHeaders, int64(len(body)), creds, "us-east-1", "sqs"},
		{"default https port", "POST", "https://sqs.eu-west-1.amazonaws.com:443/", sqsHeaders, 10, creds, "eu-west-1", "sqs"},
		{"default http port", "POST", "http://localhost:80", nil, 0, creds, "us-east-1", "sqs"},
		{"https on port 80 keeps it", "POST", "https://localhost:80/", nil, 0, creds, "us-east-1", "sqs"},
		{"ipv6 with default port", "POST", "http://[::1]:80/", nil, 5, creds, "us-east-1", "sqs"},
		{"ipv6 with a port", "POST", "http://[::1]:4566/", nil, 5, creds, "us-east-1", "sqs"},
		{"no path", "GET", "https://example.com", nil, 0, creds, "us-west-2", "execute-api"},
		{"a path", "PUT", "https://example.com/a/b-c_d.e~f/", map[string][]string{"X-A": {"b"}}, 3, creds, "us-west-2", "s3"},
		{"query: the SDK signs", "GET", "https://example.com/?b=2&a=1", nil, 0, creds, "us-east-1", "sqs"},
		{"escaped path: the SDK signs", "GET", "https://example.com/a%20b/c", nil, 0, creds, "us-east-1", "sqs"},
		{"case twins: the SDK signs", "POST", "https://example.com/", map[string][]string{"X-Twin": {"a"}, "x-twin": {"a"}}, 0, creds, "us-east-1", "sqs"},
		{"negative length", "POST", "https://example.com/", nil, -1, creds, "us-east-1", "sqs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newReq(t, c.method, c.url, c.headers, c.length)
			signBoth(t, s, r, c.creds, hash, c.service, c.region, at)
			// The cached key serves the next day right too.
			signBoth(t, s, r, c.creds, hash, c.service, c.region, at.Add(2*time.Second))
			signBoth(t, s, r, c.creds, hash, c.service, c.region, at.Add(2*time.Second).In(time.FixedZone("x", -5*3600)))
		})
	}
	t.Run("a new secret for the same key id", func(t *testing.T) {
		r := newReq(t, "POST", "https://sqs.us-east-1.amazonaws.com/", sqsHeaders, 10)
		signBoth(t, s, r, creds, hash, "sqs", "us-east-1", at)
		other := creds
		other.SecretAccessKey = "another secret"
		signBoth(t, s, r, other, hash, "sqs", "us-east-1", at)
	})
}

// FuzzSigner compares Signer with the SDK's v4.Signer on generated
// requests: method, host, path, two headers, body length, time,
// credentials, region and service.
func FuzzSigner(f *testing.F) {
	f.Add("POST", "sqs.us-east-1.amazonaws.com", "/", "X-Amz-Target", "AmazonSQS.ReceiveMessage", "Content-Type", "application/x-amz-json-1.0", int64(120), int64(1796171425), "AKID", "secret", "", "us-east-1", "sqs", true)
	f.Add("GET", "127.0.0.1:80", "", "x-lower", "  a  b ", "User-Agent", "ua", int64(0), int64(0), "A", "B", "token", "eu-west-1", "s3", false)
	f.Add("PUT", "[::1]:443", "/a%2Fb", "Host", "h", "Content-Length", "5", int64(-1), int64(-62135596800), "", "", "", "", "", true)
	s := NewSigner()
	f.Fuzz(func(t *testing.T, method, host, path, k1, v1, k2, v2 string, length, unix int64, access, secret, token, region, service string, https bool) {
		if strings.ContainsAny(host, "/?#@ \t\r\n%") || strings.ContainsAny(path, "?#\r\n") {
			return
		}
		if !validHeader(k1) || !validHeader(k2) {
			return
		}
		scheme := "http"
		if https {
			scheme = "https"
		}
		u, err := url.Parse(scheme + "://" + host + path)
		if err != nil || u.Host != host {
			return
		}
		r := &http.Request{Method: method, URL: u, Host: u.Host, Header: http.Header{}, ContentLength: length}
		r.Header[k1] = append(r.Header[k1], v1)
		r.Header[k2] = append(r.Header[k2], v2)
		at := time.Unix(unix%(1<<40), 0)
		signBoth(t, s, r, aws.Credentials{AccessKeyID: access, SecretAccessKey: secret, SessionToken: token}, strings.Repeat("ab", 32), service, region, at)
	})
}

// validHeader reports whether k is a header name (a token).
func validHeader(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range []byte(k) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// BenchmarkSignHTTP signs a ReceiveMessage request as the SQS source
// sends it, with the SDK's signer and with Signer.
func BenchmarkSignHTTP(b *testing.B) {
	creds := aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret"}
	h := map[string][]string{"Content-Type": {"application/x-amz-json-1.0"}, "X-Amz-Target": {"AmazonSQS.ReceiveMessage"}, "X-Amzn-Query-Mode": {"true"}}
	hash := strings.Repeat("ab", 32)
	for _, c := range []struct {
		name string
		sign func(context.Context, aws.Credentials, *http.Request, string, string, string, time.Time, ...func(*v4.SignerOptions)) error
	}{{"sdk", v4.NewSigner().SignHTTP}, {"pipes", NewSigner().SignHTTP}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := newReq(b, "POST", "http://127.0.0.1:41227/", h, 180)
				if err := c.sign(context.Background(), creds, r, hash, "sqs", "us-east-1", time.Now()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
