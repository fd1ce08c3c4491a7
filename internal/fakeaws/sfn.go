package fakeaws

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// SFN is an in-process Step Functions server (StartExecution and
// StartSyncExecution). It is safe for concurrent use.
type SFN struct {
	mu         sync.Mutex
	machines   map[string]Machine
	throttle   int // calls still to refuse with ThrottlingException
	limit      int // calls still to refuse with ExecutionLimitExceeded
	executions []Execution
	calls      map[string]int
	n          int
}

// Machine is a state machine of an SFN server.
type Machine struct {
	// Express is true for an EXPRESS workflow (StartSyncExecution works),
	// false for STANDARD.
	Express bool
	// Run is the workflow: it gets the input and returns the output, or an
	// error code and cause for a FAILED execution. nil echoes the input.
	Run func(input []byte) (output []byte, errCode, cause string)
}

// Execution is an execution an SFN server started.
type Execution struct {
	StateMachineARN string
	Input           []byte
	Sync            bool
}

// NewSFN returns a server knowing the state machines, by ARN.
func NewSFN(machines map[string]Machine) *SFN {
	return &SFN{machines: machines, calls: map[string]int{}}
}

// Throttle makes the next n calls fail with ThrottlingException, and the
// m after them with ExecutionLimitExceeded.
func (s *SFN) Throttle(n, m int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.throttle, s.limit = n, m
}

// Executions returns the executions started so far, in order.
func (s *SFN) Executions() []Execution {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Execution(nil), s.executions...)
}

// Calls returns how many requests each operation got.
func (s *SFN) Calls(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

const sfnJSON = "application/x-amz-json-1.0"

// maxSFNInput is the API reference's limit on an execution's input.
const maxSFNInput = 256 * 1024

// ServeHTTP answers one awsJson1_0 request.
func (s *SFN) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, ok := decode(w, r, sfnJSON, "AWSStepFunctions", "states")
	if !ok {
		return
	}
	var in struct {
		StateMachineArn string  `json:"stateMachineArn"`
		Input           *string `json:"input"`
		Name            *string `json:"name"`
	}
	if err := json.Unmarshal(req.body, &in); err != nil {
		writeError(w, http.StatusBadRequest, "SerializationException", err.Error())
		return
	}
	s.mu.Lock()
	s.calls[req.op]++
	throttled, limited := s.throttle > 0, s.throttle == 0 && s.limit > 0
	if throttled {
		s.throttle--
	} else if limited {
		s.limit--
	}
	m, known := s.machines[in.StateMachineArn]
	s.n++
	n := s.n
	s.mu.Unlock()
	switch {
	case req.op != "StartExecution" && req.op != "StartSyncExecution":
		writeError(w, http.StatusBadRequest, "UnknownOperationException", req.op)
		return
	case throttled:
		writeError(w, http.StatusBadRequest, "ThrottlingException", "Rate exceeded")
		return
	case limited:
		writeError(w, http.StatusBadRequest, "ExecutionLimitExceeded", "Maximum number of running executions reached")
		return
	case in.StateMachineArn == "":
		writeError(w, http.StatusBadRequest, "ValidationException", "1 validation error detected: Value null at 'stateMachineArn' failed to satisfy constraint: Member must not be null")
		return
	case !known:
		writeError(w, http.StatusBadRequest, "StateMachineDoesNotExist", "State Machine Does Not Exist: '"+in.StateMachineArn+"'")
		return
	case in.Name != nil && (len(*in.Name) == 0 || len(*in.Name) > 80):
		writeError(w, http.StatusBadRequest, "InvalidName", "Invalid Name: '"+*in.Name+"'")
		return
	}
	input := "{}"
	if in.Input != nil {
		input = *in.Input
	}
	if len(input) > maxSFNInput || !utf8.ValidString(input) || !json.Valid([]byte(input)) {
		writeError(w, http.StatusBadRequest, "InvalidExecutionInput", "Invalid State Machine Execution Input: the input is not JSON, or over 262144 bytes")
		return
	}
	sync := req.op == "StartSyncExecution"
	if sync && !m.Express {
		writeError(w, http.StatusBadRequest, "StateMachineTypeNotSupported", "This operation is not supported by this type of state machine")
		return
	}
	s.mu.Lock()
	s.executions = append(s.executions, Execution{StateMachineARN: in.StateMachineArn, Input: []byte(input), Sync: sync})
	s.mu.Unlock()
	execARN := in.StateMachineArn + ":exec-" + strconv.Itoa(n)
	now := float64(time.Now().UnixMilli()) / 1000
	if !sync {
		writeJSON(w, sfnJSON, map[string]any{"executionArn": execARN, "startDate": now})
		return
	}
	out, code, cause := []byte(input), "", ""
	if m.Run != nil {
		out, code, cause = m.Run([]byte(input))
	}
	answer := map[string]any{
		"executionArn": execARN, "stateMachineArn": in.StateMachineArn, "startDate": now, "stopDate": now,
		"input": input, "status": "SUCCEEDED",
	}
	if code != "" || cause != "" {
		answer["status"], answer["error"], answer["cause"] = "FAILED", code, cause
	} else {
		answer["output"] = string(out)
	}
	writeJSON(w, sfnJSON, answer)
}
