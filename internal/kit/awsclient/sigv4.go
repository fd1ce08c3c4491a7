package awsclient

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Signer signs HTTP requests with AWS Signature Version 4 exactly as the
// SDK's v4.Signer does (SignHTTP, not presigning), with less work for the
// requests of pipes' hot path: the canonical request is hashed as it is
// written, and the derived signing key is kept per day, region, service
// and credentials. A request it does not sign the simple way (a query
// string, an opaque URL, a path with characters that escaping changes, two
// header names that differ only by case, signing logged) is signed by the
// SDK's own signer (a new one each time: the SDK's key cache would keep a
// key for an access key id whose secret changed). Its signatures are compared with the SDK's by
// TestSignerMatchesTheSDK and FuzzSigner. It is safe for concurrent use.
type Signer struct {
	mu  sync.Mutex
	key derivedKey // the last key derived
}

// derivedKey is a signing key and what it was derived from.
type derivedKey struct {
	access, secret, date, region, service string
	key                                   []byte
}

// NewSigner returns a Signer.
func NewSigner() *Signer { return &Signer{} }

// SDK names the headers and layout v4.Signer uses.
const (
	sigAlgorithm = "AWS4-HMAC-SHA256"
	sigTimeFmt   = "20060102T150405Z"
	sigDateFmt   = "20060102"
)

// sigIgnored are the headers the SDK's signer leaves unsigned (exact
// keys, as its rule compares them).
func sigIgnored(k string) bool {
	switch k {
	case "Authorization", "User-Agent", "X-Amzn-Trace-Id", "Expect", "Transfer-Encoding":
		return true
	}
	return false
}

// SignHTTP signs r as v4.Signer.SignHTTP does: it sets X-Amz-Date, X-Amz-Security-Token
// (when the credentials have a session token) and Authorization, and drops a
// default port from r.Host. payloadHash is the hex SHA-256 of the body.
func (s *Signer) SignHTTP(ctx context.Context, creds aws.Credentials, r *http.Request, payloadHash, service, region string, signingTime time.Time, optFns ...func(*v4.SignerOptions)) error {
	var opts v4.SignerOptions
	for _, fn := range optFns {
		fn(&opts)
	}
	if opts.LogSigning || !simplePath(r) {
		return v4.NewSigner().SignHTTP(ctx, creds, r, payloadHash, service, region, signingTime, optFns...)
	}
	t := signingTime.UTC()
	amzDate := t.Format(sigTimeFmt)
	date := amzDate[:8]
	r.Header["X-Amz-Date"] = append(r.Header["X-Amz-Date"][:0], amzDate)
	if !opts.DisableSessionToken && creds.SessionToken != "" {
		r.Header["X-Amz-Security-Token"] = append(r.Header["X-Amz-Security-Token"][:0], creds.SessionToken)
	}
	host := sanitizeHost(r)

	// The header names to sign, lower case, sorted.
	var namesBuf [16]signedHeader
	names := append(namesBuf[:0], signedHeader{name: "host"})
	if r.ContentLength > 0 {
		names = append(names, signedHeader{name: "content-length"})
	}
	for k, v := range r.Header {
		if sigIgnored(k) || strings.EqualFold(k, "content-length") {
			continue
		}
		lk := lower(k)
		if lk == "host" {
			continue // the host line is the request's host alone, as the SDK writes it
		}
		names = append(names, signedHeader{name: lk, values: v})
	}
	slices.SortFunc(names, func(a, b signedHeader) int { return strings.Compare(a.name, b.name) })
	for i := 1; i < len(names); i++ {
		if names[i].name == names[i-1].name {
			// Two names that differ only by case: the SDK joins their values
			// in map order. Let it sign (it sets the same X-Amz-Date).
			return v4.NewSigner().SignHTTP(ctx, creds, r, payloadHash, service, region, signingTime, optFns...)
		}
	}

	var bufArr [1024]byte
	buf := bufArr[:0]
	// Canonical request: method, URI, query (empty), headers, signed
	// header names, payload hash.
	buf = append(buf, r.Method...)
	buf = append(buf, '\n')
	if p := r.URL.EscapedPath(); p == "" {
		buf = append(buf, '/')
	} else {
		buf = append(buf, p...)
	}
	buf = append(buf, '\n', '\n')
	for _, h := range names {
		buf = append(buf, h.name...)
		buf = append(buf, ':')
		switch h.name {
		case "host":
			buf = appendClean(buf, host, false)
		case "content-length":
			buf = strconv.AppendInt(buf, r.ContentLength, 10)
		default:
			for j, v := range h.values {
				if j > 0 {
					buf = append(buf, ',')
				}
				buf = appendClean(buf, v, true)
			}
		}
		buf = append(buf, '\n')
	}
	buf = append(buf, '\n')
	signedStart := len(buf)
	for i, h := range names {
		if i > 0 {
			buf = append(buf, ';')
		}
		buf = append(buf, h.name...)
	}
	signedNames := string(buf[signedStart:])
	buf = append(buf, '\n')
	buf = append(buf, payloadHash...)
	canonHash := sha256.Sum256(buf)

	scope := date + "/" + region + "/" + service + "/aws4_request"
	buf = buf[:0]
	buf = append(buf, sigAlgorithm+"\n"...)
	buf = append(buf, amzDate...)
	buf = append(buf, '\n')
	buf = append(buf, scope...)
	buf = append(buf, '\n')
	buf = hex.AppendEncode(buf, canonHash[:])
	mac := hmac.New(sha256.New, s.signingKey(creds, date, region, service))
	mac.Write(buf)
	var sum [sha256.Size]byte

	buf = buf[:0]
	buf = append(buf, sigAlgorithm+" Credential="...)
	buf = append(buf, creds.AccessKeyID...)
	buf = append(buf, '/')
	buf = append(buf, scope...)
	buf = append(buf, ", SignedHeaders="...)
	buf = append(buf, signedNames...)
	buf = append(buf, ", Signature="...)
	buf = hex.AppendEncode(buf, mac.Sum(sum[:0]))
	r.Header["Authorization"] = append(r.Header["Authorization"][:0], string(buf))
	return nil
}

// signedHeader is one header name to sign and its values.
type signedHeader struct {
	name   string
	values []string
}

// signingKey is the key derived from creds' secret for date, region and
// service (the last one is kept).
func (s *Signer) signingKey(creds aws.Credentials, date, region, service string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := &s.key
	if k.key != nil && k.access == creds.AccessKeyID && k.secret == creds.SecretAccessKey && k.date == date && k.region == region && k.service == service {
		return k.key
	}
	key := hmacSHA256([]byte("AWS4"+creds.SecretAccessKey), date)
	key = hmacSHA256(key, region)
	key = hmacSHA256(key, service)
	key = hmacSHA256(key, "aws4_request")
	*k = derivedKey{access: creds.AccessKeyID, secret: creds.SecretAccessKey, date: date, region: region, service: service, key: key}
	return key
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// simplePath reports whether r's URL is one the SDK's canonical URI leaves
// as it is: no query, not opaque, a path of unreserved characters and
// slashes only.
func simplePath(r *http.Request) bool {
	u := r.URL
	if u == nil || u.RawQuery != "" || u.Opaque != "" || u.ForceQuery {
		return false
	}
	for _, c := range []byte(u.EscapedPath()) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '.', c == '_', c == '~', c == '/':
		default:
			return false
		}
	}
	return true
}

// lower is strings.ToLower for ASCII header names, without allocating
// when k is lower case already.
func lower(k string) string {
	for i := 0; i < len(k); i++ {
		if c := k[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(k)
		}
	}
	return k
}

// appendClean appends v with leading and trailing spaces trimmed and runs
// of spaces made one, as the SDK's StripExcessSpaces does; with trim, the
// result is also strings.TrimSpace'd (the SDK does that for header values,
// not the host).
func appendClean(buf []byte, v string, trim bool) []byte {
	v = strings.Trim(v, " ")
	if trim {
		v = strings.TrimSpace(v)
		// TrimSpace may leave spaces inside a trimmed tab: clean again.
		v = strings.Trim(v, " ")
	}
	if !strings.Contains(v, "  ") {
		return append(buf, v...)
	}
	space := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == ' ' {
			if space {
				continue
			}
			space = true
		} else {
			space = false
		}
		buf = append(buf, c)
	}
	return buf
}

// sanitizeHost drops a default port from the request's host as the SDK's
// signer does (setting r.Host) and returns the host to sign.
func sanitizeHost(r *http.Request) string {
	host := r.Host
	if host == "" {
		host = r.URL.Host
	}
	if port := portOnly(host); port != "" && isDefaultPort(r.URL.Scheme, port) {
		r.Host = stripPort(host)
		return r.Host
	}
	return host
}

func stripPort(hostport string) string {
	colon := strings.IndexByte(hostport, ':')
	if colon == -1 {
		return hostport
	}
	if i := strings.IndexByte(hostport, ']'); i != -1 {
		return strings.TrimPrefix(hostport[:i], "[")
	}
	return hostport[:colon]
}

func portOnly(hostport string) string {
	colon := strings.IndexByte(hostport, ':')
	if colon == -1 {
		return ""
	}
	if i := strings.Index(hostport, "]:"); i != -1 {
		return hostport[i+len("]:"):]
	}
	if strings.Contains(hostport, "]") {
		return ""
	}
	return hostport[colon+len(":"):]
}

func isDefaultPort(scheme, port string) bool {
	s := strings.ToLower(scheme)
	return (s == "http" && port == "80") || (s == "https" && port == "443")
}
