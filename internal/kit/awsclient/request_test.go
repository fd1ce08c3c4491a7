package awsclient

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

func TestRegionFromExecuteAPI(t *testing.T) {
	t.Parallel()
	for host, want := range map[string]string{
		"abc123.execute-api.eu-west-1.amazonaws.com":                  "eu-west-1",
		"abc123-vpce-0a1b2c.execute-api.us-east-2.vpce.amazonaws.com": "us-east-2",
		"ABC.EXECUTE-API.AP-SOUTHEAST-2.AMAZONAWS.COM":                "ap-southeast-2",
		"api.example.com": "",
		"execute-api":     "",
		"abc123.execute-api.cn-north-1.amazonaws.com.cn": "cn-north-1",
	} {
		if got := RegionFromExecuteAPI(host); got != want {
			t.Errorf("RegionFromExecuteAPI(%q) = %q, want %q", host, got, want)
		}
	}
}

func TestRequestSignerErrorsHoldNoSecret(t *testing.T) {
	t.Parallel()
	r, _ := http.NewRequest(http.MethodPost, "https://abc.execute-api.eu-west-1.amazonaws.com/prod", nil)
	if err := RequestSigner(nil, ExecuteAPI, "eu-west-1")(context.Background(), r, ""); err == nil || !strings.Contains(err.Error(), "no AWS credentials") {
		t.Errorf("no credentials: %v", err)
	}
	sign := RequestSigner(credentials.NewStaticCredentialsProvider("AKIDPIPESTEST", "pipes-test-secret", ""), ExecuteAPI, "eu-west-1")
	if err := sign(context.Background(), r, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"); err != nil {
		t.Fatal(err)
	}
	if a := r.Header.Get("Authorization"); !strings.Contains(a, "/eu-west-1/execute-api/aws4_request") || strings.Contains(a, "pipes-test-secret") {
		t.Errorf("Authorization = %q", a)
	}
	var _ aws.CredentialsProvider = credentials.StaticCredentialsProvider{}
}

// FuzzRegionFromExecuteAPI: whatever the host, the region is "" or the
// label after an execute-api label of it.
func FuzzRegionFromExecuteAPI(f *testing.F) {
	f.Add("abc.execute-api.eu-west-1.amazonaws.com")
	f.Add("execute-api..")
	f.Fuzz(func(t *testing.T, host string) {
		r := RegionFromExecuteAPI(host)
		if r != "" && !strings.Contains(strings.ToLower(host), "execute-api."+r+".") {
			t.Fatalf("RegionFromExecuteAPI(%q) = %q, not the label after execute-api", host, r)
		}
	})
}
