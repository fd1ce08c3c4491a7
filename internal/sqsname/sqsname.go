// Package sqsname parses the names SQS gives things: queue ARNs, the region
// of a queue URL, and a queue's RedrivePolicy attribute. The SQS source, the
// SQS target and the redrive tool share it.
package sqsname

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// QueueARN is a parsed arn:<partition>:sqs:<region>:<account>:<name>.
type QueueARN struct {
	Partition, Region, Account, Name string
}

// ParseQueueARN parses an SQS queue ARN.
func ParseQueueARN(s string) (QueueARN, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" {
		return QueueARN{}, fmt.Errorf("queue ARN %q is not of the form arn:<partition>:sqs:<region>:<account>:<name>", s)
	}
	a := QueueARN{Partition: parts[1], Region: parts[3], Account: parts[4], Name: parts[5]}
	if a.Partition == "" || a.Region == "" || a.Account == "" || a.Name == "" {
		return QueueARN{}, fmt.Errorf("queue ARN %q has an empty partition, region, account or name", s)
	}
	return a, nil
}

// RegionOfURL guesses the region of an AWS queue URL
// (https://sqs.<region>.amazonaws.com/... or the legacy
// https://<region>.queue.amazonaws.com/...); "" when it is not one.
func RegionOfURL(s string) string {
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

// RedrivePolicy is a queue's RedrivePolicy attribute.
type RedrivePolicy struct {
	DeadLetterTargetARN string
	MaxReceiveCount     int
}

// ParseRedrivePolicy parses a RedrivePolicy attribute: a JSON object whose
// maxReceiveCount is a number or a string holding one.
func ParseRedrivePolicy(s string) (RedrivePolicy, error) {
	var raw struct {
		DeadLetterTargetARN string          `json:"deadLetterTargetArn"`
		MaxReceiveCount     json.RawMessage `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return RedrivePolicy{}, fmt.Errorf("parsing redrive policy %q: %w", s, err)
	}
	count := bytes.Trim(raw.MaxReceiveCount, `"`)
	n, err := strconv.Atoi(string(count))
	if err != nil || n < 1 {
		return RedrivePolicy{}, fmt.Errorf("parsing redrive policy %q: maxReceiveCount %s is not a positive integer", s, raw.MaxReceiveCount)
	}
	if raw.DeadLetterTargetARN == "" {
		return RedrivePolicy{}, fmt.Errorf("parsing redrive policy %q: no deadLetterTargetArn", s)
	}
	return RedrivePolicy{DeadLetterTargetARN: raw.DeadLetterTargetARN, MaxReceiveCount: n}, nil
}

// DeadLetterARN returns the deadLetterTargetArn of a RedrivePolicy
// attribute, whatever its maxReceiveCount (a tool that only looks for the
// dead-letter queue needs no more).
func DeadLetterARN(s string) (string, error) {
	var raw struct {
		DeadLetterTargetARN string `json:"deadLetterTargetArn"`
	}
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return "", fmt.Errorf("parsing redrive policy %q: %w", s, err)
	}
	if raw.DeadLetterTargetARN == "" {
		return "", fmt.Errorf("parsing redrive policy %q: no deadLetterTargetArn", s)
	}
	return raw.DeadLetterTargetARN, nil
}
