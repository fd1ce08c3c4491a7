package pipe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// TestTracingOffAllocatesNothing: without a Tracer the hooks of a batch
// (its span, its stages, its end) cost no allocation.
func TestTracingOffAllocatesNothing(t *testing.T) {
	p := &Pipe{opt: Options{Filter: FilterFunc(func(context.Context, *Event) (bool, error) { return true, nil })}}
	batch := []*delivery{{}}
	v := []verdict{{outcome: outSucceeded}}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		c, span := p.startBatchSpan(ctx, batch)
		p.filterStage(c)(nil)
		sc, end := p.stage(c, "target")
		end(nil)
		_ = sc
		endBatchSpan(span, v, nil)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per batch with tracing off, want 0", allocs)
	}
}

// BenchmarkBatchHooksWithoutTracer is the per-batch cost of the tracing
// hooks when tracing is off.
func BenchmarkBatchHooksWithoutTracer(b *testing.B) {
	p := &Pipe{}
	batch := []*delivery{{}}
	v := []verdict{{outcome: outSucceeded}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c, span := p.startBatchSpan(ctx, batch)
		p.filterStage(c)(nil)
		_, end := p.stage(c, "target")
		end(nil)
		_, end = p.stage(c, "settle")
		end(nil)
		endBatchSpan(span, v, nil)
	}
}

// BenchmarkExecutionIDPerBatch is the per-batch cost of the execution id
// at the default level (error): one small context, two random words.
func BenchmarkExecutionIDPerBatch(b *testing.B) {
	e := newExecLog(nil, "error", false)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_ = e.begin(ctx, 10)
	}
}

// awsLikeError answers as the AWS SDK's operation and response errors do.
type awsLikeError struct{}

func (awsLikeError) Error() string {
	return "operation SendMessage: https response error StatusCode: 400, RequestID: r-1"
}
func (awsLikeError) Service() string          { return "SQS" }
func (awsLikeError) ServiceRequestID() string { return "r-1" }
func (awsLikeError) HTTPStatusCode() int      { return 400 }

func TestLogErrorIsPipesErrorObjectInJSONAndItsMessageInText(t *testing.T) {
	tests := []struct {
		name string
		err  error
		json string
		text string
	}{
		{"a plain error", errors.New("connection refused"), `{"message":"connection refused"}`, `pipesError.message="connection refused"`},
		{"an AWS call's error, wrapped", fmt.Errorf("sending: %w", awsLikeError{}),
			`{"httpStatusCode":400,"message":"sending: operation SendMessage: https response error StatusCode: 400, RequestID: r-1","awsService":"SQS","requestId":"r-1"}`,
			`pipesError.httpStatusCode=400 pipesError.message="sending: operation SendMessage: https response error StatusCode: 400, RequestID: r-1" pipesError.awsService=SQS pipesError.requestId=r-1`},
		{"a permanent error keeps what it wraps", Permanent(awsLikeError{}),
			`{"httpStatusCode":400,"message":"operation SendMessage: https response error StatusCode: 400, RequestID: r-1","awsService":"SQS","requestId":"r-1"}`,
			`pipesError.httpStatusCode=400`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var js, txt bytes.Buffer
			slog.New(slog.NewJSONHandler(&js, nil)).Error("m", "error", tt.err, "pipesError", logError{tt.err})
			if want := `"pipesError":` + tt.json + `}`; !strings.Contains(js.String(), want) {
				t.Errorf("JSON line %s does not hold %s", js.String(), want)
			}
			if want := `"error":` + strconvQuote(tt.err.Error()); !strings.Contains(js.String(), want) {
				t.Errorf("JSON line %s does not keep the error string %s", js.String(), want)
			}
			slog.New(slog.NewTextHandler(&txt, nil)).Error("m", "pipesError", logError{tt.err})
			if !strings.Contains(txt.String(), tt.text) {
				t.Errorf("text line %s does not hold %s", txt.String(), tt.text)
			}
		})
	}
}

// strconvQuote is s as a JSON string.
func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
