// Package s3payload reads and writes the large-payload conventions of
// Amazon SQS on S3: the SQS Extended Client Library's pointer (a body
// that names the S3 object holding the real payload) and S3's event
// notifications (a body listing the objects an event was about). It holds
// the parsers, pure and fuzzed, and Store, a small S3 client that gets,
// puts and deletes payload objects.
package s3payload

import (
	"bytes"
	"encoding/json"
)

// PointerClass is the first element of an Extended Client pointer body:
// the Java class of the serialized pointer.
const PointerClass = "software.amazon.payloadoffloading.PayloadS3Pointer"

// Message attributes the Extended Client sets on a message whose body is
// a pointer: the payload's size in bytes, as a Number. pipes sets the
// current one when it offloads; it takes a pointer body for a pointer with
// either, or neither.
const (
	// AttrPayloadSize is what current clients set.
	AttrPayloadSize = "ExtendedPayloadSize"
	// AttrLegacyPayloadSize is what clients before 2.0 set.
	AttrLegacyPayloadSize = "SQSLargePayloadSize"
)

// DefaultThreshold is the Extended Client's default offload threshold:
// 256 KiB of body and message attributes.
const DefaultThreshold = 262144

// Pointer names the S3 object holding an offloaded payload.
type Pointer struct {
	Bucket string `json:"s3BucketName"`
	Key    string `json:"s3Key"`
}

// String is the object as s3://bucket/key, for errors and logs.
func (p Pointer) String() string { return "s3://" + p.Bucket + "/" + p.Key }

// Body is the message body the Extended Client sends for p: the
// two-element JSON array of the pointer's class and its fields, byte for
// byte as the Java client writes it.
func (p Pointer) Body() string {
	var b bytes.Buffer
	b.WriteString(`["` + PointerClass + `",{"s3BucketName":`)
	writeJSONString(&b, p.Bucket)
	b.WriteString(`,"s3Key":`)
	writeJSONString(&b, p.Key)
	b.WriteString(`}]`)
	return b.String()
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc, _ := json.Marshal(s) // a string always encodes
	b.Write(enc)
}

// ParsePointer reads an Extended Client pointer body. It reports false
// for any other body, including a pointer array with another class, extra
// elements or an empty bucket or key. It does not look at the message
// attributes: a body of exactly this shape is taken as a pointer.
func ParsePointer(body string) (Pointer, bool) {
	if len(body) < len(PointerClass)+4 || body[0] != '[' {
		return Pointer{}, false
	}
	var parts []json.RawMessage
	if json.Unmarshal([]byte(body), &parts) != nil || len(parts) != 2 {
		return Pointer{}, false
	}
	var class string
	if json.Unmarshal(parts[0], &class) != nil || class != PointerClass {
		return Pointer{}, false
	}
	var p Pointer
	if json.Unmarshal(parts[1], &p) != nil || p.Bucket == "" || p.Key == "" {
		return Pointer{}, false
	}
	return p, true
}
