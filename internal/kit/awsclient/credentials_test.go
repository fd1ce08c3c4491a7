package awsclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/pipesproject/pipes/internal/core"
)

// isolateAWSEnv leaves the default AWS configuration nothing to find but
// what env sets: no keys, no profile, no role, empty shared files, IMDS
// disabled.
func isolateAWSEnv(t *testing.T, env map[string]string) {
	t.Helper()
	dir := t.TempDir()
	empty := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
		"AWS_ACCESS_KEY", "AWS_SECRET_KEY", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
		"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SQS", "AWS_EC2_METADATA_SERVICE_ENDPOINT"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", empty("config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", empty("credentials"))
	t.Setenv("AWS_REGION", "us-east-1")
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// loopbackSQS is an SQS endpoint on the loopback that answers every call
// with an empty JSON object and counts them.
func loopbackSQS(t *testing.T) (url string, calls *atomic.Int32) {
	t.Helper()
	calls = new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte(`{"QueueUrl":"http://localhost/000000000000/q"}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, calls
}

func TestMissingCredentialsSayWhatToSet(t *testing.T) {
	tests := []struct {
		name      string
		env       map[string]string
		wantCalls int32
		missing   bool
	}{
		{"no credentials anywhere fails before any call, saying what to set", nil, 0, true},
		{"dummy keys in the environment reach the server", map[string]string{"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y"}, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			isolateAWSEnv(t, tt.env)
			url, calls := loopbackSQS(t)
			cfg, err := Load(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			cfg.RetryMaxAttempts = 1
			ov := Overrides{Endpoint: url}
			c := sqs.NewFromConfig(cfg, func(o *sqs.Options) { ov.Apply(&o.Region, &o.BaseEndpoint, &o.APIOptions) })
			_, err = c.GetQueueUrl(t.Context(), &sqs.GetQueueUrlInput{QueueName: aws.String("q")})
			if n := calls.Load(); n != tt.wantCalls {
				t.Errorf("the server got %d calls, want %d", n, tt.wantCalls)
			}
			if !tt.missing {
				if err != nil {
					t.Fatalf("GetQueueUrl: %v", err)
				}
				return
			}
			var ce *CredentialsError
			if !errors.As(err, &ce) {
				t.Fatalf("GetQueueUrl = %v, want a *CredentialsError", err)
			}
			if !core.IsPermanent(err) || !core.IsPermanent(SQS.Classify(err)) {
				t.Errorf("%v is not Permanent", err)
			}
			for _, want := range []string{"AWS_PROFILE", "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", "IRSA", "instance profile", "dummy keys", "EC2 IMDS"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%q does not mention %q", err, want)
				}
			}
		})
	}
}

func TestAGivenConfigKeepsItsCredentials(t *testing.T) {
	cfg := aws.Config{Credentials: aws.AnonymousCredentials{}}
	got, err := Load(t.Context(), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Credentials.(aws.AnonymousCredentials); !ok {
		t.Errorf("credentials became %T", got.Credentials)
	}
}

func TestTheSDKLogsThroughTheGivenLogger(t *testing.T) {
	isolateAWSEnv(t, map[string]string{"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y"})
	url, _ := loopbackSQS(t)
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg, err := Load(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ov := Overrides{Endpoint: url, Logger: log}
	c := sqs.NewFromConfig(cfg, func(o *sqs.Options) {
		ov.Apply(&o.Region, &o.BaseEndpoint, &o.APIOptions)
		o.ClientLogMode = aws.LogRequest
	})
	if _, err := c.GetQueueUrl(t.Context(), &sqs.GetQueueUrlInput{QueueName: aws.String("q")}); err != nil {
		t.Fatal(err)
	}
	if buf.Len() == 0 {
		t.Fatal("the SDK logged nothing through the logger")
	}
	for line := range strings.Lines(buf.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a log line is not JSON: %q", line)
		}
		if rec["from"] != "aws-sdk" || rec["level"] != "DEBUG" || !strings.Contains(rec["msg"].(string), "GetQueueUrl") {
			t.Errorf("log line %v: want from=aws-sdk, level DEBUG and the request", rec)
		}
	}
}
