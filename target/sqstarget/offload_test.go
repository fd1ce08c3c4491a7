package sqstarget_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/internal/s3payload"
	"github.com/pipesproject/pipes/internal/sqstest"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/target/sqstarget"
)

// fauxqs only: local-aws-sqs has no S3. The threshold counts body and
// attributes, from the threshold on (the Java client offloads above it);
// an offloaded message keeps nine of its attributes and carries
// ExtendedPayloadSize; a bucket that does not exist fails only the records
// that had to go there, as client errors.
func TestOffloadOnFauxqs(t *testing.T) {
	ep := sqstest.EndpointOf(t, sqstest.Fauxqs)
	client := sqstest.ClientOf(t, sqstest.Fauxqs)
	s3c := sqstest.S3Client(t)
	bucket := sqstest.CreateBucket(t, s3c)
	store := func(t *testing.T) *s3payload.Store {
		s, err := s3payload.NewStore(t.Context(), s3payload.Config{Endpoint: ep, PathStyle: true, AWSConfig: testAWSConfig()})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	const threshold = 1000
	attrs := map[string]source.MessageAttribute{}
	for i := range 10 {
		v := "v"
		attrs[fmt.Sprintf("a%d", i)] = source.MessageAttribute{DataType: "String", StringValue: &v}
	}
	attrSize := 10 * len("a0Stringv")

	tests := []struct {
		name    string
		payload int // bytes
		attrs   map[string]source.MessageAttribute
		offload bool
	}{
		{"below the threshold", threshold - 1, nil, false},
		{"at the threshold", threshold, nil, true},
		{"attributes count", threshold - attrSize, attrs, true},
		{"attributes and one byte less", threshold - attrSize - 1, attrs, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{})
			tg, err := sqstarget.New(t.Context(), sqstarget.Config{
				QueueURL: url, Endpoint: ep, AWSConfig: testAWSConfig(),
				Offload: &sqstarget.Offload{Bucket: bucket, Threshold: threshold, KeyPrefix: "t/", Store: store(t)},
			})
			if err != nil {
				t.Fatal(err)
			}
			body := strings.Repeat("x", tt.payload)
			ev := payloadEvent("m1", body)
			ev.Attributes = tt.attrs
			if res, err := tg.Deliver(t.Context(), []*pipe.Event{ev}); err != nil || len(res.Failures) > 0 {
				t.Fatalf("Deliver = %+v, %v", res, err)
			}
			out, err := client.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MessageAttributeNames: []string{"All"}})
			if err != nil || len(out.Messages) != 1 {
				t.Fatalf("receive: %d messages, %v", len(out.Messages), err)
			}
			m := out.Messages[0]
			ptr, isPointer := s3payload.ParsePointer(aws.ToString(m.Body))
			if isPointer != tt.offload {
				t.Fatalf("offloaded = %v, want %v (body %.60q)", isPointer, tt.offload, aws.ToString(m.Body))
			}
			if !tt.offload {
				if aws.ToString(m.Body) != body {
					t.Fatal("the body was changed")
				}
				return
			}
			if got, ok := sqstest.GetObject(t, s3c, ptr.Bucket, ptr.Key); !ok || string(got) != body || !strings.HasPrefix(ptr.Key, "t/") {
				t.Fatalf("object %s: %d bytes, ok %v; want the payload under t/", ptr, len(got), ok)
			}
			size := m.MessageAttributes[s3payload.AttrPayloadSize]
			if aws.ToString(size.DataType) != "Number" || aws.ToString(size.StringValue) != strconv.Itoa(len(body)) {
				t.Fatalf("ExtendedPayloadSize = %s %s", aws.ToString(size.DataType), aws.ToString(size.StringValue))
			}
			if want := min(len(tt.attrs), 9) + 1; len(m.MessageAttributes) != want {
				t.Fatalf("%d attributes, want %d (at most nine of the event's, and ExtendedPayloadSize)", len(m.MessageAttributes), want)
			}
		})
	}

	t.Run("a missing bucket fails the offloaded records alone", func(t *testing.T) {
		url, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{})
		tg, err := sqstarget.New(t.Context(), sqstarget.Config{
			QueueURL: url, Endpoint: ep, AWSConfig: testAWSConfig(),
			Offload: &sqstarget.Offload{Bucket: "pipes-no-such-bucket", Threshold: threshold, Store: store(t)},
		})
		if err != nil {
			t.Fatal(err)
		}
		res, err := tg.Deliver(t.Context(), []*pipe.Event{payloadEvent("small", "s"), payloadEvent("large", strings.Repeat("x", threshold))})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Failures) != 1 || res.Failures[0].ID != "large" || !core.IsPermanent(res.Failures[0].Err) || !errors.Is(res.Failures[0].Err, s3payload.ErrNotFound) {
			t.Fatalf("failures %+v, want the large record alone, a permanent not-found", res.Failures)
		}
		if bodies := sqstest.DrainBodies(t, client, url); len(bodies) != 1 || bodies[0] != "s" {
			t.Fatalf("queue holds %q, want the small record", bodies)
		}
	})
}
