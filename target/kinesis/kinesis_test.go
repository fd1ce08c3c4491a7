package kinesis_test

// These tests run against kinesalite, the Kinesis Data Streams emulator
// pinned in .ci/kinesalite and started by internal/sqstest on a free
// loopback port (they fail under CI=true when it cannot be started, and
// skip elsewhere).

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/internal/sqstest"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/target/kinesis"
	"github.com/pipesproject/pipes/template"
)

// putRecords counts the PutRecords calls OnCall reports.
type putRecords struct{ n atomic.Int64 }

func (c *putRecords) onCall(op string) {
	if op == "PutRecords" {
		c.n.Add(1)
	}
}

// newTarget makes a target for a stream on kinesalite.
func newTarget(t *testing.T, cfg kinesis.Config) *kinesis.Target {
	t.Helper()
	cfg.Endpoint = sqstest.EndpointOf(t, sqstest.Kinesalite)
	cfg.AWSConfig = &aws.Config{Region: sqstest.Region, Credentials: sqstest.Credentials}
	tg, err := kinesis.New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = tg.Close(context.Background()) })
	return tg
}

// event makes an event of a message with a body; its payload is the record.
func event(t testing.TB, id, body string) *pipe.Event {
	t.Helper()
	ev, err := pipe.NewEvent(&source.Message{MessageID: id, Body: body, EventSource: "aws:sqs"})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestRecordsArePutWithTheirRenderedPartitionKeys(t *testing.T) {
	tests := []struct{ name, key string }{
		{"a bare JSON path", "$.body.customer"},
		{"a placeholder", "<$.body.customer>"},
		{"a placeholder in a constant", "c-<$.body.customer>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stream := sqstest.CreateStream(t, "pipes-kinesis-keys", 2)
			var n putRecords
			tg := newTarget(t, kinesis.Config{Stream: stream, PartitionKey: tt.key, OnCall: n.onCall})
			evs := []*pipe.Event{event(t, "m1", `{"customer":"ada"}`), event(t, "m2", `{"customer":"bob"}`)}
			res, err := tg.Deliver(t.Context(), evs)
			if err != nil || len(res.Failures) > 0 {
				t.Fatalf("Deliver = %+v, %v", res, err)
			}
			recs := sqstest.StreamRecords(t, stream, 2, 10*time.Second)
			var got []string
			for _, r := range recs {
				got = append(got, aws.ToString(r.PartitionKey)+" "+string(r.Data[:min(len(r.Data), 80)]))
			}
			slices.Sort(got)
			prefix := strings.TrimSuffix(strings.TrimSuffix(tt.key, "<$.body.customer>"), "$.body.customer")
			for i, c := range []string{"ada", "bob"} {
				if i >= len(got) || !strings.HasPrefix(got[i], prefix+c+" ") || !strings.Contains(got[i], `"messageId":"m`) {
					t.Errorf("records = %q, want partition key %s%s with the record JSON", got, prefix, c)
				}
			}
			if n.n.Load() != 1 {
				t.Errorf("PutRecords calls = %d, want 1", n.n.Load())
			}
		})
	}
}

func TestAThousandAndOneRecordsTakeThreeCallsOfAtMostFiveHundred(t *testing.T) {
	stream := sqstest.CreateStream(t, "pipes-kinesis-many", 4)
	var n putRecords
	tg := newTarget(t, kinesis.Config{Stream: stream, PartitionKey: "$.messageId", OnCall: n.onCall})
	var evs []*pipe.Event
	for i := range 1001 {
		evs = append(evs, event(t, fmt.Sprintf("m%d", i), fmt.Sprintf(`{"n":%d}`, i)))
	}
	res, err := tg.Deliver(t.Context(), evs)
	if err != nil || len(res.Failures) > 0 {
		t.Fatalf("Deliver: %d failures, %v", len(res.Failures), err)
	}
	if got := n.n.Load(); got != 3 {
		t.Errorf("PutRecords calls = %d, want 3", got)
	}
	if recs := sqstest.StreamRecords(t, stream, 1001, 10*time.Second); len(recs) != 1001 {
		t.Errorf("the stream holds %d records, want 1001", len(recs))
	}
}

func TestRecordsThatCannotBePutFailAloneAndTheOthersArePut(t *testing.T) {
	stream := sqstest.CreateStream(t, "pipes-kinesis-bad", 1)
	tg := newTarget(t, kinesis.Config{Stream: stream, PartitionKey: "$.body.k"})
	huge := `{"k":"a","pad":"` + strings.Repeat("x", kinesis.MaxRecordBytes) + `"}`
	evs := []*pipe.Event{
		event(t, "ok", `{"k":"a"}`),
		event(t, "nokey", `{"other":1}`),
		event(t, "huge", huge),
		event(t, "longkey", `{"k":"`+strings.Repeat("k", 257)+`"}`),
	}
	res, err := tg.Deliver(t.Context(), evs)
	if err != nil {
		t.Fatal(err)
	}
	var failed []string
	for _, f := range res.Failures {
		if !core.IsPermanent(f.Err) {
			t.Errorf("failure of %s = %v, want permanent", f.ID, f.Err)
		}
		failed = append(failed, f.ID)
	}
	slices.Sort(failed)
	if want := []string{"huge", "longkey", "nokey"}; !slices.Equal(failed, want) {
		t.Errorf("failed = %v, want %v", failed, want)
	}
	if recs := sqstest.StreamRecords(t, stream, 1, 10*time.Second); len(recs) != 1 {
		t.Errorf("the stream holds %d records, want 1", len(recs))
	}
}

func TestAMissingStreamFailsTheBatchPermanently(t *testing.T) {
	sqstest.EndpointOf(t, sqstest.Kinesalite)
	tg := newTarget(t, kinesis.Config{Stream: sqstest.QueueName("pipes-kinesis-missing", ""), PartitionKey: "k"})
	_, err := tg.Deliver(t.Context(), []*pipe.Event{event(t, "m1", `{}`)})
	if !core.IsPermanent(err) || !strings.Contains(err.Error(), "ResourceNotFoundException") {
		t.Errorf("Deliver error = %v, want a permanent ResourceNotFoundException", err)
	}
}

func TestParamsFromRecordRenderTheKeyAgainstTheSourceRecord(t *testing.T) {
	stream := sqstest.CreateStream(t, "pipes-kinesis-record", 1)
	tg := newTarget(t, kinesis.Config{Stream: stream, PartitionKey: "$.body.k", ParamsFromRecord: true, Vars: template.Vars{PipeName: "p"}})
	ev := event(t, "m1", `{"k":"from-record"}`)
	ev.RecordJSON = []byte("replaced by an input template")
	if res, err := tg.Deliver(t.Context(), []*pipe.Event{ev}); err != nil || len(res.Failures) > 0 {
		t.Fatalf("Deliver = %+v, %v", res, err)
	}
	recs := sqstest.StreamRecords(t, stream, 1, 10*time.Second)
	if len(recs) != 1 || aws.ToString(recs[0].PartitionKey) != "from-record" || string(recs[0].Data) != "replaced by an input template" {
		t.Errorf("records = %+v, want one with key from-record and the payload", recs)
	}
}

func TestNewRefusesABadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  kinesis.Config
		want string
	}{
		{"no stream", kinesis.Config{PartitionKey: "k"}, "stream is required"},
		{"no partition key", kinesis.Config{Stream: "s"}, "partition key is required"},
		{"a bad partition key template", kinesis.Config{Stream: "s", PartitionKey: "<$.body.>"}, `partition key "<$.body.>"`},
		{"a constant key too long", kinesis.Config{Stream: "s", PartitionKey: strings.Repeat("k", 257)}, "over 256 characters"},
		{"an ARN of another service", kinesis.Config{Stream: "arn:aws:sqs:us-east-1:123456789012:q", PartitionKey: "k"}, "not a Kinesis stream ARN"},
		{"a negative timeout", kinesis.Config{Stream: "s", PartitionKey: "k", Timeout: -time.Second}, "timeout -1s is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.AWSConfig = &aws.Config{Region: "us-east-1"}
			_, err := kinesis.New(t.Context(), tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}
