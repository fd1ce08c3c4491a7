package partial_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/pipesproject/pipes/internal/kit/partial"
)

// partialBatchIDs is the batch the ParseBatchResponse tests answer for.
var partialBatchIDs = []string{"id-1", "id-2", "id-3"}

func inPartialBatch(id string) bool { return slices.Contains(partialBatchIDs, id) }

// TestParseBatchResponse has one row per row of SPEC.md §3.2 (named after
// it), then the cases the table does not list.
func TestParseBatchResponse(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		want      []string // failed ids, in answer order
		malformed bool
	}{
		// SPEC.md §3.2, row by row.
		{name: "an empty batchItemFailures list is complete success", body: `{"batchItemFailures":[]}`},
		{name: "a null batchItemFailures is complete success", body: `{"batchItemFailures":null}`},
		{name: "an empty EventResponse (empty response) is complete success", body: ``},
		{name: "a null EventResponse is complete success", body: `null`},
		{name: "an invalid JSON response is complete failure", body: `{"batchItemFailures":[{"itemIdentifier":"id-1"}`, malformed: true},
		{name: "an itemIdentifier of empty string is complete failure", body: `{"batchItemFailures":[{"itemIdentifier":""}]}`, malformed: true},
		{name: "an itemIdentifier of null is complete failure", body: `{"batchItemFailures":[{"itemIdentifier":null}]}`, malformed: true},
		{name: "an itemIdentifier key misspelt (bad key name) is complete failure", body: `{"batchItemFailures":[{"itemIdentifer":"id-1"}]}`, malformed: true},
		{name: "an itemIdentifier of an unknown message ID is complete failure", body: `{"batchItemFailures":[{"itemIdentifier":"id-9"}]}`, malformed: true},

		// Partial failures.
		{name: "listed identifiers fail those items only, in answer order", body: `{"batchItemFailures":[{"itemIdentifier":"id-3"},{"itemIdentifier":"id-1"}]}`, want: []string{"id-3", "id-1"}},
		{name: "every identifier listed fails every item", body: `{"batchItemFailures":[{"itemIdentifier":"id-1"},{"itemIdentifier":"id-2"},{"itemIdentifier":"id-3"}]}`, want: partialBatchIDs},
		{name: "a duplicate identifier is reported once", body: `{"batchItemFailures":[{"itemIdentifier":"id-2"},{"itemIdentifier":"id-2"}]}`, want: []string{"id-2"}},
		{name: "a duplicate that is unknown still fails the whole batch", body: `{"batchItemFailures":[{"itemIdentifier":"id-2"},{"itemIdentifier":"id-2"},{"itemIdentifier":"x"}]}`, malformed: true},
		{name: "other keys in an item are ignored", body: `{"batchItemFailures":[{"itemIdentifier":"id-1","reason":"boom"}]}`, want: []string{"id-1"}},
		{name: "other keys next to batchItemFailures are ignored", body: `{"status":"partial","batchItemFailures":[{"itemIdentifier":"id-1"}]}`, want: []string{"id-1"}},
		{name: "an identifier is matched exactly, not trimmed", body: `{"batchItemFailures":[{"itemIdentifier":" id-1"}]}`, malformed: true},
		{name: "an identifier with different case is unknown", body: `{"batchItemFailures":[{"itemIdentifier":"ID-1"}]}`, malformed: true},
		{name: "a batchItemFailures key in another case is still read (encoding/json matches keys case-insensitively)", body: `{"BatchItemFailures":[{"itemIdentifier":"id-1"}]}`, want: []string{"id-1"}},
		{name: "an itemIdentifier key with different case is misspelt", body: `{"batchItemFailures":[{"ItemIdentifier":"id-1"}]}`, malformed: true},

		// Whitespace.
		{name: "a body of JSON whitespace only is an empty response", body: " \r\n\t "},
		{name: "whitespace around the answer is ignored", body: "\n  {\"batchItemFailures\" : [ { \"itemIdentifier\" : \"id-2\" } ] }\r\n", want: []string{"id-2"}},
		{name: "whitespace around an empty list is ignored", body: " { \"batchItemFailures\" : [ ] } "},

		// Answers that are not a partial batch answer.
		{name: "an object without batchItemFailures is complete success", body: `{"ok":true}`},
		{name: "an empty object is complete success", body: `{}`},
		{name: "an array echoed back is complete success", body: `[{"itemIdentifier":"id-9"}]`},
		{name: "a JSON string is complete success", body: `"done"`},
		{name: "a JSON number is complete success", body: `200`},
		{name: "JSON true is complete success", body: `true`},
		{name: "a body that is text, not JSON, is complete failure", body: `OK`, malformed: true},
		{name: "two JSON values in a row are complete failure", body: `{} {}`, malformed: true},
		{name: "a truncated object is complete failure", body: `{"batchItemFailures":`, malformed: true},

		// batchItemFailures of the wrong shape.
		{name: "batchItemFailures that is an object is complete failure", body: `{"batchItemFailures":{"itemIdentifier":"id-1"}}`, malformed: true},
		{name: "batchItemFailures that is a string is complete failure", body: `{"batchItemFailures":"id-1"}`, malformed: true},
		{name: "an item that is a string is complete failure", body: `{"batchItemFailures":["id-1"]}`, malformed: true},
		{name: "an item that is null is complete failure", body: `{"batchItemFailures":[null]}`, malformed: true},
		{name: "an item that is an empty object is complete failure", body: `{"batchItemFailures":[{}]}`, malformed: true},
		{name: "an itemIdentifier that is a number is complete failure", body: `{"batchItemFailures":[{"itemIdentifier":1}]}`, malformed: true},
		{name: "an itemIdentifier that is an object is complete failure", body: `{"batchItemFailures":[{"itemIdentifier":{"id":"id-1"}}]}`, malformed: true},
		{name: "a valid item before a bad one still fails the whole batch", body: `{"batchItemFailures":[{"itemIdentifier":"id-1"},{"itemIdentifier":""}]}`, malformed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := partial.ParseBatchResponse([]byte(tt.body), inPartialBatch)
			if tt.malformed {
				if !errors.Is(err, partial.ErrMalformedAnswer) {
					t.Fatalf("error = %v, want one wrapping ErrMalformedAnswer", err)
				}
				if len(r.Failures) > 0 {
					t.Errorf("a malformed answer also returned failures %v", r.Failures)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseBatchResponse: %v", err)
			}
			var got []string
			for _, f := range r.Failures {
				got = append(got, f.ID)
				if f.Err == nil {
					t.Errorf("failure %s has no reason", f.ID)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("failed ids = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestParseBatchResponseTrimsOnlyJSONWhiteSpace: JSON allows only " \t\r\n"
// around a value; a body of other white space is not an empty answer (an
// implicit ack) but a malformed one.
func TestParseBatchResponseTrimsOnlyJSONWhiteSpace(t *testing.T) {
	tests := []struct {
		name string
		body string
	}{
		{name: "a body of one no-break space is invalid JSON, not an empty response", body: "\u00a0"},
		{name: "a body of one form feed is invalid JSON, not an empty response", body: "\f"},
		{name: "a body of one vertical tab is invalid JSON, not an empty response", body: "\v"},
		{name: "a body of one next-line character is invalid JSON, not an empty response", body: "\u0085"},
		{name: "an answer framed by form feeds is invalid JSON", body: "\f{\"batchItemFailures\":[{\"itemIdentifier\":\"id-1\"}]}\f"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := partial.ParseBatchResponse([]byte(tt.body), inPartialBatch)
			if !errors.Is(err, partial.ErrMalformedAnswer) {
				t.Errorf("ParseBatchResponse(%q) = %v, %v; want an error wrapping ErrMalformedAnswer", tt.body, r, err)
			}
		})
	}
}

func FuzzParseBatchResponse(f *testing.F) {
	for _, seed := range []string{
		``,
		`null`,
		`{"batchItemFailures":[]}`,
		`{"batchItemFailures":null}`,
		`{"batchItemFailures":[{"itemIdentifier":"id-1"},{"itemIdentifier":"id-1"}]}`,
		`{"batchItemFailures":[{"itemIdentifier":""}]}`,
		`{"batchItemFailures":[{"itemIdentifier":null}]}`,
		`{"batchItemFailures":[{"itemIdentifer":"id-2"}]}`,
		`{"batchItemFailures":[{"itemIdentifier":"id-9"}]}`,
		`{"batchItemFailures":[null,1,"x"]}`,
		`[{"itemIdentifier":"id-3"}]`,
		` {"batchItemFailures":[{"itemIdentifier":"id-3"}]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := partial.ParseBatchResponse(body, inPartialBatch)
		if err != nil {
			if !errors.Is(err, partial.ErrMalformedAnswer) {
				t.Fatalf("error %v does not wrap ErrMalformedAnswer", err)
			}
			if len(r.Failures) > 0 {
				t.Fatalf("an error came with failures %v", r.Failures)
			}
			return
		}
		seen := map[string]bool{}
		for _, fl := range r.Failures {
			if !inPartialBatch(fl.ID) {
				t.Fatalf("failure id %q is not in the batch", fl.ID)
			}
			if seen[fl.ID] {
				t.Fatalf("failure id %q is reported twice", fl.ID)
			}
			seen[fl.ID] = true
			if fl.Err == nil {
				t.Fatalf("failure %q has no reason", fl.ID)
			}
		}
	})
}

func BenchmarkParseBatchResponse(b *testing.B) {
	ids := make([]string, 10)
	for i := range ids {
		ids[i] = "059f36b4-87a3-44ab-83d2-66198260747" + string(rune('0'+i))
	}
	inBatch := func(id string) bool { return slices.Contains(ids, id) }
	for _, bc := range []struct{ name, body string }{
		{"an empty answer", ``},
		{"an empty list", `{"batchItemFailures":[]}`},
		{"two failures of ten", `{"batchItemFailures":[{"itemIdentifier":"` + ids[3] + `"},{"itemIdentifier":"` + ids[7] + `"}]}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			body := []byte(bc.body)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := partial.ParseBatchResponse(body, inBatch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
