package s3payload

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/pipesproject/pipes/internal/sqstest"
)

// fauxqs's S3: it answers a missing key with NoSuchKey, a missing bucket
// with NoSuchBucket (404s both), and needs path-style addressing.
func fauxqsStore(t *testing.T, maxSize int64) *Store {
	t.Helper()
	ep := sqstest.EndpointOf(t, sqstest.Fauxqs)
	s, err := NewStore(context.Background(), Config{
		Region: sqstest.Region, Endpoint: ep, PathStyle: true, MaxObjectSize: maxSize,
		AWSConfig: &aws.Config{Region: sqstest.Region, Credentials: sqstest.Credentials},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStoreOnFauxqs(t *testing.T) {
	s := fauxqsStore(t, 1<<20)
	bucket := sqstest.CreateBucket(t, sqstest.S3Client(t))
	ctx := t.Context()
	body := bytes.Repeat([]byte("0123456789"), 100_000) // 1 MB
	p := Pointer{Bucket: bucket, Key: "pipes/one"}

	if err := s.Put(ctx, p, body); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, p)
	if err != nil || got != string(body) {
		t.Fatalf("Get = %d bytes, %v; want the %d bytes put", len(got), err, len(body))
	}
	if err := s.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		p    Pointer
		want error
	}{
		{"a deleted object", p, ErrNotFound},
		{"a bucket that does not exist", Pointer{Bucket: "pipes-no-such-bucket", Key: "k"}, ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Get(ctx, tt.p)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Get = %v, want %v", err, tt.want)
			}
		})
	}
	t.Run("an object above the limit", func(t *testing.T) {
		big := Pointer{Bucket: bucket, Key: "big"}
		if err := s.Put(ctx, big, append(body, body[:(1<<20)-len(body)+1]...)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, big); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("Get = %v, want ErrTooLarge", err)
		}
	})
}
