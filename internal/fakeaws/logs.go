package fakeaws

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Logs is an in-process CloudWatch Logs server (PutLogEvents and
// CreateLogStream). PutLogEvents checks the API reference's limits: at
// most 10,000 events and 1,048,576 bytes (each message plus 26 bytes),
// events in timestamp order, spanning at most 24 hours, each message 1 to
// 1,048,550 bytes; events older than 14 days (or than Cutoff) and more
// than 2 hours in the future are answered in rejectedLogEventsInfo. It is
// safe for concurrent use.
type Logs struct {
	mu       sync.Mutex
	groups   map[string]map[string][]LogEvent // group → stream → events
	throttle int
	calls    map[string]int
	// now is the server's clock.
	now func() time.Time
	// Cutoff, when not zero, is the retention limit: events before it are
	// answered as expired.
	Cutoff time.Time
}

// LogEvent is an event a Logs server stored.
type LogEvent struct {
	Timestamp int64
	Message   string
}

// NewLogs returns a server holding the log groups named, with no streams.
func NewLogs(groups ...string) *Logs {
	l := &Logs{groups: map[string]map[string][]LogEvent{}, calls: map[string]int{}, now: time.Now}
	for _, g := range groups {
		l.groups[g] = map[string][]LogEvent{}
	}
	return l
}

// Throttle makes the next n calls fail with ThrottlingException.
func (l *Logs) Throttle(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.throttle = n
}

// Events returns the events stored in a stream, in the order written.
func (l *Logs) Events(group, stream string) []LogEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]LogEvent(nil), l.groups[group][stream]...)
}

// Streams returns how many streams a group has.
func (l *Logs) Streams(group string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.groups[group])
}

// Calls returns how many requests an operation got.
func (l *Logs) Calls(op string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls[op]
}

const logsJSON = "application/x-amz-json-1.1"

// ServeHTTP answers one awsJson1_1 request.
func (l *Logs) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, ok := decode(w, r, logsJSON, "Logs_20140328", "logs")
	if !ok {
		return
	}
	var in struct {
		LogGroupName  string `json:"logGroupName"`
		LogStreamName string `json:"logStreamName"`
		LogEvents     []struct {
			Timestamp *int64  `json:"timestamp"`
			Message   *string `json:"message"`
		} `json:"logEvents"`
	}
	if err := json.Unmarshal(req.body, &in); err != nil {
		writeError(w, http.StatusBadRequest, "SerializationException", err.Error())
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls[req.op]++
	if l.throttle > 0 {
		l.throttle--
		writeError(w, http.StatusBadRequest, "ThrottlingException", "Rate exceeded")
		return
	}
	if in.LogGroupName == "" || in.LogStreamName == "" {
		writeError(w, http.StatusBadRequest, "InvalidParameterException", "logGroupName and logStreamName are required")
		return
	}
	streams, ok := l.groups[in.LogGroupName]
	if !ok {
		writeError(w, http.StatusBadRequest, "ResourceNotFoundException", "The specified log group does not exist.")
		return
	}
	switch req.op {
	case "CreateLogStream":
		if _, ok := streams[in.LogStreamName]; ok {
			writeError(w, http.StatusBadRequest, "ResourceAlreadyExistsException", "The specified log stream already exists")
			return
		}
		streams[in.LogStreamName] = nil
		writeJSON(w, logsJSON, struct{}{})
		return
	case "PutLogEvents":
	default:
		writeError(w, http.StatusBadRequest, "UnknownOperationException", req.op)
		return
	}
	stored, ok := streams[in.LogStreamName]
	if !ok {
		writeError(w, http.StatusBadRequest, "ResourceNotFoundException", "The specified log stream does not exist.")
		return
	}
	n, bytes := len(in.LogEvents), 0
	if n < 1 || n > 10000 {
		writeError(w, http.StatusBadRequest, "InvalidParameterException", "logEvents must hold 1 to 10000 events, got "+strconv.Itoa(n))
		return
	}
	var first, prev int64
	for i, e := range in.LogEvents {
		if e.Timestamp == nil || e.Message == nil || len(*e.Message) < 1 || len(*e.Message) > 1048550 {
			writeError(w, http.StatusBadRequest, "InvalidParameterException", "logEvents."+strconv.Itoa(i+1)+": timestamp and a message of 1 to 1048550 bytes are required")
			return
		}
		bytes += len(*e.Message) + 26
		if i == 0 {
			first = *e.Timestamp
		} else if *e.Timestamp < prev {
			writeError(w, http.StatusBadRequest, "InvalidParameterException", "Log events in a single PutLogEvents request must be in chronological order.")
			return
		}
		prev = *e.Timestamp
	}
	if bytes > 1048576 {
		writeError(w, http.StatusBadRequest, "InvalidParameterException", "Upload too large: "+strconv.Itoa(bytes)+" bytes exceeds limit of 1048576")
		return
	}
	if prev-first > (24 * time.Hour).Milliseconds() {
		writeError(w, http.StatusBadRequest, "InvalidParameterException", "The batch of log events in a single PutLogEvents request cannot span more than 24 hours.")
		return
	}
	now := l.now()
	tooOld, tooNew := now.Add(-14*24*time.Hour).UnixMilli(), now.Add(2*time.Hour).UnixMilli()
	var oldEnd, expiredEnd, newStart = -1, -1, -1
	for i, e := range in.LogEvents {
		ts := *e.Timestamp
		switch {
		case ts < tooOld:
			oldEnd = i + 1
		case !l.Cutoff.IsZero() && ts < l.Cutoff.UnixMilli():
			expiredEnd = i + 1
		case ts > tooNew && newStart < 0:
			newStart = i
		}
		if (newStart < 0 || i < newStart) && ts >= tooOld && (l.Cutoff.IsZero() || ts >= l.Cutoff.UnixMilli()) {
			stored = append(stored, LogEvent{Timestamp: ts, Message: *e.Message})
		}
	}
	streams[in.LogStreamName] = stored
	answer := map[string]any{}
	info := map[string]int{}
	if oldEnd >= 0 {
		info["tooOldLogEventEndIndex"] = oldEnd
	}
	if expiredEnd >= 0 {
		info["expiredLogEventEndIndex"] = expiredEnd
	}
	if newStart >= 0 {
		info["tooNewLogEventStartIndex"] = newStart
	}
	if len(info) > 0 {
		answer["rejectedLogEventsInfo"] = info
	}
	writeJSON(w, logsJSON, answer)
}

// SetNow sets the server's clock.
func (l *Logs) SetNow(now func() time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.now = now
}
