package pipe

import (
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestCountCallCountsEachPipeAndOperationInItsOwnSeries(t *testing.T) {
	m := NewMetrics(nil)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				m.CountCall("orders", "ReceiveMessage")
				m.CountCall("orders", "DeleteMessageBatch")
				m.CountCall("refunds", "ReceiveMessage")
			}
		})
	}
	wg.Wait()
	m.CountCall("orders", "ReceiveMessage")
	for _, tt := range []struct {
		pipe, op string
		want     float64
	}{{"orders", "ReceiveMessage", 401}, {"orders", "DeleteMessageBatch", 400}, {"refunds", "ReceiveMessage", 400}, {"refunds", "DeleteMessageBatch", 0}} {
		if got := testutil.ToFloat64(m.APICalls.WithLabelValues(tt.pipe, tt.op)); got != tt.want {
			t.Errorf("%s %s counted %v, want %v", tt.pipe, tt.op, got, tt.want)
		}
	}
}

// BenchmarkCountCall is the cost the metrics middleware adds to every AWS
// SDK call.
func BenchmarkCountCall(b *testing.B) {
	m := NewMetrics(nil)
	b.ReportAllocs()
	for b.Loop() {
		m.CountCall("orders", "ReceiveMessage")
	}
}
