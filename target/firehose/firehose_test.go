package firehose_test

// No Firehose emulator exists on npm (kinesalite is Kinesis only;
// local-aws-sqs and fauxqs have none), so these tests run against an
// in-process fake: a net/http server that decodes the awsJson1_1 requests
// the SDK sends (X-Amz-Target Firehose_20150804.PutRecordBatch, base64
// Data) and checks them against the PutRecordBatch API reference: at most
// 500 records and 4 MiB of data per call, 1,000 KiB per record, a
// delivery stream name of 1 to 64 characters, a SigV4 signature. It
// answers like Firehose: FailedPutCount and RequestResponses by position,
// ErrorCode ServiceUnavailableException for a throttled record.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/pipesproject/pipes/internal/kit/awsbatch"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/target/firehose"
)

// server is the in-process Firehose of these tests: it holds one delivery
// stream's records.
type server struct {
	stream string
	mu     sync.Mutex
	calls  []int    // records per call
	data   []string // the records taken, in order
	errs   []string // what the server found wrong with a request
}

// record is a record of PutRecordBatch's request; encoding/json decodes
// its base64 Data into bytes.
type record struct {
	Data []byte `json:"Data"`
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, typ, msg string) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": msg})
	}
	if r.Method != http.MethodPost || r.Header.Get("X-Amz-Target") != "Firehose_20150804.PutRecordBatch" ||
		r.Header.Get("Content-Type") != "application/x-amz-json-1.1" || !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
		s.wrong("not a signed awsJson1_1 PutRecordBatch: %s %s", r.Method, r.Header.Get("X-Amz-Target"))
		fail(400, "UnknownOperationException", "not PutRecordBatch")
		return
	}
	var in struct {
		DeliveryStreamName string
		Records            []record
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		s.wrong("decoding the request: %v", err)
		fail(400, "SerializationException", err.Error())
		return
	}
	total := 0
	for _, rec := range in.Records {
		total += len(rec.Data)
		if len(rec.Data) > 1000<<10 {
			s.wrong("a record of %d bytes, over 1,000 KiB", len(rec.Data))
		}
	}
	switch {
	case len(in.DeliveryStreamName) < 1 || len(in.DeliveryStreamName) > 64:
		s.wrong("delivery stream name %q", in.DeliveryStreamName)
	case len(in.Records) < 1 || len(in.Records) > 500:
		s.wrong("%d records in one call", len(in.Records))
	case total > 4<<20:
		s.wrong("%d bytes in one call, over 4 MiB", total)
	}
	if in.DeliveryStreamName != s.stream {
		fail(400, "ResourceNotFoundException", "Firehose "+in.DeliveryStreamName+" under account 123456789012 not found.")
		return
	}
	type response struct {
		RecordId     string `json:",omitempty"`
		ErrorCode    string `json:",omitempty"`
		ErrorMessage string `json:",omitempty"`
	}
	out := struct {
		FailedPutCount   int
		Encrypted        bool
		RequestResponses []response
	}{}
	s.mu.Lock()
	s.calls = append(s.calls, len(in.Records))
	for i, rec := range in.Records {
		switch d := string(rec.Data); {
		case strings.Contains(d, "throttle"):
			out.FailedPutCount++
			out.RequestResponses = append(out.RequestResponses, response{ErrorCode: "ServiceUnavailableException", ErrorMessage: "Slow down."})
		case strings.Contains(d, "internal"):
			out.FailedPutCount++
			out.RequestResponses = append(out.RequestResponses, response{ErrorCode: "InternalFailure", ErrorMessage: "Internal failure."})
		default:
			s.data = append(s.data, d)
			out.RequestResponses = append(out.RequestResponses, response{RecordId: fmt.Sprintf("rec-%d-%d", len(s.calls), i)})
		}
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(out)
}

func (s *server) wrong(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, fmt.Sprintf(format, args...))
}

// start runs a server for the stream and returns a target config for it.
func start(t *testing.T, stream string) (*server, firehose.Config) {
	t.Helper()
	s := &server{stream: stream}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, e := range s.errs {
			t.Errorf("the request broke PutRecordBatch's rules: %s", e)
		}
	})
	return s, firehose.Config{
		DeliveryStream: stream, Endpoint: hs.URL,
		AWSConfig: &aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDPIPESTEST", "pipes-test-secret", "")},
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
	ev, err := pipe.NewEvent(&pipe.Message{MessageID: id, Body: `{}`})
	if err != nil {
		t.Fatal(err)
	}
	ev.Payload = []byte(p)
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
			if !slices.Equal(s.calls, tt.calls) {
				t.Errorf("records per call = %v, want %v", s.calls, tt.calls)
			}
			if len(s.data) != tt.n || !strings.HasPrefix(s.data[0], "000000") {
				t.Errorf("the stream took %d records, want %d", len(s.data), tt.n)
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
		case pipe.IsThrottled(f.Err):
			kind = "throttled"
		case pipe.IsPermanent(f.Err):
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
	if !slices.Equal(s.data, []string{"fine"}) {
		t.Errorf("the stream took %q, want [fine]", s.data)
	}
}

func TestAMissingDeliveryStreamFailsTheBatchPermanently(t *testing.T) {
	_, cfg := start(t, "orders")
	cfg.DeliveryStream = "arn:aws:firehose:us-east-1:123456789012:deliverystream/other"
	tg := newTarget(t, cfg)
	_, err := tg.Deliver(t.Context(), []*pipe.Event{payload(t, "m1", "x")})
	if !pipe.IsPermanent(err) || !strings.Contains(err.Error(), "ResourceNotFoundException") || !strings.Contains(err.Error(), "on other") {
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
