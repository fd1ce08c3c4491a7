package awsclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

// statusErr is a failed call's error as the SDK returns it: an operation
// error around an HTTP response error around the API error.
func statusErr(status int, code string) error {
	var inner error = &smithy.GenericAPIError{Code: code, Message: "m"}
	if code == "" {
		inner = errors.New("no body")
	}
	re := &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
		Err:      inner,
	}}
	return &smithy.OperationError{ServiceID: "S", OperationName: "Op", Err: re}
}

type typedThrottle struct{ error }

func TestClassifierMarksThrottledPermanentAndRetryableErrors(t *testing.T) {
	c := Classifier{
		ThrottleCodes:   Codes("SlowDown"),
		Throttled:       func(err error) bool { var tt typedThrottle; return errors.As(err, &tt) },
		PermanentCodes:  Codes("NoSuchThing"),
		RetryableCodes:  Codes("Busy"),
		RetryableStatus: []int{http.StatusConflict},
	}
	tests := []struct {
		name string
		err  error
		want string // "throttled", "permanent" or "retryable"
	}{
		{"a 429 is throttled", statusErr(429, ""), "throttled"},
		{"an SDK throttling code is throttled", statusErr(400, "ThrottlingException"), "throttled"},
		{"a service throttling code is throttled", statusErr(400, "SlowDown"), "throttled"},
		{"a typed throttling error is throttled", typedThrottle{errors.New("x")}, "throttled"},
		{"a permanent code is permanent whatever its status", statusErr(500, "NoSuchThing"), "permanent"},
		{"a retryable code is retryable whatever its status", statusErr(400, "Busy"), "retryable"},
		{"another 4xx is permanent", statusErr(403, "Other"), "permanent"},
		{"a 408 is retryable", statusErr(408, ""), "retryable"},
		{"a retryable status is retryable", statusErr(409, ""), "retryable"},
		{"a 5xx is retryable", statusErr(503, "Other"), "retryable"},
		{"a request the SDK refused to send is permanent", &smithy.InvalidParamsError{Context: "In"}, "permanent"},
		{"a connection error is retryable", errors.New("connection reset"), "retryable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := c.Classify(tt.err)
			kind := "retryable"
			switch {
			case core.IsThrottled(got):
				kind = "throttled"
			case core.IsPermanent(got):
				kind = "permanent"
			}
			if kind != tt.want {
				t.Errorf("Classify(%v) is %s, want %s", tt.err, kind, tt.want)
			}
			if !errors.Is(got, tt.err) {
				t.Errorf("Classify(%v) = %v, which does not wrap the error", tt.err, got)
			}
		})
	}
	if c.Classify(nil) != nil {
		t.Error("Classify(nil) is not nil")
	}
}

func TestEntrySpecificNeedsAPermanentErrorWithOneOfTheCodes(t *testing.T) {
	codes := Codes("InvalidParameter")
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"a permanent error with a listed code is entry specific", pipe.Permanent(statusErr(400, "InvalidParameter")), true},
		{"a permanent error with another code is not", pipe.Permanent(statusErr(400, "AccessDenied")), false},
		{"a retryable error with a listed code is not", statusErr(400, "InvalidParameter"), false},
		{"a permanent error without a code is not", pipe.Permanent(errors.New("x")), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EntrySpecific(tt.err, codes); got != tt.want {
				t.Errorf("EntrySpecific = %t, want %t", got, tt.want)
			}
		})
	}
}

func TestRegionPrefersTheOverrideThenTheConfigThenTheGuess(t *testing.T) {
	tests := []struct {
		name                      string
		cfgRegion, override, gues string
		want                      string
		wantOK                    bool
	}{
		{"the override wins", "eu-west-1", "us-east-1", "ap-south-1", "us-east-1", true},
		{"the config's region is kept", "eu-west-1", "", "ap-south-1", "", true},
		{"the guess fills a config without region", "", "", "ap-south-1", "ap-south-1", true},
		{"no region at all is not ok", "", "", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Region(aws.Config{Region: tt.cfgRegion}, tt.override, tt.gues)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("Region = %q, %t; want %q, %t", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestRegionFromARNReadsTheFourthField(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"a topic ARN", "arn:aws:sns:us-east-1:123456789012:orders", "us-east-1"},
		{"a bus ARN with a path", "arn:aws-cn:events:cn-north-1:123456789012:event-bus/a:b", "cn-north-1"},
		{"a name is no ARN", "orders", ""},
		{"a short ARN has no region", "arn:aws:sns:us-east-1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RegionFromARN(tt.in); got != tt.want {
				t.Errorf("RegionFromARN(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func FuzzRegionFromARN(f *testing.F) {
	for _, s := range []string{"arn:aws:sns:us-east-1:1:t", "arn:", "x", "arn:a:b:c:d:e:f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_ = RegionFromARN(s)
	})
}

func TestMessageAttributesKeepTheFirstByNameAndWeighThem(t *testing.T) {
	str := func(s string) *string { return &s }
	tests := []struct {
		name      string
		attrs     map[string]source.MessageAttribute
		limit     int
		wantNames string
		wantSize  int
	}{
		{"no attributes give none", nil, 10, "[]", 0},
		{"strings and binaries are weighed", map[string]source.MessageAttribute{
			"a": {DataType: "String", StringValue: str("xy")},
			"b": {DataType: "Binary", BinaryValue: []byte{1, 2, 3}},
		}, 10, "[a b]", 1 + 6 + 2 + 1 + 6 + 3},
		{"past the limit the last names are dropped", map[string]source.MessageAttribute{
			"c": {DataType: "String", StringValue: str("1")},
			"a": {DataType: "String", StringValue: str("1")},
			"b": {DataType: "String", StringValue: str("1")},
		}, 2, "[a b]", 2 * (1 + 6 + 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, size := MessageAttributes(tt.attrs, tt.limit, func(a source.MessageAttribute) string { return a.DataType })
			names := []string{}
			for _, n := range []string{"a", "b", "c"} {
				if _, ok := got[n]; ok {
					names = append(names, n)
				}
			}
			if fmt.Sprint(names) != tt.wantNames || size != tt.wantSize {
				t.Errorf("MessageAttributes = %v, %d; want %s, %d", names, size, tt.wantNames, tt.wantSize)
			}
		})
	}
}

func TestOverridesApplySetOnlyWhatIsGiven(t *testing.T) {
	tests := []struct {
		name       string
		ov         Overrides
		wantRegion string
		wantBase   string
		wantAPIOps int
	}{
		{"empty overrides change nothing", Overrides{}, "keep", "", 0},
		{"all overrides are set", Overrides{Region: "eu-west-1", Endpoint: "http://h", OnCall: func(string) {}}, "eu-west-1", "http://h", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			region := "keep"
			var base *string
			var ops []func(*middleware.Stack) error
			tt.ov.Apply(&region, &base, &ops)
			if region != tt.wantRegion || aws.ToString(base) != tt.wantBase || len(ops) != tt.wantAPIOps {
				t.Errorf("Apply gave %q, %q, %d API options; want %q, %q, %d", region, aws.ToString(base), len(ops), tt.wantRegion, tt.wantBase, tt.wantAPIOps)
			}
		})
	}
}

// TestOnCallCountsEveryAttemptIncludingSDKRetries answers 500 twice then
// 200: the middleware must see three attempts of one operation.
func TestOnCallCountsEveryAttemptIncludingSDKRetries(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) <= 2 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte(`{"QueueUrls":[]}`))
	}))
	defer srv.Close()
	awsCfg, err := Load(t.Context(), &aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	var op atomic.Value
	ov := Overrides{Endpoint: srv.URL, OnCall: func(o string) { calls.Add(1); op.Store(o) }}
	client := sqs.NewFromConfig(awsCfg, func(o *sqs.Options) {
		ov.Apply(&o.Region, &o.BaseEndpoint, &o.APIOptions)
		o.RetryMaxAttempts = 3
	})
	defer CloseIdleConnections(client.Options().HTTPClient)
	if _, err := client.ListQueues(context.Background(), &sqs.ListQueuesInput{}); err != nil {
		t.Fatalf("ListQueues after two 500s: %v", err)
	}
	if calls.Load() != 3 || op.Load() != "ListQueues" {
		t.Errorf("OnCall saw %d calls of %v, want 3 of ListQueues", calls.Load(), op.Load())
	}
}

func BenchmarkClassifyAThrottledCall(b *testing.B) {
	c := Classifier{ThrottleCodes: Codes("SlowDown"), PermanentCodes: Codes("NoSuchThing")}
	err := statusErr(400, "SlowDown")
	b.ReportAllocs()
	for b.Loop() {
		_ = c.Classify(err)
	}
}

// A profile given to the context (the CLI's --profile) is the one Load
// reads, over AWS_PROFILE; none leaves AWS_PROFILE's.
func TestLoadReadsTheContextsProfile(t *testing.T) {
	dir := t.TempDir()
	cfgFile := dir + "/config"
	if err := os.WriteFile(cfgFile, []byte("[profile flag]\nregion = eu-north-1\n[profile env]\nregion = sa-east-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CONFIG_FILE", cfgFile)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", dir+"/none")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_PROFILE", "env")
	for _, tt := range []struct {
		profile, want string
	}{{"", "sa-east-1"}, {"flag", "eu-north-1"}} {
		c, err := Load(WithProfile(context.Background(), tt.profile), nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.Region != tt.want {
			t.Errorf("profile %q: region %q, want %q", tt.profile, c.Region, tt.want)
		}
	}
	if _, err := Load(WithProfile(context.Background(), "nope"), nil); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("a missing profile: %v, want an error naming it", err)
	}
}
