package s3payload

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParsePointer(t *testing.T) {
	tests := []struct {
		name string
		body string
		want Pointer
		ok   bool
	}{
		{"the Java client's body", `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b","s3Key":"k/1"}]`, Pointer{"b", "k/1"}, true},
		{"spaces between tokens", `["software.amazon.payloadoffloading.PayloadS3Pointer", {"s3BucketName": "b", "s3Key": "k"}]`, Pointer{"b", "k"}, true},
		{"fields in another order", `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3Key":"k","s3BucketName":"b"}]`, Pointer{"b", "k"}, true},
		{"another class", `["com.amazon.sqs.javamessaging.MessageS3Pointer",{"s3BucketName":"b","s3Key":"k"}]`, Pointer{}, false},
		{"no key", `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b"}]`, Pointer{}, false},
		{"an empty bucket", `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"","s3Key":"k"}]`, Pointer{}, false},
		{"a third element", `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b","s3Key":"k"},1]`, Pointer{}, false},
		{"an object body", `{"s3BucketName":"b","s3Key":"k"}`, Pointer{}, false},
		{"plain text", `hello`, Pointer{}, false},
		{"broken JSON", `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b","s3Key":"k"}`, Pointer{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParsePointer(tt.body)
			if ok != tt.ok || got != tt.want {
				t.Fatalf("ParsePointer = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestPointerBodyIsTheJavaClientsAndParsesBack(t *testing.T) {
	p := Pointer{Bucket: "payloads", Key: `pipes/0a1b "quoted" é`}
	want := `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"payloads","s3Key":"pipes/0a1b \"quoted\" é"}]`
	if got := p.Body(); got != want {
		t.Fatalf("Body() = %s\nwant      %s", got, want)
	}
	back, ok := ParsePointer(p.Body())
	if !ok || back != p {
		t.Fatalf("ParsePointer(Body()) = %+v, %v", back, ok)
	}
}

// notification is an S3 event notification as S3 sends it to SQS (the
// shape of the S3 user guide's "Event message structure", version 2.1).
func notification(keys ...string) string {
	var recs []string
	for _, k := range keys {
		recs = append(recs, `{"eventVersion":"2.1","eventSource":"aws:s3","awsRegion":"us-east-1","eventTime":"2026-12-01T10:00:00.000Z","eventName":"ObjectCreated:Put","userIdentity":{"principalId":"A1"},"requestParameters":{"sourceIPAddress":"10.0.0.1"},"responseElements":{"x-amz-request-id":"R","x-amz-id-2":"H"},"s3":{"s3SchemaVersion":"1.0","configurationId":"c","bucket":{"name":"uploads","ownerIdentity":{"principalId":"A1"},"arn":"arn:aws:s3:::uploads"},"object":{"key":"`+k+`","size":1024,"eTag":"e","sequencer":"0A"}}}`)
	}
	return `{"Records":[` + strings.Join(recs, ",") + `]}`
}

func TestParseEvent(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		kind    EventKind
		entries int
	}{
		{"one object", notification("a.csv"), Records, 1},
		{"three objects", notification("a", "b", "c"), Records, 3},
		{"the test event", `{"Service":"Amazon S3","Event":"s3:TestEvent","Time":"2026-12-01T10:00:00.000Z","Bucket":"uploads","RequestId":"R","HostId":"H"}`, TestEvent, 0},
		{"no records", `{"Records":[]}`, NotAnEvent, 0},
		{"an SNS record", `{"Records":[{"EventSource":"aws:sns","Sns":{"Message":"x"}}]}`, NotAnEvent, 0},
		{"another event source with an s3 field", `{"Records":[{"eventSource":"aws:other","s3":{"bucket":{"name":"b"},"object":{"key":"k"}}}]}`, NotAnEvent, 0},
		{"an entry without a key", `{"Records":[{"eventSource":"aws:s3","s3":{"bucket":{"name":"b"},"object":{}}}]}`, NotAnEvent, 0},
		{"one good entry and one bad", `{"Records":[{"s3":{"bucket":{"name":"b"},"object":{"key":"k"}}},{"x":1}]}`, NotAnEvent, 0},
		{"an ordinary JSON body", `{"order":1}`, NotAnEvent, 0},
		{"another service's test event", `{"Service":"Other","Event":"s3:TestEvent"}`, NotAnEvent, 0},
		{"not JSON", `Records`, NotAnEvent, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := ParseEvent(tt.body)
			if ev.Kind != tt.kind || len(ev.Entries) != tt.entries {
				t.Fatalf("ParseEvent = kind %d with %d entries; want kind %d with %d", ev.Kind, len(ev.Entries), tt.kind, tt.entries)
			}
			for _, e := range ev.Entries {
				if !json.Valid(e) {
					t.Fatalf("entry %s is not valid JSON", e)
				}
			}
		})
	}
}

func FuzzParsePointer(f *testing.F) {
	f.Add(Pointer{"b", "k"}.Body())
	f.Add(`["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"","s3Key":"k"}]`)
	f.Add(`[1,2]`)
	f.Add(`"x"`)
	f.Fuzz(func(t *testing.T, body string) {
		p, ok := ParsePointer(body)
		if !ok {
			return
		}
		if p.Bucket == "" || p.Key == "" {
			t.Fatalf("a pointer with an empty bucket or key: %+v", p)
		}
		// What parses must write back to a body that parses to the same.
		back, ok := ParsePointer(p.Body())
		if !ok || back != p {
			t.Fatalf("round trip of %+v gave %+v, %v", p, back, ok)
		}
	})
}

func FuzzParseEvent(f *testing.F) {
	f.Add(notification("a", "b"))
	f.Add(`{"Service":"Amazon S3","Event":"s3:TestEvent"}`)
	f.Add(`{"Records":[{"s3":{"bucket":{"name":"b"},"object":{"key":"k"}}}]}`)
	f.Add(`{"Records":null}`)
	f.Fuzz(func(t *testing.T, body string) {
		ev := ParseEvent(body)
		switch ev.Kind {
		case NotAnEvent, TestEvent:
			if len(ev.Entries) != 0 {
				t.Fatalf("kind %d with %d entries", ev.Kind, len(ev.Entries))
			}
		case Records:
			if len(ev.Entries) == 0 {
				t.Fatal("an event with no entries")
			}
			for _, e := range ev.Entries {
				if !json.Valid(e) {
					t.Fatalf("entry %q is not valid JSON", e)
				}
			}
		default:
			t.Fatalf("unknown kind %d", ev.Kind)
		}
	})
}
