package memory

import (
	"encoding/base64"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzParseLine checks that any line either fails or parses to a message
// that, written back as a line, parses to the same message.
func FuzzParseLine(f *testing.F) {
	for _, seed := range []string{
		`{"body":"a"}`,
		`{"body":{"n":1,"s":[true,null]}}`,
		`{"body":"x","group_id":"g","deduplication_id":"d"}`,
		`{"body":"x","message_attributes":{"a":{"data_type":"String","string_value":"v"},"b":{"data_type":"Binary","binary_value":"AQI="}}}`,
		`{"body":1e400}`,
		`{"body":"a"} x`,
		`{"bdy":"a"}`,
		`[]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		in, err := parseLine(line)
		if err != nil {
			return
		}
		if checkInput(in.GroupID != "", in) != nil {
			return
		}
		back := preloadLine{GroupID: in.GroupID, DeduplicationID: in.DeduplicationID}
		back.Body, _ = json.Marshal(in.Body)
		if len(in.MessageAttributes) > 0 {
			back.MessageAttributes = map[string]preloadAttribute{}
			for k, a := range in.MessageAttributes {
				pa := preloadAttribute{DataType: a.DataType, StringValue: a.StringValue}
				if a.BinaryValue != nil {
					s := base64.StdEncoding.EncodeToString(a.BinaryValue)
					pa.BinaryValue = &s
				}
				back.MessageAttributes[k] = pa
			}
		}
		encoded, err := json.Marshal(back)
		if err != nil {
			t.Fatalf("encoding %+v: %v", back, err)
		}
		again, err := parseLine(encoded)
		if err != nil {
			t.Fatalf("%s parsed to %+v, which written back as %s fails: %v", line, in, encoded, err)
		}
		if again.Body != in.Body || again.GroupID != in.GroupID || again.DeduplicationID != in.DeduplicationID ||
			!reflect.DeepEqual(again.MessageAttributes, in.MessageAttributes) {
			t.Fatalf("%s parsed to %+v, then to %+v", line, in, again)
		}
	})
}
