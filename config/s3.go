package config

import (
	"regexp"
	"strings"
)

// S3 is how a pipe reaches the S3 objects of large payloads: an sqs
// source's `s3:` block (for `unwrap: s3pointer` or `auto`) or the
// connection keys of an sqs target's `offload:`.
type S3 struct {
	// Region overrides the AWS config's region; a source's default is the
	// source's own region. Key `region`.
	Region string
	// Endpoint overrides the S3 endpoint (an S3-compatible server such as
	// fauxqs or MinIO). Key `endpoint`.
	Endpoint string
	// PathStyle addresses buckets in the URL's path, as emulators need;
	// default true when Endpoint is set, else false. Key `path_style`.
	PathStyle bool
	// MaxObjectSize is the largest payload object a source reads, in
	// bytes: a pointer to a larger one fails its message (default 64 MiB,
	// 1..2 GiB). Key `max_object_size`.
	MaxObjectSize int
	// Concurrency is how many objects a source fetches (and, apart,
	// deletes) at once (default 16, 1..256). Key `concurrency`.
	Concurrency int
	// MissingObject is what a pointer to a missing object or bucket does:
	// "retry" (default: it fails like any message, back to the queue until
	// the redrive policy moves it) or "dead_letter" (a client error: to the
	// pipe's dead_letter target at once). Key `missing_object`.
	MissingObject string
	Pos           Pos
}

// Offload is an sqs target's `offload:` block: payloads at or above
// Threshold go to S3 and the message carries the SQS Extended Client's
// pointer instead.
type Offload struct {
	// Bucket receives the payloads. Key `bucket`, required.
	Bucket string
	// Threshold is the size in bytes (body and message attributes) from
	// which a payload is offloaded: default 262144, the Extended Client's;
	// 1..1048576 (SQS's largest message). Key `threshold`.
	Threshold int
	// KeyPrefix is put before each object's key (a random UUID). Key
	// `key_prefix`.
	KeyPrefix string
	// S3 holds the connection keys `region`, `endpoint`, `path_style`
	// written in the offload block itself.
	S3  S3
	Pos Pos
}

// Defaults of the S3 payload keys.
const (
	defaultMaxObjectSize    = 64 << 20
	maxMaxObjectSize        = 2 << 30
	defaultS3Concurrency    = 16
	defaultOffloadThreshold = 262144
	maxOffloadThreshold     = 1 << 20
	maxKeyPrefix            = 1024 - 36 // S3's key limit less the UUID
)

// s3Bucket is S3's rule for general purpose bucket names.
var s3Bucket = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// s3Connection reads the connection keys of an S3 block.
func (b *block) s3Connection() S3 {
	s := S3{Pos: b.pos, Region: b.str("region"), Endpoint: b.str("endpoint")}
	b.checkHTTPURL("endpoint", s.Endpoint)
	s.PathStyle = b.boolean("path_style", s.Endpoint != "")
	return s
}

// sourcePayloads reads and checks the S3 payload keys of a source:
// `delete_payloads` and `s3`, which only sqs sources take, and the unwrap
// kinds that need them.
func (d *decoder) sourcePayloads(b *block, s *Source) {
	s.DeletePayloads = b.boolean("delete_payloads", false)
	if sb := b.sub("s3", []string{"region", "endpoint", "path_style", "max_object_size", "concurrency", "missing_object"}); sb != nil {
		c := sb.s3Connection()
		c.MaxObjectSize = sb.integer("max_object_size", defaultMaxObjectSize, 1, maxMaxObjectSize)
		c.Concurrency = sb.integer("concurrency", defaultS3Concurrency, 1, 256)
		c.MissingObject = sb.enum("missing_object", "retry", "retry", "dead_letter")
		s.S3 = &c
	}
	if s.Type != "sqs" && s.Type != "" {
		b.only("only for sqs sources", "delete_payloads", "s3")
		if s.Unwrap == "s3pointer" || s.Unwrap == "s3event" {
			d.errorf(b.at("unwrap"), b.field("unwrap"), "%s is only for sqs sources", s.Unwrap)
		}
		return
	}
	pointers := s.Unwrap == "s3pointer" || s.Unwrap == "auto"
	if s.DeletePayloads && !pointers {
		d.errorf(b.at("delete_payloads"), b.field("delete_payloads"), "needs unwrap: s3pointer (or auto): only the objects of unwrapped pointers are deleted")
	}
	if s.S3 != nil && !pointers {
		d.errorf(b.at("s3"), b.field("s3"), "is only used with unwrap: s3pointer (or auto)")
	}
}

// targetOffload reads and checks an sqs target's `offload:` block.
func (d *decoder) targetOffload(b *block, t *Target) {
	ob := b.sub("offload", []string{"bucket", "threshold", "key_prefix", "region", "endpoint", "path_style"})
	if ob == nil {
		return
	}
	if t.Type != "sqs" && t.Type != "" {
		b.only("only for sqs targets", "offload")
		return
	}
	o := &Offload{Pos: ob.pos, S3: ob.s3Connection()}
	o.Bucket = ob.str("bucket")
	o.Threshold = ob.integer("threshold", defaultOffloadThreshold, 1, maxOffloadThreshold)
	o.KeyPrefix = ob.str("key_prefix")
	switch {
	case !ob.has("bucket"):
		d.errorf(ob.pos, ob.path, "bucket is required for offload")
	case !strings.Contains(o.Bucket, "${") && !s3Bucket.MatchString(o.Bucket):
		d.errorf(ob.at("bucket"), ob.field("bucket"), "must be an S3 bucket name: 3 to 63 lower-case letters, digits, '.' or '-'")
	}
	if len(o.KeyPrefix) > maxKeyPrefix {
		d.errorf(ob.at("key_prefix"), ob.field("key_prefix"), "must be at most %d bytes (S3 keys are at most 1024, and the UUID takes 36)", maxKeyPrefix)
	}
	t.Offload = o
}
