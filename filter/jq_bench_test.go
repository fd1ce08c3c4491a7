package filter

import (
	"context"
	"testing"

	"github.com/pipesproject/pipes/pipe"
)

// benchProgram tests the same five fields as benchPattern, in jq and expr.
const (
	benchJQ = `.body.type == "order.created" and (.body.customer.tier | startswith("gold")) and ` +
		`.body.total > 100 and .body.total <= 10000 and (.body.currency == "EUR" or .body.currency == "USD") and ` +
		`any(.body.items[]; .sku | test("^SKU-.*-X$"))`
	benchExpr = `body.type == "order.created" && body.customer.tier startsWith "gold" && ` +
		`body.total > 100 && body.total <= 10000 && body.currency in ["EUR", "USD"] && ` +
		`any(body.items, {.sku matches "^SKU-.*-X$"})`
)

// benchFilter is a compiled jq or expr filter.
type benchFilter interface {
	Match(ctx context.Context, ev *pipe.Event) (bool, error)
}

// benchMatcher times one filter on the 1 KB order, body decoding included
// (a fresh event per match, as in the runtime).
func benchMatcher(b *testing.B, f benchFilter) {
	m := testMessage(benchBody())
	ctx := context.Background()
	if ok, err := f.Match(ctx, &pipe.Event{Message: m}); !ok || err != nil {
		b.Fatalf("the benchmark filter does not match the benchmark body: %v", err)
	}
	b.SetBytes(int64(len(m.Body)))
	b.ReportAllocs()
	for b.Loop() {
		if ok, _ := f.Match(ctx, &pipe.Event{Message: m}); !ok {
			b.Fatal("no match")
		}
	}
}

// BenchmarkJQFilterWithBodyDecode is a five-field jq filter per record.
func BenchmarkJQFilterWithBodyDecode(b *testing.B) {
	j, err := CompileJQ(benchJQ)
	if err != nil {
		b.Fatal(err)
	}
	benchMatcher(b, j)
}

// BenchmarkExprFilterWithBodyDecode is a five-field expr filter per record.
func BenchmarkExprFilterWithBodyDecode(b *testing.B) {
	x, err := CompileExpr(benchExpr)
	if err != nil {
		b.Fatal(err)
	}
	benchMatcher(b, x)
}
