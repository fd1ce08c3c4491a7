package filter

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

var decodeSeeds = []string{
	`{"a":1,"b":[true,false,null,"x"],"c":{"d":-1.5e-3}}`,
	`  [ 1 , 2 ]  `,
	`"esc \" \\ \/ \b \f \n \r \t \u00e9 \ud83d\ude00 \ud800 \udc00x"`,
	"\"invalid \xff utf8\"",
	`{"dup":1,"dup":2}`,
	`01`, `1.`, `-`, `1e`, `.5`, `+1`, `1e400`, `-0`, `0.0e+0`,
	`{"a":1,}`, `[1,]`, `{"a"}`, `{1:2}`, `tru`, `nulll`, `"\u12"`, `"\x"`,
	"\"tab\there\"", ``, ` `, `{} {}`, `[[[[]]]]`,
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
}

// sameAsEncodingJSON checks DecodeBody against encoding/json.Unmarshal.
func sameAsEncodingJSON(t *testing.T, body string) {
	t.Helper()
	var want any
	wantOK := json.Unmarshal([]byte(body), &want) == nil
	got, gotOK := DecodeBody(body)
	if gotOK != wantOK {
		t.Fatalf("DecodeBody(%q) valid=%v; encoding/json says %v", body, gotOK, wantOK)
	}
	if !wantOK {
		if got != body {
			t.Fatalf("DecodeBody(%q) on invalid JSON returned %#v, want the body", body, got)
		}
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeBody(%q) = %#v; encoding/json gives %#v", body, got, want)
	}
	// The number-text decode, converted back, is the same value too.
	text, ok := decodeJSON(body, true)
	if !ok {
		t.Fatalf("decodeJSON(%q, useNumber) rejected valid JSON", body)
	}
	if plain, ok := withFloats(text); !ok || !reflect.DeepEqual(plain, want) {
		t.Fatalf("withFloats(decodeJSON(%q, useNumber)) = %#v, %v; encoding/json gives %#v", body, plain, ok, want)
	}
}

func TestDecodeBodyAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range append(decodeSeeds, benchBody()) {
		name := s
		if len(name) > 40 {
			name = name[:40]
		}
		t.Run(name, func(t *testing.T) { sameAsEncodingJSON(t, s) })
	}
}

// FuzzDecodeBody: DecodeBody accepts, rejects and yields exactly what
// encoding/json does.
func FuzzDecodeBody(f *testing.F) {
	for _, s := range decodeSeeds[:len(decodeSeeds)-2] {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) { sameAsEncodingJSON(t, body) })
}
