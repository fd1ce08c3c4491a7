package sqstest

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// KinesisClient returns a Kinesis client for kinesalite, set up like
// ClientOf. It skips or fails the test like EndpointOf does.
func KinesisClient(t testing.TB) *kinesis.Client {
	t.Helper()
	ep := EndpointOf(t, Kinesalite)
	return kinesis.New(kinesis.Options{Region: Region, BaseEndpoint: aws.String(ep), Credentials: Credentials})
}

// CreateStream creates a stream with a unique name starting with prefix
// and shards shards on kinesalite, waits until it is ACTIVE and returns
// its name. The stream is deleted when the test ends.
func CreateStream(t testing.TB, prefix string, shards int32) string {
	t.Helper()
	c := KinesisClient(t)
	name := QueueName(prefix, "")
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if _, err := c.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String(name), ShardCount: aws.Int32(shards)}); err != nil {
		t.Fatalf("creating the stream %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		_, _ = c.DeleteStream(ctx, &kinesis.DeleteStreamInput{StreamName: aws.String(name)})
	})
	for {
		out, err := c.DescribeStream(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String(name)})
		if err != nil {
			t.Fatalf("describing the stream %s: %v", name, err)
		}
		if out.StreamDescription.StreamStatus == ktypes.StreamStatusActive {
			return name
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the stream %s is not ACTIVE after %v", name, callTimeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// StreamRecords reads every record of every shard of the stream, shard by
// shard, each in order, until it has want records (or, with want 0, what
// is there), giving up after wait.
func StreamRecords(t testing.TB, name string, want int, wait time.Duration) []ktypes.Record {
	t.Helper()
	c := KinesisClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout+wait)
	defer cancel()
	deadline := time.Now().Add(wait)
	for {
		var recs []ktypes.Record
		shards, err := c.ListShards(ctx, &kinesis.ListShardsInput{StreamName: aws.String(name)})
		if err != nil {
			t.Fatalf("listing the shards of %s: %v", name, err)
		}
		for _, sh := range shards.Shards {
			it, err := c.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{
				StreamName: aws.String(name), ShardId: sh.ShardId, ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon,
			})
			if err != nil {
				t.Fatalf("getting an iterator of %s/%s: %v", name, aws.ToString(sh.ShardId), err)
			}
			iter := it.ShardIterator
			for iter != nil {
				out, err := c.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(10000)})
				if err != nil {
					t.Fatalf("reading %s/%s: %v", name, aws.ToString(sh.ShardId), err)
				}
				recs = append(recs, out.Records...)
				if len(out.Records) == 0 {
					break
				}
				iter = out.NextShardIterator
			}
		}
		if len(recs) >= want || time.Now().After(deadline) {
			return recs
		}
		time.Sleep(100 * time.Millisecond)
	}
}
