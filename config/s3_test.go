package config

import (
	"strings"
	"testing"
)

func TestS3PayloadKeysDecode(t *testing.T) {
	sqs := "source: {type: sqs, queue_name: q, "
	tests := []struct {
		name  string
		yaml  string
		check func(Pipe) bool
	}{
		{
			name: "unwrap s3pointer takes no s3 block: the source's region and the SDK's endpoint",
			yaml: sqs + "unwrap: s3pointer}",
			check: func(p Pipe) bool {
				return p.Source.Unwrap == "s3pointer" && p.Source.S3 == nil && !p.Source.DeletePayloads
			},
		},
		{
			name: "an s3 block with an endpoint defaults to path-style addressing",
			yaml: sqs + "unwrap: s3pointer, delete_payloads: true, s3: {endpoint: 'http://127.0.0.1:4566', region: eu-west-1}}",
			check: func(p Pipe) bool {
				s := p.Source.S3
				return p.Source.DeletePayloads && s != nil && s.PathStyle && s.Region == "eu-west-1" &&
					s.Endpoint == "http://127.0.0.1:4566" && s.MaxObjectSize == 64<<20 && s.Concurrency == 16 && s.MissingObject == "retry"
			},
		},
		{
			name: "path_style can be turned off and the limits set",
			yaml: sqs + "unwrap: auto, s3: {endpoint: 'http://h:1', path_style: false, max_object_size: 1024, concurrency: 2, missing_object: dead_letter}}",
			check: func(p Pipe) bool {
				s := p.Source.S3
				return !s.PathStyle && s.MaxObjectSize == 1024 && s.Concurrency == 2 && s.MissingObject == "dead_letter"
			},
		},
		{
			name:  "unwrap s3event needs no S3 client",
			yaml:  sqs + "unwrap: s3event}",
			check: func(p Pipe) bool { return p.Source.Unwrap == "s3event" },
		},
		{
			name: "an sqs target's offload takes the Extended Client's threshold by default",
			yaml: "target: {type: sqs, queue_url: 'http://h/1/q', offload: {bucket: big-payloads}}",
			check: func(p Pipe) bool {
				o := p.Target.Offload
				return o != nil && o.Bucket == "big-payloads" && o.Threshold == 262144 && o.KeyPrefix == "" && !o.S3.PathStyle
			},
		},
		{
			name: "offload keys",
			yaml: "target: {type: sqs, queue_url: 'http://h/1/q', offload: {bucket: b-1.x, threshold: 1, key_prefix: 'pipes/', endpoint: 'http://h:2', region: us-west-2}}",
			check: func(p Pipe) bool {
				o := p.Target.Offload
				return o.Threshold == 1 && o.KeyPrefix == "pipes/" && o.S3.Endpoint == "http://h:2" && o.S3.PathStyle && o.S3.Region == "us-west-2"
			},
		},
		{
			name:  "a dead_letter sqs target may offload too",
			yaml:  "dead_letter: {type: sqs, queue_url: 'http://h/1/dlq', offload: {bucket: dlq-payloads}}",
			check: func(p Pipe) bool { return p.DeadLetter.Target.Offload.Bucket == "dlq-payloads" },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := "name: t\n" + tt.yaml + "\n"
			if !strings.Contains(tt.yaml, "source:") {
				y += "source: {type: memory}\n"
			}
			if !strings.Contains(tt.yaml, "target:") {
				y += "target: {type: stdout}\n"
			}
			if p := parseOne(t, y); !tt.check(p) {
				t.Fatalf("unexpected decoding: source %+v, target %+v", p.Source, p.Target)
			}
		})
	}
}

func TestS3PayloadKeysAreChecked(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"delete_payloads needs pointers", "source: {type: sqs, queue_name: q, unwrap: sns, delete_payloads: true}",
			"p.yaml:2:66: source.delete_payloads: needs unwrap: s3pointer (or auto)"},
		{"delete_payloads is for sqs sources", "source: {type: memory, delete_payloads: true}",
			"source.delete_payloads: only for sqs sources"},
		{"s3pointer is for sqs sources", "source: {type: memory, unwrap: s3pointer}",
			"source.unwrap: s3pointer is only for sqs sources"},
		{"an s3 block without pointers", "source: {type: sqs, queue_name: q, s3: {region: x}}",
			"source.s3: is only used with unwrap: s3pointer (or auto)"},
		{"an unknown s3 key", "source: {type: sqs, queue_name: q, unwrap: s3pointer, s3: {bucket: x}}",
			"source.s3.bucket"},
		{"an s3 endpoint that is no URL", "source: {type: sqs, queue_name: q, unwrap: s3pointer, s3: {endpoint: 'ftp://x'}}",
			"source.s3.endpoint"},
		{"max_object_size above 2 GiB", "source: {type: sqs, queue_name: q, unwrap: s3pointer, s3: {max_object_size: 3000000000}}",
			"source.s3.max_object_size: must be between 1 and 2147483648"},
		{"an unknown missing_object", "source: {type: sqs, queue_name: q, unwrap: s3pointer, s3: {missing_object: drop}}",
			"source.s3.missing_object: must be one of retry, dead_letter"},
		{"an unknown unwrap", "source: {type: sqs, queue_name: q, unwrap: s3}",
			"source.unwrap: must be one of none, sns, eventbridge, s3pointer, s3event, auto"},
		{"offload needs a bucket", "target: {type: sqs, queue_url: 'http://h/1/q', offload: {threshold: 10}}",
			"target.offload: bucket is required for offload"},
		{"a bucket name S3 refuses", "target: {type: sqs, queue_url: 'http://h/1/q', offload: {bucket: Big_Payloads}}",
			"target.offload.bucket: must be an S3 bucket name"},
		{"a threshold above SQS's 1 MiB", "target: {type: sqs, queue_url: 'http://h/1/q', offload: {bucket: b12, threshold: 2000000}}",
			"target.offload.threshold: must be between 1 and 1048576"},
		{"offload is for sqs targets", "target: {type: sns, topic_arn: 'arn:aws:sns:us-east-1:123456789012:t', offload: {bucket: b12}}",
			"target.offload: only for sqs targets"},
		{"a key prefix too long", "target: {type: sqs, queue_url: 'http://h/1/q', offload: {bucket: b12, key_prefix: " + strings.Repeat("k", 989) + "}}",
			"target.offload.key_prefix: must be at most 988 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := "name: t\n" + tt.yaml + "\n"
			if !strings.Contains(tt.yaml, "source:") {
				y += "source: {type: memory}\n"
			}
			if !strings.Contains(tt.yaml, "target:") {
				y += "target: {type: stdout}\n"
			}
			_, err := testLoader().Parse("p.yaml", []byte(y))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v\nwant it to contain %q", err, tt.want)
			}
		})
	}
}
