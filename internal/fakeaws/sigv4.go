package fakeaws

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// SigV4 wraps a handler as API Gateway's IAM authorization does: a request
// whose SigV4 signature is not the one the SDK's own v4 signer computes
// for it, with the access key's secret, for Service in Region, is answered
// 403 (as API Gateway does, with "The request signature we calculated does
// not match…"), and never reaches Next. It recomputes the signature over
// exactly the headers the request says it signed.
type SigV4 struct {
	// Creds are the credentials the client must sign with.
	Creds aws.Credentials
	// Service and Region are the signing scope (execute-api, us-east-1).
	Service, Region string
	// Next answers the requests whose signature is right.
	Next http.Handler
}

// ServeHTTP checks r's signature and hands it to Next when it is right.
func (s SigV4) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "reading the body", http.StatusBadRequest)
		return
	}
	got := r.Header.Get("Authorization")
	if msg := s.check(r, body, got); msg != "" {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-Errortype", "InvalidSignatureException")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"message":"`+msg+`"}`)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	s.Next.ServeHTTP(w, r)
}

// check returns why r's signature is wrong, "" when it is right.
func (s SigV4) check(r *http.Request, body []byte, got string) string {
	const prefix = "AWS4-HMAC-SHA256 Credential="
	if !strings.HasPrefix(got, prefix) {
		return "Missing Authentication Token"
	}
	scope := "/" + s.Service + "/aws4_request"
	if !strings.Contains(got, s.Creds.AccessKeyID+"/") || !strings.Contains(got, "/"+s.Region+scope) {
		return "Credential should be scoped to a valid region and service " + s.Region + scope
	}
	_, signed, ok := strings.Cut(got, "SignedHeaders=")
	if !ok {
		return "Authorization header requires 'SignedHeaders' parameter"
	}
	signed, _, _ = strings.Cut(signed, ",")
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header"
	}
	// The request as the client signed it: its method, URL, the headers
	// it names, its body.
	u := *r.URL
	u.Scheme, u.Host = "http", r.Host
	again, err := http.NewRequest(r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return "bad request"
	}
	again.Host = r.Host
	for _, name := range strings.Split(signed, ";") {
		switch name {
		case "host":
		case "content-length":
			again.ContentLength = int64(len(body))
		default:
			for _, v := range r.Header.Values(name) {
				again.Header.Add(name, v)
			}
		}
	}
	if !strings.Contains(signed, "content-length") {
		again.ContentLength = 0
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(r.Context(), s.Creds, again, hex.EncodeToString(sum[:]), s.Service, s.Region, at); err != nil {
		return "signing failed"
	}
	if want := again.Header.Get("Authorization"); want != got {
		return "The request signature we calculated does not match the signature you provided."
	}
	return ""
}
