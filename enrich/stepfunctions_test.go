package enrich_test

// No independent Step Functions server exists on the package registries,
// so these tests run against internal/fakeaws.SFN, an in-process server
// that decodes the awsJson1_0 StartSyncExecution requests the SDK sends
// and checks them against the API reference (see its package doc).

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/pipesproject/pipes/enrich"
	"github.com/pipesproject/pipes/internal/fakeaws"
)

const (
	enrichARN   = "arn:aws:states:eu-west-1:123456789012:stateMachine:enrich"
	standardSFN = "arn:aws:states:eu-west-1:123456789012:stateMachine:standard"
)

func TestStepFunctionsEnrichment(t *testing.T) {
	seen := func(in []byte) ([]byte, string, string) {
		var recs []map[string]any
		_ = json.Unmarshal(in, &recs)
		out := make([]map[string]any, len(recs))
		for i, rec := range recs {
			out[i] = map[string]any{"seen": rec["messageId"]}
		}
		b, _ := json.Marshal(out)
		return b, "", ""
	}
	tests := []struct {
		name     string
		arn      string
		run      func([]byte) ([]byte, string, string)
		throttle int
		want     []string
		wantFail []string
		wantErr  string
		wantReqs int
	}{
		{name: "the execution's output array replaces the payloads by position", arn: enrichARN, run: seen,
			want: []string{`a={"seen":"a"}`, `b={"seen":"b"}`}, wantReqs: 1},
		{name: "a partial answer fails the named messages", arn: enrichARN,
			run: func([]byte) ([]byte, string, string) {
				return []byte(`{"batchItemFailures":[{"itemIdentifier":"a"}],"items":[{"messageId":"b","ok":true}]}`), "", ""
			},
			want: []string{`b={"messageId":"b","ok":true}`}, wantFail: []string{"a"}, wantReqs: 1},
		{name: "a failed execution fails the whole batch, retryably", arn: enrichARN,
			run:     func([]byte) ([]byte, string, string) { return nil, "States.Runtime", "boom" },
			wantErr: "retryable", wantReqs: 1},
		{name: "ThrottlingException is throttling", arn: enrichARN, throttle: 1, wantErr: "throttled"},
		{name: "a standard workflow is a client error", arn: standardSFN, wantErr: "permanent"},
		{name: "a state machine that does not exist is a client error", arn: "arn:aws:states:eu-west-1:123456789012:stateMachine:missing", wantErr: "permanent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := fakeaws.NewSFN(map[string]fakeaws.Machine{enrichARN: {Express: true, Run: tt.run}, standardSFN: {}})
			fake.Throttle(tt.throttle, 0)
			srv := httptest.NewServer(fake)
			defer srv.Close()
			var calls []string
			var mu sync.Mutex
			cfg := aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""), RetryMaxAttempts: 1}
			s, err := enrich.NewStepFunctions(context.Background(), enrich.StepFunctionsConfig{
				StateMachineARN: tt.arn, Endpoint: srv.URL, AWSConfig: &cfg,
				OnCall: func(op string) { mu.Lock(); calls = append(calls, op); mu.Unlock() },
			})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = s.Close(context.Background()) }()
			out, res, err := s.Enrich(context.Background(), batchOf("a", "b"))
			if got := errKind(err); got != tt.wantErr {
				t.Fatalf("error %v is %q, want %q", err, got, tt.wantErr)
			}
			if got := outputs(out); !slices.Equal(got, tt.want) {
				t.Errorf("outputs = %q, want %q", got, tt.want)
			}
			if got := failedIDs(res); !slices.Equal(got, tt.wantFail) {
				t.Errorf("failed = %v, want %v", got, tt.wantFail)
			}
			ex := fake.Executions()
			if len(ex) != tt.wantReqs {
				t.Errorf("%d executions, want %d", len(ex), tt.wantReqs)
			}
			if len(calls) == 0 || calls[0] != "StartSyncExecution" {
				t.Errorf("OnCall saw %v, want StartSyncExecution", calls)
			}
			if tt.wantReqs > 0 && (!ex[0].Sync || !strings.HasPrefix(string(ex[0].Input), `[{"messageId":"a"`)) {
				t.Errorf("the execution got %s (sync %v), want the batch's records as a JSON array", ex[0].Input, ex[0].Sync)
			}
		})
	}
}

func TestNewStepFunctionsNeedsAStateMachine(t *testing.T) {
	cfg := aws.Config{Region: "eu-west-1"}
	for arn, want := range map[string]string{"": "state_machine_arn is required", "orders": "is not a state machine ARN"} {
		if _, err := enrich.NewStepFunctions(context.Background(), enrich.StepFunctionsConfig{StateMachineARN: arn, AWSConfig: &cfg}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NewStepFunctions(%q) = %v, want %q", arn, err, want)
		}
	}
}
