// Package fakeaws holds in-process servers for the AWS APIs pipes' tests
// call that no independent server exists for on the package registries
// (Step Functions and CloudWatch Logs: npm has no emulator of either wire
// protocol). Each decodes the real wire format the SDK sends (awsJson1_0
// for Step Functions, awsJson1_1 for CloudWatch Logs), checks the request's
// fields and limits against the API reference, and answers as the service
// does, errors included. They are for tests only.
package fakeaws

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// rpc is one decoded awsJson request: its operation and body.
type rpc struct {
	op   string
	body []byte
}

// decode reads an awsJson request: POST /, the Content-Type of the
// protocol version, X-Amz-Target "<prefix>.<Operation>", a SigV4
// Authorization for service. It writes the error answer itself and
// returns false when the request is not one.
func decode(w http.ResponseWriter, r *http.Request, contentType, prefix, service string) (rpc, bool) {
	if r.Method != http.MethodPost || r.URL.Path != "/" {
		writeError(w, http.StatusNotFound, "UnknownOperationException", "not an awsJson request: "+r.Method+" "+r.URL.Path)
		return rpc{}, false
	}
	if ct := r.Header.Get("Content-Type"); ct != contentType {
		writeError(w, http.StatusBadRequest, "SerializationException", fmt.Sprintf("Content-Type %q, want %q", ct, contentType))
		return rpc{}, false
	}
	if auth := r.Header.Get("Authorization"); !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") || !strings.Contains(auth, "/"+service+"/aws4_request") {
		writeError(w, http.StatusForbidden, "MissingAuthenticationTokenException", "no SigV4 signature for "+service)
		return rpc{}, false
	}
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), prefix+".")
	if !ok {
		writeError(w, http.StatusBadRequest, "UnknownOperationException", "X-Amz-Target "+r.Header.Get("X-Amz-Target"))
		return rpc{}, false
	}
	body, err := io.ReadAll(r.Body)
	if err != nil || !json.Valid(body) {
		writeError(w, http.StatusBadRequest, "SerializationException", "the body is not JSON")
		return rpc{}, false
	}
	return rpc{op: op, body: body}, true
}

// writeError writes an awsJson error answer.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-Errortype", code)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": msg})
}

// writeJSON writes an awsJson answer.
func writeJSON(w http.ResponseWriter, contentType string, v any) {
	w.Header().Set("Content-Type", contentType)
	_ = json.NewEncoder(w).Encode(v)
}
