package sqstest

// No Firehose emulator exists on npm (kinesalite is Kinesis only;
// local-aws-sqs and fauxqs have none), so the Firehose tests run against
// FirehoseServer, an in-process fake: a net/http server that decodes the
// awsJson1_1 requests the SDK sends (X-Amz-Target
// Firehose_20150804.PutRecordBatch, base64 Data) and checks them against
// the PutRecordBatch API reference: at most 500 records and 4 MiB of data
// per call, 1,000 KiB per record, a delivery stream name of 1 to 64
// characters, a SigV4 signature. It answers like Firehose: FailedPutCount
// and RequestResponses by position, ErrorCode ServiceUnavailableException
// for a record whose data holds "throttle", InternalFailure for one that
// holds "internal", ResourceNotFoundException for another stream.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// FirehoseServer is the in-process Firehose of the tests: it holds one
// delivery stream's records. It is safe for concurrent use.
type FirehoseServer struct {
	// URL is the server's endpoint.
	URL    string
	stream string
	mu     sync.Mutex
	calls  []int    // records per call
	data   []string // the records taken, in order
	errs   []string // what the server found wrong with a request
}

// StartFirehose starts a FirehoseServer for the delivery stream named
// stream; it stops when the test ends, and the test fails if a request
// broke PutRecordBatch's rules.
func StartFirehose(t testing.TB, stream string) *FirehoseServer {
	t.Helper()
	s := &FirehoseServer{stream: stream}
	hs := httptest.NewServer(s)
	s.URL = hs.URL
	t.Cleanup(hs.Close)
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, e := range s.errs {
			t.Errorf("the request broke PutRecordBatch's rules: %s", e)
		}
	})
	return s
}

// Calls are the number of records of each call the stream took, in order.
func (s *FirehoseServer) Calls() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// Records are the data of the records the stream took, in order.
func (s *FirehoseServer) Records() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.data)
}

// record is a record of PutRecordBatch's request; encoding/json decodes
// its base64 Data into bytes.
type record struct {
	Data []byte `json:"Data"`
}

// ServeHTTP answers one PutRecordBatch request as Firehose does, and
// notes what in it breaks the API reference's rules.
func (s *FirehoseServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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

// wrong notes a broken rule, for the test to report.
func (s *FirehoseServer) wrong(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs = append(s.errs, fmt.Sprintf(format, args...))
}
