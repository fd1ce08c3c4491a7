package lambdatarget

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

func FuzzFunctionError(f *testing.F) {
	for _, s := range []string{
		`{"errorType":"TypeError","errorMessage":"x is undefined"}`,
		`Task timed out after 3.00 seconds`,
		`{"errorMessage":"` + strings.Repeat("é", 700) + `"}`,
		`null`, `[]`, `{"errorType":1}`, "\xff\xfe",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, payload string) {
		e := functionError("Unhandled", []byte(payload))
		if len(e.Message) > maxFunctionError || len(e.Type) > 256 {
			t.Fatalf("message %d bytes, type %d bytes: not truncated", len(e.Message), len(e.Type))
		}
		if utf8.ValidString(payload) && !utf8.ValidString(e.Message) {
			t.Fatalf("truncating valid UTF-8 gave invalid UTF-8: %q", e.Message)
		}
		if e.Error() == "" || e.ErrorCode() == "" {
			t.Fatal("empty error text or code")
		}
	})
}

func FuzzBatchPayload(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `plain`, ``, `"s"`, "\xff", `[1,2]`} {
		f.Add(s, `{"b":2}`)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		evs := []*pipe.Event{
			{Message: &source.Message{MessageID: "1"}, RecordJSON: []byte(a)},
			{Message: &source.Message{MessageID: "2"}, RecordJSON: []byte(b)},
		}
		var arr []json.RawMessage
		if err := json.Unmarshal(batchPayload(evs), &arr); err != nil || len(arr) != 2 {
			t.Fatalf("batch payload of %q, %q is not a JSON array of 2: %v", a, b, err)
		}
	})
}
