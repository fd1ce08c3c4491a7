package sqs

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
	smithyauth "github.com/aws/smithy-go/auth"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/pipesproject/pipes/internal/kit/awsclient"
)

// directAPI is the SQS client with its two hot calls, ReceiveMessage and
// DeleteMessageBatch, made by direct rather than through the SDK's
// middleware stack (about forty steps, rebuilt for every call, which cost
// more CPU than the call's own work). Every other call, and any call
// direct does not complete with a 2xx answer, goes to the SDK client.
type directAPI struct {
	sqsAPI
	d *direct
}

// ReceiveMessage receives through direct; without an answer (an error
// before or while sending), or with an answer that is not a 2xx, the SDK
// client makes the call again from the start, with its retries and its
// errors. No messages were handed over in either case, so the second call
// loses nothing.
func (a directAPI) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	if len(optFns) == 0 {
		out := &sqs.ReceiveMessageOutput{}
		if done, err := a.d.call(ctx, opReceive, in, out); done {
			if err == nil {
				err = a.d.checkBodies(out)
			}
			if err != nil {
				return nil, err
			}
			return out, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return a.sqsAPI.ReceiveMessage(ctx, in, optFns...)
}

// DeleteMessageBatch deletes through direct, or the SDK client as
// ReceiveMessage says (deleting again is harmless).
func (a directAPI) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	if len(optFns) == 0 {
		out := &sqs.DeleteMessageBatchOutput{}
		if done, err := a.d.call(ctx, opDeleteBatch, in, out); done {
			if err != nil {
				return nil, err
			}
			return out, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return a.sqsAPI.DeleteMessageBatch(ctx, in, optFns...)
}

// directOp is an operation direct makes.
type directOp struct {
	name   string
	schema *smithy.OperationSchema
}

// The operations' schemas: the protocol needs only the operation's name
// (X-Amz-Target) and whether the input and output exist and stream; the
// shapes serialize and deserialize themselves.
var (
	opReceive     = newDirectOp("ReceiveMessage")
	opDeleteBatch = newDirectOp("DeleteMessageBatch")
)

func newDirectOp(name string) directOp {
	id := func(n string) smithy.ShapeID { return smithy.ShapeID{Namespace: "com.amazonaws.sqs", Name: n} }
	return directOp{name: name, schema: smithy.NewOperationSchema(
		smithy.NewSchema(id(name), smithy.ShapeTypeOperation, 0),
		smithy.NewSchema(id(name+"Request"), smithy.ShapeTypeStructure, 0),
		smithy.NewSchema(id(name+"Result"), smithy.ShapeTypeStructure, 0))}
}

// direct makes one SQS call with what the SDK client would use for it:
// its protocol (awsJson 1.0: the SDK's own serializer and deserializer),
// its endpoint (resolved once by its resolver), its credentials provider
// and its HTTP client; it signs with awsclient.Signer (the SDK's
// algorithm, compared with it by that package's tests) and counts the
// attempt with OnCall.
type direct struct {
	hc       aws.HTTPClient
	endpoint url.URL
	headers  http.Header // the endpoint's own headers
	creds    aws.CredentialsProvider
	region   string
	protocol smithyhttp.ClientProtocol
	signer   *awsclient.Signer
	onCall   func(string)
	checksum bool // validate message bodies' MD5 as the SDK does
	now      func() time.Time
}

// newDirect returns the direct caller for the client with options o, or
// nil when o is anything but what pipes builds for its hot path: internal/h1
// as the HTTP client, signed requests (credentials that are not
// anonymous), an endpoint the SDK's resolver gives without a query and
// signed as "sqs" in the client's region, no request or response logging,
// no interceptors.
func newDirect(ctx context.Context, o sqs.Options, onCall func(string)) *direct {
	if !awsclient.IsLean(o.HTTPClient) || o.Credentials == nil || aws.IsCredentialsProvider(o.Credentials, (*aws.AnonymousCredentials)(nil)) ||
		o.ClientLogMode != 0 || o.Protocol == nil || o.EndpointResolverV2 == nil || hasInterceptors(o.Interceptors) {
		return nil
	}
	params := sqs.EndpointParameters{
		Region:       aws.String(o.Region),
		UseDualStack: aws.Bool(o.EndpointOptions.UseDualStackEndpoint == aws.DualStackEndpointStateEnabled),
		UseFIPS:      aws.Bool(o.EndpointOptions.UseFIPSEndpoint == aws.FIPSEndpointStateEnabled),
		Endpoint:     o.BaseEndpoint,
	}
	if o.Region == "" {
		return nil
	}
	ep, err := o.EndpointResolverV2.ResolveEndpoint(ctx, params)
	if err != nil || ep.URI.RawQuery != "" || ep.URI.Opaque != "" || ep.URI.Host == "" {
		return nil
	}
	if auth, ok := smithyauth.GetAuthOptions(&ep.Properties); ok {
		for _, a := range auth {
			if a.SchemeID != smithyauth.SchemeIDSigV4 {
				return nil
			}
			if n, ok := smithyhttp.GetSigV4SigningName(&a.SignerProperties); ok && n != "sqs" {
				return nil
			}
			if r, ok := smithyhttp.GetSigV4SigningRegion(&a.SignerProperties); ok && r != o.Region {
				return nil
			}
		}
	}
	u := ep.URI
	u.Path = smithyhttp.JoinPath(u.Path, "/")
	if u.RawPath != "" {
		u.RawPath = smithyhttp.JoinPath(u.RawPath, "/")
	}
	if onCall == nil {
		onCall = func(string) {}
	}
	return &direct{hc: o.HTTPClient, endpoint: u, headers: ep.Headers, creds: o.Credentials, region: o.Region,
		protocol: o.Protocol, signer: awsclient.NewSigner(), onCall: onCall, checksum: !o.DisableMessageChecksumValidation, now: time.Now}
}

// call makes op with in and decodes a 2xx answer into out. done is false
// when there was no answer or it was not a 2xx (the caller asks the SDK
// client instead); with done true, err is the decoding's error, wrapped
// as the SDK wraps it.
func (d *direct) call(ctx context.Context, op directOp, in smithy.Serializable, out smithy.Deserializable) (done bool, err error) {
	sreq := smithyhttp.NewStackRequest().(*smithyhttp.Request)
	if err := d.protocol.SerializeRequest(ctx, op.schema, in, sreq); err != nil {
		return false, nil
	}
	var body []byte
	if s := sreq.GetStream(); s != nil {
		if body, err = io.ReadAll(s); err != nil {
			return false, nil
		}
	}
	creds, err := d.creds.Retrieve(ctx)
	if err != nil {
		return false, nil // the SDK client reports it as it does
	}
	u := d.endpoint
	h := sreq.Header
	for k := range d.headers {
		h.Set(k, d.headers.Get(k))
	}
	req := (&http.Request{Method: http.MethodPost, URL: &u, Host: u.Host, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, ContentLength: int64(len(body)), Body: io.NopCloser(bytes.NewReader(body)),
		GetBody: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }}).WithContext(ctx)
	sum := sha256.Sum256(body)
	if err := d.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "sqs", d.region, d.now()); err != nil {
		return false, nil
	}
	d.onCall(op.name)
	resp, err := d.hc.Do(req)
	if err != nil {
		return false, nil
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // keep the connection when small
		return false, nil
	}
	sresp := &smithyhttp.Response{Response: resp}
	if err := d.protocol.DeserializeResponse(ctx, op.schema, sqs.TypeRegistry, sresp, out); err != nil {
		// Wrapped as the SDK's stack wraps it.
		id := resp.Header.Get("X-Amzn-Requestid")
		if id == "" {
			id = resp.Header.Get("X-Amz-RequestId")
		}
		return true, &smithy.OperationError{ServiceID: sqs.ServiceID, OperationName: op.name,
			Err: &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{Response: sresp, Err: err}, RequestID: id}}
	}
	return true, nil
}

// checkBodies validates each message's body against its MD5OfBody as the
// SDK's ReceiveMessage does (unless the client turned that off), with the
// SDK's error text.
func (d *direct) checkBodies(out *sqs.ReceiveMessageOutput) error {
	if !d.checksum {
		return nil
	}
	var bad []string
	for _, m := range out.Messages {
		if m.Body == nil || m.MD5OfBody == nil {
			continue
		}
		sum := md5.Sum([]byte(*m.Body))
		if got := hex.EncodeToString(sum[:]); got != *m.MD5OfBody {
			prefix := "message"
			if id := aws.ToString(m.MessageId); id != "" {
				prefix += " " + id
			}
			bad = append(bad, fmt.Sprintf("%s has invalid checksum, expected MD5 checksum %s, got %s", prefix, *m.MD5OfBody, got))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return &smithy.OperationError{ServiceID: sqs.ServiceID, OperationName: opReceive.name,
		Err: fmt.Errorf("message checksum validation failed, %w", checksumError(strings.Join(append([]string{"message checksum errors"}, bad...), "\n\t")))}
}

// checksumError is the SDK's text for bodies whose MD5 does not match.
type checksumError string

func (e checksumError) Error() string { return string(e) }

// hasInterceptors reports whether r holds any interceptor (the SDK's
// client starts with empty lists).
func hasInterceptors(r smithyhttp.InterceptorRegistry) bool {
	v := reflect.ValueOf(r)
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Slice && f.Len() > 0 {
			return true
		}
	}
	return false
}
