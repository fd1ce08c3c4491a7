package enrich_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/pipesproject/pipes/enrich"
)

// fakeLambda is an in-process fake of the Lambda Invoke REST-JSON API
// (POST /2015-03-31/functions/{name}/invocations): no independent Lambda
// server exists to test against, so this speaks the wire shape the SDK
// expects — the payload as the body, X-Amz-Function-Error for function
// errors, X-Amzn-ErrorType and a JSON body for service errors.
type fakeLambda struct {
	mu       sync.Mutex
	requests []string // bodies received
	answer   func(body []byte, w http.ResponseWriter)
}

func (f *fakeLambda) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.Method != http.MethodPost || r.URL.Path != "/2015-03-31/functions/enricher/invocations" {
		w.Header().Set("X-Amzn-ErrorType", "ResourceNotFoundException")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"Type":"User","message":"Function not found: `+r.URL.Path+`"}`)
		return
	}
	if it := r.Header.Get("X-Amz-Invocation-Type"); it != "RequestResponse" {
		w.Header().Set("X-Amzn-ErrorType", "InvalidParameterValueException")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"message":"want RequestResponse, got `+it+`"}`)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, string(body))
	f.mu.Unlock()
	f.answer(body, w)
}

func serviceError(status int, code string) func([]byte, http.ResponseWriter) {
	return func(_ []byte, w http.ResponseWriter) {
		w.Header().Set("X-Amzn-ErrorType", code)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"Type":"User","message":"`+code+`"}`)
	}
}

func newTestLambda(t *testing.T, url, function string, onCall func(string)) *enrich.Lambda {
	t.Helper()
	cfg := aws.Config{
		Region:           "eu-west-1",
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		RetryMaxAttempts: 1,
	}
	l, err := enrich.NewLambda(context.Background(), enrich.LambdaConfig{
		FunctionName: function, Endpoint: url, AWSConfig: &cfg, OnCall: onCall,
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLambdaEnrichment(t *testing.T) {
	tests := []struct {
		name     string
		function string
		answer   func([]byte, http.ResponseWriter)
		want     []string
		wantFail []string
		wantErr  string
		wantReqs int
	}{
		{name: "the function's array replaces the payloads by position", function: "enricher",
			answer: func(body []byte, w http.ResponseWriter) {
				var in []map[string]any
				_ = json.Unmarshal(body, &in)
				out := make([]map[string]any, len(in))
				for i, rec := range in {
					out[i] = map[string]any{"seen": rec["messageId"]}
				}
				_ = json.NewEncoder(w).Encode(out)
			},
			want: []string{`a={"seen":"a"}`, `b={"seen":"b"}`}, wantReqs: 1},
		{name: "an empty answer means the target is not called", function: "enricher",
			answer: func(_ []byte, w http.ResponseWriter) { _, _ = io.WriteString(w, `[]`) }, wantReqs: 1},
		{name: "a partial answer fails the named messages", function: "enricher",
			answer: func(_ []byte, w http.ResponseWriter) {
				_, _ = io.WriteString(w, `{"batchItemFailures":[{"itemIdentifier":"a"}],"items":[{"messageId":"b","ok":true}]}`)
			},
			want: []string{`b={"messageId":"b","ok":true}`}, wantFail: []string{"a"}, wantReqs: 1},
		{name: "an aggregate without messageIds is retried once per event", function: "enricher",
			answer: func(body []byte, w http.ResponseWriter) {
				var in []json.RawMessage
				_ = json.Unmarshal(body, &in)
				if len(in) > 1 {
					_, _ = io.WriteString(w, `{"count":2}`)
					return
				}
				_, _ = io.WriteString(w, `{"count":1}`)
			},
			want: []string{`a={"count":1}`, `b={"count":1}`}, wantReqs: 3},
		{name: "a function error fails the whole batch, retryably", function: "enricher",
			answer: func(_ []byte, w http.ResponseWriter) {
				w.Header().Set("X-Amz-Function-Error", "Unhandled")
				_, _ = io.WriteString(w, `{"errorType":"TypeError","errorMessage":"x is undefined"}`)
			},
			wantErr: "retryable", wantReqs: 1},
		{name: "TooManyRequestsException is throttling", function: "enricher",
			answer: serviceError(429, "TooManyRequestsException"), wantErr: "throttled", wantReqs: 1},
		{name: "a service failure is retryable", function: "enricher",
			answer: serviceError(500, "ServiceException"), wantErr: "retryable", wantReqs: 1},
		{name: "access denied is a client error", function: "enricher",
			answer: serviceError(403, "AccessDeniedException"), wantErr: "permanent", wantReqs: 1},
		{name: "a function that does not exist is a client error", function: "missing", wantErr: "permanent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &fakeLambda{answer: tt.answer}
			srv := httptest.NewServer(fake)
			defer srv.Close()
			var calls []string
			var mu sync.Mutex
			l := newTestLambda(t, srv.URL, tt.function, func(op string) {
				mu.Lock()
				calls = append(calls, op)
				mu.Unlock()
			})
			out, res, err := l.Enrich(context.Background(), batchOf("a", "b"))
			if got := errKind(err); got != tt.wantErr {
				t.Fatalf("error %v is %q, want %q", err, got, tt.wantErr)
			}
			if got := outputs(out); !slices.Equal(got, tt.want) {
				t.Errorf("outputs = %q, want %q", got, tt.want)
			}
			if got := failedIDs(res); !slices.Equal(got, tt.wantFail) {
				t.Errorf("failed = %v, want %v", got, tt.wantFail)
			}
			if len(fake.requests) != tt.wantReqs {
				t.Errorf("%d invocations, want %d", len(fake.requests), tt.wantReqs)
			}
			if len(calls) == 0 || calls[0] != "Invoke" {
				t.Errorf("OnCall saw %v, want Invoke", calls)
			}
			if tt.wantReqs > 0 && !strings.HasPrefix(fake.requests[0], `[{"messageId":"a"`) {
				t.Errorf("the function got %s, want the batch's records as a JSON array", fake.requests[0])
			}
		})
	}
}

func TestNewLambdaNeedsAFunctionAndARegion(t *testing.T) {
	cfg := aws.Config{Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")}
	if _, err := enrich.NewLambda(context.Background(), enrich.LambdaConfig{AWSConfig: &cfg}); err == nil {
		t.Error("no function name: want an error")
	}
	if _, err := enrich.NewLambda(context.Background(), enrich.LambdaConfig{FunctionName: "f", AWSConfig: &cfg}); err == nil {
		t.Error("no region: want an error")
	}
	arn := "arn:aws:lambda:eu-central-1:123456789012:function:f"
	if _, err := enrich.NewLambda(context.Background(), enrich.LambdaConfig{FunctionName: arn, AWSConfig: &cfg}); err != nil {
		t.Errorf("the region of a function ARN: %v", err)
	}
}

func TestLambdaEnrichmentStopsWithTheContext(t *testing.T) {
	srv := httptest.NewServer(&fakeLambda{answer: func([]byte, http.ResponseWriter) {}})
	defer srv.Close()
	l := newTestLambda(t, srv.URL, "enricher", nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := l.Enrich(ctx, batchOf("a"))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want context.Canceled", err)
	}
}
