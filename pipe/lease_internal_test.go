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
