package httptarget_test

// API Gateway with IAM authorization has no independent server to test
// against, so these tests use internal/fakeaws.SigV4: an in-process
// net/http server that recomputes each request's SigV4 signature with the
// SDK's own v4 signer (not pipes' awsclient.Signer, which signs) and
// refuses a request whose signature differs, as API Gateway does.

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/pipesproject/pipes/internal/fakeaws"
	"github.com/pipesproject/pipes/internal/kit/awsclient"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/target/httptarget"
)

func TestSigV4SignedRequestsReachAPIGateway(t *testing.T) {
	t.Parallel()
	creds := aws.Credentials{AccessKeyID: "AKIDPIPESTEST", SecretAccessKey: "pipes-test-secret", SessionToken: "pipes-session"}
	for _, tc := range []struct {
		name     string
		cfg      httptarget.Config
		signWith aws.Credentials
		path     string
		query    string
		refused  bool
	}{
		{name: "a batch to a stage and a resource path", cfg: httptarget.Config{Batch: true}, signWith: creds, path: "/prod/orders"},
		{name: "path, query and header parameters rendered per event",
			cfg: httptarget.Config{
				Headers: map[string]string{"X-Tenant": "<$.body.tenant>", "X-Api-Key": "static-key"},
				Query:   map[string]string{"id": "<$.body.id>", "mode": "a b"},
			},
			signWith: creds, path: "/prod/orders/<$.body.id>", query: "id=7&mode=a%20b"},
		{name: "a wrong secret is refused", cfg: httptarget.Config{Batch: true}, path: "/prod/orders",
			signWith: aws.Credentials{AccessKeyID: "AKIDPIPESTEST", SecretAccessKey: "not-the-secret"}, refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var got []*http.Request
			srv := httptest.NewServer(fakeaws.SigV4{Creds: creds, Service: "execute-api", Region: "eu-west-1",
				Next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.Copy(io.Discard, r.Body)
					mu.Lock()
					got = append(got, r)
					mu.Unlock()
				})})
			t.Cleanup(srv.Close)
			cfg := tc.cfg
			cfg.URL = srv.URL + tc.path
			cfg.Sign = awsclient.RequestSigner(credentials.StaticCredentialsProvider{Value: tc.signWith}, awsclient.ExecuteAPI, "eu-west-1")
			tg := newTarget(t, cfg)
			body := `{"id":"7","tenant":"acme"}`
			ev, err := pipe.NewEvent(&source.Message{MessageID: "m1", Body: body})
			if err != nil {
				t.Fatal(err)
			}
			res, err := tg.Deliver(context.Background(), []*pipe.Event{ev})
			if tc.refused {
				if err == nil && len(res.Failures) == 0 {
					t.Fatal("a request signed with the wrong secret was taken")
				}
				for _, e := range append([]error{err}, failureErrs(res)...) {
					if e != nil && (strings.Contains(e.Error(), "not-the-secret") || strings.Contains(e.Error(), "pipes-test-secret")) {
						t.Errorf("an error shows a secret: %v", e)
					}
				}
				return
			}
			if err != nil || len(res.Failures) > 0 {
				t.Fatalf("Deliver = %v, %v", res, err)
			}
			if len(got) != 1 {
				t.Fatalf("the API got %d requests", len(got))
			}
			r := got[0]
			if want := strings.ReplaceAll(tc.path, "<$.body.id>", "7"); r.URL.Path != want {
				t.Errorf("path = %s, want %s", r.URL.Path, want)
			}
			if tc.query != "" && r.URL.RawQuery != tc.query {
				t.Errorf("query = %s, want %s", r.URL.RawQuery, tc.query)
			}
			if h := r.Header.Get("X-Tenant"); tc.cfg.Headers != nil && h != "acme" {
				t.Errorf("X-Tenant = %q", h)
			}
			if r.Header.Get("X-Amz-Security-Token") != "pipes-session" {
				t.Error("the session token was not sent")
			}
		})
	}
}

func failureErrs(r pipe.Result) []error {
	var errs []error
	for _, f := range r.Failures {
		errs = append(errs, f.Err)
	}
	return errs
}
