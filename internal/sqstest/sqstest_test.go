package sqstest

import (
	"encoding/json"
	"regexp"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"slices"
	"strings"
	"testing"
	"time"
)

var validQueueName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)

func TestQueueNameKeepsToTheSQSRules(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, prefix, suffix string }{
		{"a subtest name loses its slashes and spaces", "TestX/some case with spaces", ""},
		{"a long name is cut to fit with a dead-letter suffix", strings.Repeat("abc", 60), ""},
		{"a FIFO name ends in .fifo", strings.Repeat("Z", 100), ".fifo"},
		{"an empty prefix still gives a name", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, b := QueueName(tt.prefix, tt.suffix), QueueName(tt.prefix, tt.suffix)
			if a == b {
				t.Errorf("two names for %q are both %q", tt.prefix, a)
			}
			base, ok := strings.CutSuffix(a, tt.suffix)
			if !ok || !validQueueName.MatchString(base+"-dlq") || len(a)+len("-dlq") > maxQueueName {
				t.Errorf("QueueName(%q, %q) = %q, not a valid SQS name with room for -dlq", tt.prefix, tt.suffix, a)
			}
		})
	}
}

func FuzzQueueName(f *testing.F) {
	for _, seed := range []string{"TestA/b c", "ä€/\x00", strings.Repeat("x", 200)} {
		f.Add(seed, false)
	}
	f.Fuzz(func(t *testing.T, prefix string, fifo bool) {
		suffix := ""
		if fifo {
			suffix = ".fifo"
		}
		name := QueueName(prefix, suffix)
		base, _ := strings.CutSuffix(name, suffix)
		if !validQueueName.MatchString(base+"-dlq") || len(name)+len("-dlq") > maxQueueName {
			t.Errorf("QueueName(%q) = %q", prefix, name)
		}
	})
}

func TestParsePort(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		line    string
		want    int
		wantErr bool
	}{
		{"the announced port is read", "listening 4566\n", 4566, false},
		{"another line is refused", "Error: boom\n", 0, true},
		{"a port out of range is refused", "listening 70000\n", 0, true},
		{"a missing port is refused", "listening \n", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parsePort(tt.line)
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("parsePort(%q) = %d, %v; want %d, error %v", tt.line, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func FuzzParsePort(f *testing.F) {
	for _, seed := range []string{"listening 1\n", "listening 65535", "listening -1", "x"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if p, err := parsePort(line); err == nil && (p < 1 || p > 65535) {
			t.Errorf("parsePort(%q) = %d", line, p)
		}
	})
}

// Both servers keep the messages sent and count an emptied queue as empty.
func TestHelpersSendCountAndDrainAQueue(t *testing.T) {
	t.Parallel()
	Servers(t, func(t *testing.T, s Server) {
		t.Parallel()
		helpersSendCountAndDrain(t, ClientOf(t, s))
	})
}

func helpersSendCountAndDrain(t *testing.T, c *sqs.Client) {
	for _, fifo := range []bool{false, true} {
		url, dlq := CreateQueue(t, c, QueueOptions{FIFO: fifo, VisibilityTimeout: 30 * time.Second, MaxReceiveCount: 2})
		if dlq == "" || strings.HasSuffix(url, ".fifo") != fifo || strings.HasSuffix(dlq, ".fifo") != fifo {
			t.Fatalf("CreateQueue(fifo %v) = %q, %q", fifo, url, dlq)
		}
		bodies := []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12"}
		ids := SendBodies(t, c, url, bodies...)
		if len(ids) != len(bodies) || slices.Contains(ids, "") {
			t.Fatalf("SendBodies returned ids %v", ids)
		}
		// (No Count here: local-aws-sqs counts a just-sent message only
		// after a timer tick.)
		got := DrainBodies(t, c, url)
		slices.Sort(got)
		want := slices.Clone(bodies)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("DrainBodies = %v, want %v", got, want)
		}
		if visible, inflight := Count(t, c, url); visible != 0 || inflight != 0 {
			t.Errorf("after draining: %d visible, %d in flight", visible, inflight)
		}
	}
}

// Both servers keep the attributes a queue is created with (their account
// ids differ: 123456789012 on local-aws-sqs, 000000000000 on fauxqs).
func TestCreateQueueSetsTheQueueAttributes(t *testing.T) {
	t.Parallel()
	Servers(t, func(t *testing.T, s Server) {
		t.Parallel()
		createQueueSetsAttributes(t, ClientOf(t, s))
	})
}

func createQueueSetsAttributes(t *testing.T, c *sqs.Client) {
	url, dlq := CreateQueue(t, c, QueueOptions{VisibilityTimeout: 45 * time.Second, ReceiveWait: 2 * time.Second, MaxReceiveCount: 4})
	out, err := c.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll},
	})
	if err != nil {
		t.Fatalf("GetQueueAttributes: %v", err)
	}
	dlqName := dlq[strings.LastIndex(dlq, "/")+1:]
	var policy struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
		MaxReceiveCount     json.Number
	}
	if err := json.Unmarshal([]byte(out.Attributes["RedrivePolicy"]), &policy); err != nil {
		t.Errorf("RedrivePolicy %q: %v", out.Attributes["RedrivePolicy"], err)
	}
	if !strings.HasPrefix(policy.DeadLetterTargetArn, "arn:aws:sqs:us-east-1:") || !strings.HasSuffix(policy.DeadLetterTargetArn, ":"+dlqName) || policy.MaxReceiveCount != "4" {
		t.Errorf("RedrivePolicy = %q, want the ARN of %s and maxReceiveCount 4", out.Attributes["RedrivePolicy"], dlqName)
	}
	for name, want := range map[string]string{
		"VisibilityTimeout":             "45",
		"ReceiveMessageWaitTimeSeconds": "2",
	} {
		if got := out.Attributes[name]; got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}
