package s3payload

import "testing"

// The parsers run on every message a pipe with unwrap s3pointer, s3event
// or auto receives: most bodies are no pointer and no notification.
func BenchmarkParsePointer(b *testing.B) {
	cases := []struct{ name, body string }{
		{"an ordinary JSON body", `{"order":{"id":"o-1","total":12.5,"items":[{"sku":"a","qty":1}]}}`},
		{"a pointer", Pointer{Bucket: "payloads", Key: "0b9d6d1e-9f5a-4d0e-8b1c-2f0c4c2f8a11"}.Body()},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ParsePointer(c.body)
			}
		})
	}
}

func BenchmarkParseEvent(b *testing.B) {
	cases := []struct{ name, body string }{
		{"an ordinary JSON body", `{"order":{"id":"o-1","total":12.5,"items":[{"sku":"a","qty":1}]}}`},
		{"a notification of one object", notification("uploads/2026/12/01/a.csv")},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ParseEvent(c.body)
			}
		})
	}
}
