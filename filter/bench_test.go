package filter

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

// benchPattern has five fields on the body: exact, prefix, numeric, a list
// of values, and a wildcard inside an array of objects.
const benchPattern = `{"body":{
	"type":["order.created"],
	"customer":{"tier":[{"prefix":"gold"}]},
	"total":[{"numeric":[">",100,"<=",10000]}],
	"currency":["EUR","USD"],
	"items":{"sku":[{"wildcard":"SKU-*-X"}]}
}}`

// benchBody returns a JSON order of 1024 bytes that matches benchPattern.
func benchBody() string {
	var items []string
	for i := 0; i < 6; i++ {
		items = append(items, fmt.Sprintf(`{"sku":"SKU-%04d-%s","name":"item number %d","qty":%d,"price":%d.5}`, i, map[bool]string{true: "X", false: "Y"}[i == 5], i, i+1, 10*i))
	}
	body := fmt.Sprintf(`{"type":"order.created","id":"ord-7f3a9c2e-1b4d-4e8a-9c6f-2d5e8b1a3f70","createdAt":"2026-11-30T00:00:00Z",`+
		`"customer":{"id":"cus-123456","name":"Alice Example","email":"alice@example.com","tier":"gold-plus","address":{"street":"1 Main Street","city":"Seattle","zip":"98101","country":"US"}},`+
		`"total":1234.5,"currency":"EUR","tags":["priority","gift","express"],"notes":"%s",`+
		`"items":[%s]}`, strings.Repeat("n", 254), strings.Join(items, ","))
	return body
}

func benchSetup(b *testing.B) (*Patterns, *source.Message) {
	ps, err := CompilePatterns([]string{benchPattern})
	if err != nil {
		b.Fatal(err)
	}
	m := testMessage(benchBody())
	if ok, _ := ps.Match(context.Background(), &pipe.Event{Message: m}); !ok {
		b.Fatal("the benchmark pattern does not match the benchmark body")
	}
	return ps, m
}

// BenchmarkMatchDecodedBody is the match alone: the body is already decoded.
func BenchmarkMatchDecodedBody(b *testing.B) {
	ps, m := benchSetup(b)
	b.SetBytes(int64(len(m.Body)))
	ev := &pipe.Event{Message: m}
	ev.Body()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if ok, _ := ps.Match(ctx, ev); !ok {
			b.Fatal("no match")
		}
	}
}

// BenchmarkMatchWithBodyDecode is what one record costs: decoding its body
// (pipe.Event.Body, shared with later stages) and matching.
func BenchmarkMatchWithBodyDecode(b *testing.B) {
	ps, m := benchSetup(b)
	b.SetBytes(int64(len(m.Body)))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if ok, _ := ps.Match(ctx, &pipe.Event{Message: m}); !ok {
			b.Fatal("no match")
		}
	}
}

// BenchmarkMatchDecodeOnly is the yardstick: decoding the body with
// encoding/json and nothing else.
func BenchmarkMatchDecodeOnly(b *testing.B) {
	_, m := benchSetup(b)
	b.SetBytes(int64(len(m.Body)))
	raw := []byte(m.Body)
	b.ReportAllocs()
	for b.Loop() {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMatchExactNumberText is a pattern with an exact number under
// body, which decodes the body keeping number text (and hands the event
// the float64 form).
func BenchmarkMatchExactNumberText(b *testing.B) {
	ps, err := CompilePatterns([]string{`{"body":{"type":["order.created"],"total":[1234.5]}}`})
	if err != nil {
		b.Fatal(err)
	}
	m := testMessage(benchBody())
	b.SetBytes(int64(len(m.Body)))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if ok, _ := ps.Match(ctx, &pipe.Event{Message: m}); !ok {
			b.Fatal("no match")
		}
	}
}

// BenchmarkMatchMetadataOnly matches attributes only: the body is never
// decoded.
func BenchmarkMatchMetadataOnly(b *testing.B) {
	ps, err := CompilePatterns([]string{`{"attributes":{"ApproximateReceiveCount":["1"],"SenderId":[{"prefix":"AIDA"}]},"messageId":[{"exists":true}]}`})
	if err != nil {
		b.Fatal(err)
	}
	m := testMessage(benchBody())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if ok, _ := ps.Match(ctx, &pipe.Event{Message: m}); !ok {
			b.Fatal("no match")
		}
	}
}

// BenchmarkMatchDecodeBodyOnly is DecodeBody alone, to compare with
// encoding/json (BenchmarkMatchDecodeOnly).
func BenchmarkMatchDecodeBodyOnly(b *testing.B) {
	_, m := benchSetup(b)
	b.SetBytes(int64(len(m.Body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := DecodeBody(m.Body); !ok {
			b.Fatal("invalid")
		}
	}
}

// BenchmarkMatchNewFilter is one record through the filter New builds: it
// decodes the body with DecodeBody, shares it, and matches.
func BenchmarkMatchNewFilter(b *testing.B) {
	f, err := New(Spec{Patterns: []string{benchPattern}})
	if err != nil {
		b.Fatal(err)
	}
	m := testMessage(benchBody())
	b.SetBytes(int64(len(m.Body)))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if ok, _ := f.Match(ctx, &pipe.Event{Message: m}); !ok {
			b.Fatal("no match")
		}
	}
}
