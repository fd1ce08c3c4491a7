package sqstarget

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/pipesproject/pipes/internal/kit/awsclient"
	"github.com/pipesproject/pipes/internal/s3payload"
	"github.com/pipesproject/pipes/pipe"
)

// Offload says how the target sends large payloads the SQS Extended
// Client way: a payload whose size (body and message attributes, in bytes)
// is at or above Threshold is stored in S3 and the message carries the
// pointer body (`["software.amazon.payloadoffloading.PayloadS3Pointer",
// {"s3BucketName":…,"s3Key":…}]`) and the Number attribute
// ExtendedPayloadSize, the payload's size, instead. A pipes source with
// `unwrap: s3pointer`, or an Extended Client consumer, reads it back.
type Offload struct {
	// Bucket receives the payloads. Required.
	Bucket string
	// KeyPrefix is put before each object's key, a random UUID as the
	// Extended Client makes it.
	KeyPrefix string
	// Threshold is the size from which payloads are offloaded; 0 means
	// s3payload.DefaultThreshold (262144).
	Threshold int
	// Store reaches S3. Required.
	Store *s3payload.Store
}

// check reports what is missing.
func (o *Offload) check() error {
	var problems []error
	if o.Bucket == "" {
		problems = append(problems, errors.New("offload needs a bucket"))
	}
	if o.Store == nil {
		problems = append(problems, errors.New("offload needs an S3 store"))
	}
	if o.Threshold < 0 {
		problems = append(problems, fmt.Errorf("offload threshold %d is negative", o.Threshold))
	}
	return errors.Join(problems...)
}

// offloaded is the pointer an event's payload was stored under.
type offloaded struct {
	body string // the pointer body
	size int    // the payload's bytes
}

// offload stores the payloads of events at or above the threshold, up to
// maxParallel at once, and returns their pointers by event index; an
// event whose payload could not be stored has its error in errs instead
// (an access denied or a missing bucket is pipe.Permanent).
func (t *Target) offload(ctx context.Context, events []*pipe.Event) (ptrs []*offloaded, errs []error) {
	o := t.off
	threshold := o.Threshold
	if threshold == 0 {
		threshold = s3payload.DefaultThreshold
	}
	ptrs = make([]*offloaded, len(events))
	errs = make([]error, len(events))
	sem := make(chan struct{}, t.maxParallel)
	var wg sync.WaitGroup
	for i, ev := range events {
		_, attrSize := awsclient.MessageAttributes(ev.Attributes, MaxAttributes, messageAttribute)
		if len(ev.RecordJSON)+attrSize < threshold {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = fmt.Errorf("offloading a payload to S3: %w", ctx.Err())
				return
			}
			defer func() { <-sem }()
			ptr := s3payload.Pointer{Bucket: o.Bucket, Key: o.KeyPrefix + newUUID()}
			callCtx, cancel := context.WithTimeout(ctx, t.timeout)
			defer cancel()
			if err := o.Store.Put(callCtx, ptr, ev.RecordJSON); err != nil {
				if errors.Is(err, s3payload.ErrAccessDenied) || errors.Is(err, s3payload.ErrNotFound) {
					err = pipe.Permanent(err)
				}
				errs[i] = fmt.Errorf("offloading a payload of %d bytes for %s: %w", len(ev.RecordJSON), t.queueURL, err)
				return
			}
			ptrs[i] = &offloaded{body: ptr.Body(), size: len(ev.RecordJSON)}
		}()
	}
	wg.Wait()
	return ptrs, errs
}

// pointerEntry turns the entry of an offloaded event into the pointer
// message: the pointer body, the event's attributes (nine at most) and
// ExtendedPayloadSize.
func pointerEntry(e entry, ev *pipe.Event, p *offloaded) entry {
	e.Req.MessageBody = aws.String(p.body)
	attrs, attrSize := awsclient.MessageAttributes(ev.Attributes, MaxAttributes-1, messageAttribute)
	if attrs == nil {
		attrs = map[string]types.MessageAttributeValue{}
	}
	size := strconv.Itoa(p.size)
	attrs[s3payload.AttrPayloadSize] = types.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(size)}
	e.Req.MessageAttributes = attrs
	e.Size = len(p.body) + attrSize + len(s3payload.AttrPayloadSize) + len("Number") + len(size)
	return e
}

// newUUID is a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	const hex = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, c := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hex[c>>4], hex[c&0x0f])
	}
	return string(out)
}
