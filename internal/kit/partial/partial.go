// Package partial reads a target's or enrichment's answer by the partial
// batch rules of Lambda and Pipes (batchItemFailures).
package partial

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pipesproject/pipes/pipe"
)

// ErrMalformedAnswer is wrapped by every error ParseBatchResponse returns:
// the answer broke the partial batch contract and the whole batch failed.
var ErrMalformedAnswer = errors.New("malformed partial batch answer")

// ParseBatchResponse reads a target's or enrichment's answer by the partial
// batch rules of Lambda and Pipes (SPEC.md §3.2). An empty body, JSON null, an
// object without batchItemFailures, a null or empty list mean full success.
// Invalid JSON, an item that is not an object, an item without
// itemIdentifier (e.g. a misspelt key), an empty or null identifier, or one
// that is not in the batch fail the whole batch: the error wraps
// ErrMalformedAnswer. A body that is valid JSON but not an object (say an
// array echoed back) is not a partial answer and means full success.
//
// inBatch reports whether an id belongs to the batch.
func ParseBatchResponse(body []byte, inBatch func(id string) bool) (pipe.Result, error) {
	body = bytes.Trim(body, " \t\r\n") // JSON's own white space only
	if len(body) == 0 {
		return pipe.Result{}, nil
	}
	if !json.Valid(body) {
		return pipe.Result{}, fmt.Errorf("%w: not valid JSON", ErrMalformedAnswer)
	}
	if body[0] != '{' {
		return pipe.Result{}, nil
	}
	var answer struct {
		BatchItemFailures []json.RawMessage `json:"batchItemFailures"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return pipe.Result{}, fmt.Errorf("%w: batchItemFailures: %v", ErrMalformedAnswer, err)
	}
	var r pipe.Result
	seen := make(map[string]bool, len(answer.BatchItemFailures))
	for i, raw := range answer.BatchItemFailures {
		var item map[string]json.RawMessage
		if err := json.Unmarshal(raw, &item); err != nil || item == nil {
			return pipe.Result{}, fmt.Errorf("%w: batchItemFailures[%d] is not an object", ErrMalformedAnswer, i)
		}
		idRaw, ok := item["itemIdentifier"]
		if !ok {
			return pipe.Result{}, fmt.Errorf("%w: batchItemFailures[%d] has no itemIdentifier", ErrMalformedAnswer, i)
		}
		var id *string
		if err := json.Unmarshal(idRaw, &id); err != nil {
			return pipe.Result{}, fmt.Errorf("%w: batchItemFailures[%d].itemIdentifier is not a string", ErrMalformedAnswer, i)
		}
		if id == nil || *id == "" {
			return pipe.Result{}, fmt.Errorf("%w: batchItemFailures[%d].itemIdentifier is empty or null", ErrMalformedAnswer, i)
		}
		if !inBatch(*id) {
			return pipe.Result{}, fmt.Errorf("%w: batchItemFailures[%d].itemIdentifier %q is not in the batch", ErrMalformedAnswer, i, *id)
		}
		if seen[*id] {
			continue
		}
		seen[*id] = true
		r.Failures = append(r.Failures, pipe.ItemFailure{ID: *id, Err: pipe.ErrReportedFailed})
	}
	return r, nil
}
