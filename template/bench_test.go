package template

import (
	"strings"
	"testing"

	"github.com/pipesproject/pipes/pipe"
)

// benchBody is a body of about 1 KB.
func benchBody() string {
	var b strings.Builder
	b.WriteString(`{"order": {"id": "o-12345", "customer": {"id": "c-987", "name": "Ada \"The\" Lovelace", "email": "ada@example.com"}, "total": 1234.56, "items": [`)
	for i := range 12 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"sku": "SKU-000` + string(rune('a'+i)) + `", "qty": 3, "price": 19.99}`)
	}
	b.WriteString(`]}, "note": "`)
	for b.Len() < 1000 {
		b.WriteString("padding ")
	}
	b.WriteString(`"}`)
	return b.String()
}

func benchEvent(b *testing.B) *pipe.Event {
	ev := sqsEvent(b, benchBody())
	if _, ok := ev.Body(); !ok { // decoded before the loop, as after a filter
		b.Fatal("body is not JSON")
	}
	return ev
}

func BenchmarkRenderJSONFivePlaceholders(b *testing.B) {
	tp := MustParse(`{"orderId": <$.body.order.id>, "customer": "<$.body.order.customer.name>", "total": <$.body.order.total>, "firstSku": <$.body.order.items[0].sku>, "sender": <$.attributes.SenderId>}`)
	ev, vars := benchEvent(b), testVars()
	b.ReportAllocs()
	b.SetBytes(int64(len(ev.Message.Body)))
	for b.Loop() {
		if _, err := tp.Render(ev, vars); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderJSONWrappedBody(b *testing.B) {
	tp := MustParse(`{"data": <$.body>, "pipe": <aws.pipes.pipe-name>, "at": <aws.pipes.event.ingestion-time>}`)
	ev, vars := benchEvent(b), testVars()
	b.ReportAllocs()
	b.SetBytes(int64(len(ev.Message.Body)))
	for b.Loop() {
		if _, err := tp.Render(ev, vars); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderJSONWildcard(b *testing.B) {
	tp := MustParse(`{"skus": <$.body.order.items[*].sku>}`)
	ev, vars := benchEvent(b), testVars()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tp.Render(ev, vars); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	src := `{"orderId": <$.body.order.id>, "customer": "<$.body.order.customer.name>", "total": <$.body.order.total>, "firstSku": <$.body.order.items[0].sku>, "sender": <$.attributes.SenderId>}`
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(src); err != nil {
			b.Fatal(err)
		}
	}
}
