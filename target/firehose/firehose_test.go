package firehose_test

// No Firehose emulator exists on npm, so these tests run against
// sqstest.FirehoseServer, an in-process fake that decodes the awsJson1_1
// requests the SDK sends and checks them against the PutRecordBatch API
// reference (500 records, 4 MiB a call, 1,000 KiB a record), answering as
// Firehose does (see internal/sqstest/firehose.go).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/internal/kit/awsbatch"
	"github.com/pipesproject/pipes/internal/sqstest"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/target/firehose"
)

// start runs a server for the stream and returns a target config for it.
func start(t *testing.T, stream string) (*sqstest.FirehoseServer, firehose.Config) {
	t.Helper()
	s := sqstest.StartFirehose(t, stream)
	return s, firehose.Config{
		DeliveryStream: stream, Endpoint: s.URL,
		AWSConfig: &aws.Config{Region: sqstest.Region, Credentials: sqstest.Credentials},
	}
}

func newTarget(t *testing.T, cfg firehose.Config) *firehose.Target {
	t.Helper()
	tg, err := firehose.New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = tg.Close(context.Background()) })
	return tg
}

// payload makes an event whose payload is p.
func payload(t testing.TB, id, p string) *pipe.Event {
	t.Helper()
	ev, err := pipe.NewEvent(&source.Message{MessageID: id, Body: `{}`})
	if err != nil {
		t.Fatal(err)
	}
	ev.RecordJSON = []byte(p)
	return ev
}

func TestBatchesAreCutWithinFiveHundredRecordsAndFourMiB(t *testing.T) {
	tests := []struct {
		name  string
		n     int
		size  int
		calls []int
	}{
		{"one small batch is one call", 3, 10, []int{3}},
		{"a thousand and one records take three calls", 1001, 10, []int{500, 500, 1}},
		{"records of 900 KiB take four a call (4 MiB)", 9, 900 << 10, []int{4, 4, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, cfg := start(t, "orders")
			var ops []string
			var mu sync.Mutex
			cfg.OnCall = func(op string) { mu.Lock(); ops = append(ops, op); mu.Unlock() }
			cfg.MaxParallel = 1
			tg := newTarget(t, cfg)
			var evs []*pipe.Event
			for i := range tt.n {
				p := fmt.Sprintf("%06d", i) + strings.Repeat("x", tt.size)
				evs = append(evs, payload(t, fmt.Sprint(i), p))
			}
			res, err := tg.Deliver(t.Context(), evs)
			if err != nil || len(res.Failures) > 0 {
				t.Fatalf("Deliver = %d failures, %v", len(res.Failures), err)
			}
			if !slices.Equal(s.Calls(), tt.calls) {
				t.Errorf("records per call = %v, want %v", s.Calls(), tt.calls)
			}
			if len(s.Records()) != tt.n || !strings.HasPrefix(s.Records()[0], "000000") {
				t.Errorf("the stream took %d records, want %d", len(s.Records()), tt.n)
			}
			if len(ops) != len(tt.calls) || ops[0] != "PutRecordBatch" {
				t.Errorf("OnCall = %v, want %d PutRecordBatch", ops, len(tt.calls))
			}
		})
	}
}

func TestRefusedRecordsFailJustTheirItems(t *testing.T) {
	s, cfg := start(t, "orders")
	tg := newTarget(t, cfg)
	evs := []*pipe.Event{
		payload(t, "ok", "fine"),
		payload(t, "slow", "throttle me"),
		payload(t, "inside", "internal error"),
		payload(t, "huge", strings.Repeat("x", firehose.MaxRecordBytes+1)),
	}
	res, err := tg.Deliver(t.Context(), evs)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range res.Failures {
		kind := "retryable"
		switch {
		case core.IsThrottled(f.Err):
			kind = "throttled"
		case core.IsPermanent(f.Err):
			kind = "permanent"
		}
		got[f.ID] = kind
	}
	want := map[string]string{"slow": "throttled", "inside": "retryable", "huge": "permanent"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("failures = %v, want %v", got, want)
	}
	for _, f := range res.Failures {
		var ee *awsbatch.EntryError
		if f.ID == "slow" && (!errors.As(f.Err, &ee) || ee.ErrorCode() != "ServiceUnavailableException") {
			t.Errorf("failure of slow = %v, want its ErrorCode", f.Err)
		}
	}
	if !slices.Equal(s.Records(), []string{"fine"}) {
		t.Errorf("the stream took %q, want [fine]", s.Records())
	}
}

func TestAMissingDeliveryStreamFailsTheBatchPermanently(t *testing.T) {
	_, cfg := start(t, "orders")
	cfg.DeliveryStream = "arn:aws:firehose:us-east-1:123456789012:deliverystream/other"
	tg := newTarget(t, cfg)
	_, err := tg.Deliver(t.Context(), []*pipe.Event{payload(t, "m1", "x")})
	if !core.IsPermanent(err) || !strings.Contains(err.Error(), "ResourceNotFoundException") || !strings.Contains(err.Error(), "on other") {
		t.Errorf("Deliver error = %v, want a permanent ResourceNotFoundException for other", err)
	}
}

func TestNewRefusesABadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  firehose.Config
		want string
	}{
		{"no delivery stream", firehose.Config{}, "delivery stream is required"},
		{"a name with a slash", firehose.Config{DeliveryStream: "a/b"}, "is not a delivery stream name"},
		{"an ARN of another service", firehose.Config{DeliveryStream: "arn:aws:kinesis:us-east-1:123456789012:stream/s"}, "not a Firehose delivery stream ARN"},
		{"a negative timeout", firehose.Config{DeliveryStream: "s", Timeout: -time.Second}, "timeout -1s is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.AWSConfig = &aws.Config{Region: "us-east-1"}
			_, err := firehose.New(t.Context(), tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}
