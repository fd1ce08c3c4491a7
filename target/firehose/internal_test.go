package firehose

import (
	"fmt"
	"testing"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

// BenchmarkEntryBuilding builds the records of a batch of 500 events, as
// Deliver does before its calls.
func BenchmarkEntryBuilding(b *testing.B) {
	evs := make([]*pipe.Event, MaxBatch)
	for i := range evs {
		ev, err := pipe.NewEvent(&source.Message{MessageID: fmt.Sprint(i), Body: fmt.Sprintf(`{"customer":"c%d","order":{"id":%d,"lines":[1,2,3]}}`, i%50, i)})
		if err != nil {
			b.Fatal(err)
		}
		evs[i] = ev
	}
	b.ReportAllocs()
	for b.Loop() {
		for i, ev := range evs {
			if _, err := entry(i, ev); err != nil {
				b.Fatal(err)
			}
		}
	}
}
