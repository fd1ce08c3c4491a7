package sqs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// queueARN is a parsed arn:<partition>:sqs:<region>:<account>:<name>.
type queueARN struct {
	partition, region, account, name string
}

// parseQueueARN parses an SQS queue ARN.
func parseQueueARN(s string) (queueARN, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" {
		return queueARN{}, fmt.Errorf("queue ARN %q is not of the form arn:<partition>:sqs:<region>:<account>:<name>", s)
	}
	a := queueARN{partition: parts[1], region: parts[3], account: parts[4], name: parts[5]}
	if a.partition == "" || a.region == "" || a.account == "" || a.name == "" {
		return queueARN{}, fmt.Errorf("queue ARN %q has an empty partition, region, account or name", s)
	}
	return a, nil
}

// regionFromURL guesses the region of an AWS queue URL
// (https://sqs.<region>.amazonaws.com/... or the legacy
// https://<region>.queue.amazonaws.com/...); "" when it is not one.
func regionFromURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	host := u.Hostname()
	if rest, ok := strings.CutPrefix(host, "sqs."); ok {
		if region, _, ok := strings.Cut(rest, "."); ok && strings.Contains(rest, ".amazonaws.") {
			return region
		}
	}
	if region, ok := strings.CutSuffix(host, ".queue.amazonaws.com"); ok && !strings.Contains(region, ".") {
		return region
	}
	return ""
}

// redrivePolicy is a queue's RedrivePolicy attribute.
type redrivePolicy struct {
	DeadLetterTargetARN string
	MaxReceiveCount     int
}

// parseRedrivePolicy parses a RedrivePolicy attribute: a JSON object whose
// maxReceiveCount is a number or a string holding one.
func parseRedrivePolicy(s string) (redrivePolicy, error) {
	var raw struct {
		DeadLetterTargetARN string          `json:"deadLetterTargetArn"`
		MaxReceiveCount     json.RawMessage `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return redrivePolicy{}, fmt.Errorf("parsing redrive policy %q: %w", s, err)
	}
	count := bytes.Trim(raw.MaxReceiveCount, `"`)
	n, err := strconv.Atoi(string(count))
	if err != nil || n < 1 {
		return redrivePolicy{}, fmt.Errorf("parsing redrive policy %q: maxReceiveCount %s is not a positive integer", s, raw.MaxReceiveCount)
	}
	if raw.DeadLetterTargetARN == "" {
		return redrivePolicy{}, fmt.Errorf("parsing redrive policy %q: no deadLetterTargetArn", s)
	}
	return redrivePolicy{DeadLetterTargetARN: raw.DeadLetterTargetARN, MaxReceiveCount: n}, nil
}
