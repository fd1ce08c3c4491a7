package sqstest

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// S3Client returns an S3 client for fauxqs's S3 (local-aws-sqs has none),
// set up like ClientOf. fauxqs serves S3 on the same port as SQS and SNS;
// buckets are addressed in the path, since virtual-hosted names
// (bucket.s3.localhost) do not resolve. It skips or fails the test like
// EndpointOf does.
func S3Client(t testing.TB) *s3.Client {
	t.Helper()
	ep := EndpointOf(t, Fauxqs)
	return s3.New(s3.Options{Region: Region, BaseEndpoint: aws.String(ep), Credentials: Credentials, UsePathStyle: true})
}

// CreateBucket creates a bucket on c with a name unique to this call, and empties and deletes it
// when the test ends.
func CreateBucket(t testing.TB, c *s3.Client) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	name := strings.ToLower(QueueName("pipes-test", "")) // pipes-test-<12 hex digits>
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("sqstest: creating bucket %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		for _, k := range Keys(t, c, name) {
			_, _ = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(name), Key: aws.String(k)})
		}
		_, _ = c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(name)})
	})
	return name
}

// PutObject stores body under key in bucket.
func PutObject(t testing.TB, c *s3.Client, bucket, key string, body []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(string(body))}); err != nil {
		t.Fatalf("sqstest: putting s3://%s/%s: %v", bucket, key, err)
	}
}

// GetObject reads the object under key in bucket; ok is false when there
// is none.
func GetObject(t testing.TB, c *s3.Client, bucket, key string) (body []byte, ok bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	var nsk *types.NoSuchKey
	if errors.As(err, &nsk) {
		return nil, false
	}
	if err != nil {
		t.Fatalf("sqstest: getting s3://%s/%s: %v", bucket, key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatalf("sqstest: reading s3://%s/%s: %v", bucket, key, err)
	}
	return b, true
}

// Keys lists the keys of bucket, in S3's order.
func Keys(t testing.TB, c *s3.Client, bucket string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var keys []string
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("sqstest: listing s3://%s: %v", bucket, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys
}
