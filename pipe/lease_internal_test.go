package pipe

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestTheTailsSampleHasNoLease(t *testing.T) {
	const h = "AQEB-receipt-handle-0123456789"
	long := strings.Repeat("x", 2000)
	cases := []struct {
		name, payload, want string
	}{
		{"an SQS record loses its receiptHandle member",
			`{"messageId":"m-1","receiptHandle":"` + h + `","body":"{}"}`, `{"messageId":"m-1","body":"{}"}`},
		{"the first member goes with the comma after it",
			`{"receiptHandle":"` + h + `", "body":"{}"}`, `{ "body":"{}"}`},
		{"the only member leaves an empty object",
			`{ "receiptHandle" : "` + h + `" }`, `{  }`},
		{"a payload without the handle is left as it is",
			`{"messageId":"m-1","body":"{}"}`, `{"messageId":"m-1","body":"{}"}`},
		{"a handle copied elsewhere by a template is masked",
			`{"order":1,"lease":"` + h + `"}`, `{"order":1,"lease":"xxxxx"}`},
		{"a nested receiptHandle is masked, the member kept",
			`{"record":{"receiptHandle":"` + h + `"}}`, `{"record":{"receiptHandle":"xxxxx"}}`},
		{"text that is not JSON has the handle masked",
			`lease ` + h + ` here`, `lease xxxxx here`},
		{"a record longer than the sample still loses the member",
			`{"messageId":"m-1","receiptHandle":"` + h + `","body":"` + long + `"}`, `{"messageId":"m-1","body":"` + long + `"}`},
		{"a member beyond the sample is not looked for, only masked",
			`{"body":"` + long + `","receiptHandle":"` + h + `"}`, `{"body":"` + long + `","receiptHandle":"xxxxx"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.payload)
			got := string(withoutLease(in, h))
			if got != tc.want {
				t.Fatalf("got  %.200s\nwant %.200s", got, tc.want)
			}
			if string(in) != tc.payload {
				t.Fatal("the payload was changed in place")
			}
			if json.Valid([]byte(tc.payload)) && !json.Valid([]byte(got)) {
				t.Fatalf("valid JSON became invalid: %s", got)
			}
		})
	}
	if got := string(withoutLease([]byte(`{"a":""}`), "")); got != `{"a":""}` {
		t.Fatalf("no handle: %s", got)
	}
}

// FuzzWithoutLease compares withoutLease with encoding/json: for a JSON
// object whose one receiptHandle member holds the handle (and nothing
// else does), the result is valid JSON and decodes to the same members
// less that one. On any input it never panics, and a handle found in the
// payload is gone from the result.
func FuzzWithoutLease(f *testing.F) {
	f.Add([]byte(`{"messageId":"m-1","receiptHandle":"AQEB-h","body":"{}"}`), "AQEB-h")
	f.Add([]byte(`{"receiptHandle":"AQEB-h", "body":"{}"}`), "AQEB-h")
	f.Add([]byte(` { "a" : [1, {"receiptHandle": 2}], "receiptHandle" : "hh" } `), "hh")
	f.Add([]byte(`{"body":"copied AQEB-h"}`), "AQEB-h")
	f.Add([]byte(`not json AQEB-h`), "AQEB-h")
	f.Fuzz(func(t *testing.T, payload []byte, handle string) {
		got := withoutLease(payload, handle)
		if len(handle) >= len(leaseMasked) && !strings.Contains(leaseMasked, handle) && strings.Contains(string(got), handle) {
			t.Fatalf("withoutLease(%q, %q) = %q still holds the handle", payload, handle, got)
		}
		var members map[string]json.RawMessage
		if handle == "" || len(payload) > 512 || json.Unmarshal(payload, &members) != nil ||
			strings.Count(string(payload), handle) != 1 || strings.Count(string(payload), `"receiptHandle"`) != 1 ||
			!strings.Contains(string(members["receiptHandle"]), handle) {
			return
		}
		delete(members, "receiptHandle")
		var after map[string]json.RawMessage
		if err := json.Unmarshal(got, &after); err != nil {
			t.Fatalf("withoutLease(%q) = %q, not JSON: %v", payload, got, err)
		}
		if len(after) != len(members) {
			t.Fatalf("withoutLease(%q) = %q: members %v, want %v", payload, got, after, members)
		}
		for k, v := range members {
			if string(after[k]) != string(v) {
				t.Fatalf("withoutLease(%q) = %q: member %s is %s, want %s", payload, got, k, after[k], v)
			}
		}
	})
}
