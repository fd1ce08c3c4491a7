package memory

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/pipesproject/pipes/source"
)

// maxPreloadErrors is how many line errors a preload reports at once.
const maxPreloadErrors = 10

// preloadLine is one line of a preload file.
type preloadLine struct {
	Body              json.RawMessage             `json:"body"`
	MessageAttributes map[string]preloadAttribute `json:"message_attributes"`
	GroupID           string                      `json:"group_id"`
	DeduplicationID   string                      `json:"deduplication_id"`
}

// preloadAttribute is a message attribute in a preload file.
type preloadAttribute struct {
	DataType    string  `json:"data_type"`
	StringValue *string `json:"string_value"`
	BinaryValue *string `json:"binary_value"` // base64
}

// Preload sends the messages of a JSON Lines file (see PreloadReader) and
// returns how many it stored.
func (q *Queue) Preload(ctx context.Context, path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("preloading memory queue %s: %w", q.name, err)
	}
	defer f.Close()
	return q.PreloadReader(ctx, path, f)
}

// PreloadReader sends the messages read from r, a JSON Lines stream named
// name in errors. Each line is an object
//
//	{"body": "text" or any JSON value (sent compactly encoded),
//	 "message_attributes": {"name": {"data_type": "String", "string_value": "x"}},
//	 "group_id": "g", "deduplication_id": "d"}
//
// where all keys but body are optional and others are errors; binary
// attributes give "binary_value" in base64. Blank lines and lines starting
// with '#' are skipped. It returns how many messages it stored (FIFO
// duplicates are not). Nothing is sent unless every line is valid: the
// error then names each bad line (name:line: problem), up to 10 of them.
func (q *Queue) PreloadReader(ctx context.Context, name string, r io.Reader) (int, error) {
	var (
		inputs []SendInput
		errs   []error
	)
	fifo := q.isFIFO()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 2*MaxBodySize)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		in, err := parseLine(line)
		if err == nil {
			err = checkInput(fifo, in)
		}
		if err != nil {
			if len(errs) < maxPreloadErrors {
				errs = append(errs, fmt.Errorf("%s:%d: %w", name, n, err))
			}
			continue
		}
		inputs = append(inputs, in)
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("%s: reading: %w", name, err))
	}
	if len(errs) > 0 {
		return 0, fmt.Errorf("preloading memory queue %s: %w", q.name, errors.Join(errs...))
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("preloading memory queue %s: %w", q.name, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, in := range inputs {
		if _, stored := q.sendLocked(in); stored {
			n++
		}
	}
	return n, nil
}

// parseLine decodes one preload line into a message to send.
func parseLine(line []byte) (SendInput, error) {
	var pl preloadLine
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pl); err != nil {
		return SendInput{}, lineError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return SendInput{}, errors.New("more than one JSON value on the line")
	}
	if len(pl.Body) == 0 || string(pl.Body) == "null" {
		return SendInput{}, errors.New("the line has no body")
	}
	in := SendInput{GroupID: pl.GroupID, DeduplicationID: pl.DeduplicationID}
	if pl.Body[0] == '"' {
		if err := json.Unmarshal(pl.Body, &in.Body); err != nil {
			return SendInput{}, fmt.Errorf("body: %w", lineError(err))
		}
	} else {
		var b bytes.Buffer
		if err := json.Compact(&b, pl.Body); err != nil {
			return SendInput{}, fmt.Errorf("body: %w", lineError(err))
		}
		in.Body = b.String()
	}
	if len(pl.MessageAttributes) > 0 {
		in.MessageAttributes = make(map[string]source.MessageAttribute, len(pl.MessageAttributes))
		for k, a := range pl.MessageAttributes {
			ma := source.MessageAttribute{DataType: a.DataType, StringValue: a.StringValue}
			if a.BinaryValue != nil {
				b, err := base64.StdEncoding.DecodeString(*a.BinaryValue)
				if err != nil {
					return SendInput{}, fmt.Errorf("message attribute %q: binary_value is not base64: %w", k, err)
				}
				ma.BinaryValue = b
			}
			in.MessageAttributes[k] = ma
		}
	}
	return in, nil
}

// lineError rewords encoding/json's errors for a preload line.
func lineError(err error) error {
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) {
		field := ute.Field
		if field == "" {
			field = "the line"
		}
		return fmt.Errorf("%s must be a JSON %s, not %s", field, expected(ute.Type.String()), ute.Value)
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if strings.HasPrefix(msg, "unknown field ") {
		return fmt.Errorf("unknown key %s (known: body, message_attributes, group_id, deduplication_id; in attributes: data_type, string_value, binary_value)", strings.TrimPrefix(msg, "unknown field "))
	}
	return fmt.Errorf("invalid JSON: %s", msg)
}

func expected(goType string) string {
	switch {
	case goType == "string" || goType == "*string":
		return "string"
	case strings.HasPrefix(goType, "map["), strings.HasPrefix(goType, "memory."):
		return "object"
	}
	return goType
}
