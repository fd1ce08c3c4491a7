package rabbitmq

import (
	"reflect"
	"testing"
)

func TestTheLedgerAcksTheOldestRunWithOneMultipleAck(t *testing.T) {
	type step struct {
		tags  []uint64
		n     int    // the run one multiple ack settles
		floor uint64 // after the step
		above int
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{name: "batches in order: one multiple ack each", steps: []step{
			{tags: []uint64{1, 2, 3}, n: 3, floor: 3},
			{tags: []uint64{4, 5, 6, 7}, n: 4, floor: 7},
		}},
		{name: "a later batch first goes one by one, then the older one closes the gap", steps: []step{
			{tags: []uint64{4, 5, 6}, n: 0, floor: 0, above: 3},
			{tags: []uint64{1, 2, 3}, n: 3, floor: 6},
			{tags: []uint64{7, 8}, n: 2, floor: 8},
		}},
		{name: "a tag settled another way stops the floor", steps: []step{
			{tags: []uint64{1, 2, 4, 5}, n: 2, floor: 2, above: 2},
			{tags: []uint64{6, 7}, n: 0, floor: 2, above: 4},
		}},
		{name: "a single tag goes alone", steps: []step{
			{tags: []uint64{1}, n: 0, floor: 1},
			{tags: []uint64{2, 9}, n: 0, floor: 2, above: 1},
		}},
		{name: "tags acked before continue the run past the call's", steps: []step{
			{tags: []uint64{3}, n: 0, floor: 0, above: 1},
			{tags: []uint64{1, 2}, n: 2, floor: 3},
		}},
		{name: "acked tags between the call's are absorbed", steps: []step{
			{tags: []uint64{2}, n: 0, floor: 0, above: 1},
			{tags: []uint64{1, 3}, n: 2, floor: 3},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l ackLedger
			for i, s := range tc.steps {
				if n := l.plan(s.tags); n != s.n || l.floor != s.floor || len(l.above) != s.above {
					t.Fatalf("step %d (%v): run %d, floor %d, %d above; want %d, %d, %d", i, s.tags, n, l.floor, len(l.above), s.n, s.floor, s.above)
				}
			}
		})
	}
}

func TestAStuckFloorTurnsTheLedgerOffInsteadOfGrowing(t *testing.T) {
	var l ackLedger
	tags := make([]uint64, 0, maxAbove+1)
	for i := range uint64(maxAbove + 1) {
		tags = append(tags, i+2) // tag 1 is never acked here
	}
	if n := l.plan(tags); n != 0 || !l.off || l.above != nil {
		t.Fatalf("run %d, off %v, %d above: want the ledger off and empty", n, l.off, len(l.above))
	}
	if n := l.plan([]uint64{1, uint64(maxAbove + 3)}); n != 0 || !reflect.DeepEqual(l.above, map[uint64]struct{}(nil)) {
		t.Errorf("an off ledger planned a multiple ack (%d) or remembered tags", n)
	}
}
