package kinesis

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/internal/kit/awsbatch"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

// refusing is the one method of the Kinesis client the target calls,
// answering each record with the ErrorCode its data names: kinesalite
// never refuses a record, so the per-record codes are tested on this.
type refusing struct{}

func (refusing) PutRecords(_ context.Context, in *kinesis.PutRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	out := &kinesis.PutRecordsOutput{}
	for _, r := range in.Records {
		var e types.PutRecordsResultEntry
		if code := string(r.Data); code != "ok" {
			e.ErrorCode, e.ErrorMessage = aws.String(code), aws.String("refused")
			out.FailedRecordCount = aws.Int32(aws.ToInt32(out.FailedRecordCount) + 1)
		} else {
			e.SequenceNumber, e.ShardId = aws.String("1"), aws.String("shardId-000000000000")
		}
		out.Records = append(out.Records, e)
	}
	return out, nil
}

func TestRefusedRecordsFailJustTheirItemsWithTheirClass(t *testing.T) {
	tg, err := newTarget(Config{Stream: "s", PartitionKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	tg.api = refusing{}
	tests := []struct {
		code                 string
		throttled, permanent bool
	}{
		{"ProvisionedThroughputExceededException", true, false},
		{"InternalFailure", false, false},
		{"KMSThrottlingException", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			evs := []*pipe.Event{payload(t, "m1", "ok"), payload(t, "m2", tt.code)}
			res, err := tg.Deliver(t.Context(), evs)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Failures) != 1 || res.Failures[0].ID != "m2" {
				t.Fatalf("failures = %+v, want m2 alone", res.Failures)
			}
			f := res.Failures[0].Err
			var ee *awsbatch.EntryError
			if core.IsThrottled(f) != tt.throttled || core.IsPermanent(f) != tt.permanent || !errors.As(f, &ee) || ee.ErrorCode() != tt.code {
				t.Errorf("failure = %v: throttled %v permanent %v, want %v %v with code %s", f, core.IsThrottled(f), core.IsPermanent(f), tt.throttled, tt.permanent, tt.code)
			}
		})
	}
}

// payload makes an event whose payload is p.
func payload(t testing.TB, id, p string) *pipe.Event {
	t.Helper()
	ev, err := pipe.NewEvent(&source.Message{MessageID: id, Body: `{"customer":"ada"}`})
	if err != nil {
		t.Fatal(err)
	}
	ev.RecordJSON = []byte(p)
	return ev
}

// BenchmarkEntryBuilding builds the records of a batch of 500 events with a
// templated partition key, as Deliver does before its calls.
func BenchmarkEntryBuilding(b *testing.B) {
	tg, err := newTarget(Config{Stream: "s", PartitionKey: "$.body.customer"})
	if err != nil {
		b.Fatal(err)
	}
	evs := make([]*pipe.Event, MaxBatch)
	for i := range evs {
		ev, err := pipe.NewEvent(&source.Message{MessageID: fmt.Sprint(i), Body: fmt.Sprintf(`{"customer":"c%d","order":{"id":%d,"lines":[1,2,3]}}`, i%50, i)})
		if err != nil {
			b.Fatal(err)
		}
		evs[i] = ev
	}
	b.ReportAllocs()
	for b.Loop() {
		for i, ev := range evs {
			if _, err := tg.entry(i, ev); err != nil {
				b.Fatal(err)
			}
		}
	}
}
