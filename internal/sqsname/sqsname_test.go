package sqsname

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseRedrivePolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    RedrivePolicy
		wantErr bool
	}{
		{"a numeric maxReceiveCount is read", `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:1:d","maxReceiveCount":5}`, RedrivePolicy{"arn:aws:sqs:us-east-1:1:d", 5}, false},
		{"a string maxReceiveCount is read", `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:1:d","maxReceiveCount":"12"}`, RedrivePolicy{"arn:aws:sqs:us-east-1:1:d", 12}, false},
		{"a missing maxReceiveCount is an error", `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:1:d"}`, RedrivePolicy{}, true},
		{"a zero maxReceiveCount is an error", `{"deadLetterTargetArn":"a","maxReceiveCount":0}`, RedrivePolicy{}, true},
		{"a missing target is an error", `{"maxReceiveCount":3}`, RedrivePolicy{}, true},
		{"invalid JSON is an error", `{`, RedrivePolicy{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseRedrivePolicy(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("ParseRedrivePolicy(%s) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func FuzzParseRedrivePolicy(f *testing.F) {
	for _, seed := range []string{
		`{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:1:d","maxReceiveCount":5}`,
		`{"deadLetterTargetArn":"x","maxReceiveCount":"7"}`,
		`{"maxReceiveCount":"-1"}`, `null`, `[]`, `"`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseRedrivePolicy(s)
		if err == nil && (p.MaxReceiveCount < 1 || p.DeadLetterTargetARN == "") {
			t.Errorf("ParseRedrivePolicy(%q) = %+v without an error", s, p)
		}
	})
}

func TestParseQueueARN(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    QueueARN
		wantErr bool
	}{
		{"a standard queue ARN is split", "arn:aws:sqs:eu-west-1:123456789012:orders", QueueARN{"aws", "eu-west-1", "123456789012", "orders"}, false},
		{"a FIFO queue in another partition is split", "arn:aws-cn:sqs:cn-north-1:1:o.fifo", QueueARN{"aws-cn", "cn-north-1", "1", "o.fifo"}, false},
		{"another service is refused", "arn:aws:sns:eu-west-1:1:t", QueueARN{}, true},
		{"an empty region is refused", "arn:aws:sqs::1:q", QueueARN{}, true},
		{"too few parts are refused", "arn:aws:sqs:eu-west-1:q", QueueARN{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseQueueARN(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("ParseQueueARN(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func FuzzParseQueueARN(f *testing.F) {
	for _, seed := range []string{"arn:aws:sqs:us-east-1:123456789012:q", "arn:aws:sqs:::", "arn::sqs:a:b:c:d", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseQueueARN(s)
		if err != nil {
			return
		}
		if back := fmt.Sprintf("arn:%s:sqs:%s:%s:%s", a.Partition, a.Region, a.Account, a.Name); back != s {
			t.Errorf("ParseQueueARN(%q) = %+v, which formats back as %q", s, a, back)
		}
	})
}

func TestRegionFromURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"the current AWS form gives its region", "https://sqs.eu-west-3.amazonaws.com/1/q", "eu-west-3"},
		{"the China form gives its region", "https://sqs.cn-north-1.amazonaws.com.cn/1/q", "cn-north-1"},
		{"the legacy form gives its region", "https://us-west-2.queue.amazonaws.com/1/q", "us-west-2"},
		{"a local server gives none", "http://127.0.0.1:9324/1/q", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := RegionOfURL(tt.in); got != tt.want {
				t.Errorf("RegionOfURL(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func FuzzRegionFromURL(f *testing.F) {
	for _, seed := range []string{"https://sqs.eu-west-3.amazonaws.com/1/q", "https://x.queue.amazonaws.com", "sqs..amazonaws.", "::"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) { _ = RegionOfURL(s) })
}

func TestDeadLetterARN(t *testing.T) {
	for _, tt := range []struct{ name, in, want, err string }{
		{"the ARN of a full policy", `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:1:d","maxReceiveCount":3}`, "arn:aws:sqs:us-east-1:1:d", ""},
		{"the ARN without a maxReceiveCount", `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:1:d"}`, "arn:aws:sqs:us-east-1:1:d", ""},
		{"no ARN is an error", `{"maxReceiveCount":3}`, "", "no deadLetterTargetArn"},
		{"invalid JSON is an error", `{`, "", "parsing redrive policy"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DeadLetterARN(tt.in)
			if got != tt.want || (tt.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("DeadLetterARN(%s) = %q, %v; want %q, %q", tt.in, got, err, tt.want, tt.err)
			}
		})
	}
}
