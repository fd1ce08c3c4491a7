package pipe

import (
	"fmt"
	"testing"

	"github.com/pipesproject/pipes/source"
)

// TestAJudgementFindsItemsByIDTheSameWithAScanAndAMap checks that small
// batches (a scan of the batch) and large ones (a map) decide the same
// items for an id: only registered ones, every one of a repeated id, and
// never one decided already.
func TestAJudgementFindsItemsByIDTheSameWithAScanAndAMap(t *testing.T) {
	for _, n := range []int{3, scanIDs, scanIDs + 1, 100} {
		t.Run(fmt.Sprintf("a batch of %d", n), func(t *testing.T) {
			batch := make([]*delivery, n)
			for i := range batch {
				batch[i] = &delivery{Message: &source.Message{MessageID: fmt.Sprintf("m%d", i%(n-1))}} // the last repeats m0
			}
			j := judgement{v: make([]verdict, n)}
			j.init(batch)
			for i := 1; i < n; i++ { // item 0 (m0) is not registered
				j.register(batch[i].Message.MessageID, i)
			}
			if got := j.first("m0"); got != n-1 {
				t.Errorf("first(m0) = %d, want %d (the unregistered item 0 is skipped)", got, n-1)
			}
			if got := j.first("nope"); got != -1 {
				t.Errorf("first(nope) = %d, want -1", got)
			}
			j.v[1] = verdict{outcome: outFiltered}
			j.fail("m1", "target", nil, outFailedRetry)
			j.fail("m0", "target", nil, outFailedRetry)
			if j.v[1].outcome != outFiltered {
				t.Errorf("item 1 was decided again: %v", j.v[1].outcome)
			}
			if j.v[0].outcome != 0 || j.v[n-1].outcome != outFailedRetry {
				t.Errorf("m0: item 0 %v (want undecided), item %d %v (want failed)", j.v[0].outcome, n-1, j.v[n-1].outcome)
			}
			if j.undecided(&Event{Message: batch[2].Message}) != (n > 3) {
				t.Errorf("undecided(item 2) = %v, want %v", n <= 3, n > 3)
			}
		})
	}
}
