package redrive_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/pipesproject/pipes/internal/sqstest"
	"github.com/pipesproject/pipes/redrive"
)

// TestRedriveByIDs redrives a selection of a dead-letter queue, as the
// status page's DLQ browser does: it lists the queue with Inspect, then
// moves the ids picked. It runs on local-aws-sqs (.ci/sqs) and relies on
// its message ids staying the same from one receive to the next, on a
// receive made after the visibility is set to 0 returning the message
// again, and on the approximate counts (visible, in flight) being exact
// on an idle queue once its visibility changes took effect: local-aws-sqs
// applies a release (visibility 0) on a timer after it answered, so the
// count waits for the in-flight number to reach 0 (sqstest.CountReleased,
// a few seconds, far below the 60 s Run hides messages for), and it counts
// in-flight messages as visible too, so "visible" is every message left.
func TestRedriveByIDs(t *testing.T) {
	c := sqstest.Client(t)
	ctx := context.Background()
	cases := []struct {
		name   string
		total  int
		picked []int // indexes into the listing
		gone   int   // ids of no message in the queue
	}{
		{"one message of many moves; the others stay, visible", 12, []int{5}, 0},
		{"three messages move from a queue of 25, more than one receive", 25, []int{0, 11, 24}, 0},
		{"an id no longer in the queue is left aside", 4, []int{1}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src, dlq := sqstest.CreateQueue(t, c, sqstest.QueueOptions{MaxReceiveCount: 3})
			putDLQ(t, c, dlq, numbered(tc.total, func(i int) string { return fmt.Sprintf(`{"n":%d}`, i) }, func(int) map[string]string { return contextAttrs(nil) })...)
			listed, err := redrive.Inspect(ctx, c, dlq, redrive.InspectOptions{Max: tc.total})
			if err != nil || len(listed) != tc.total {
				t.Fatalf("listing: %d of %d (%v)", len(listed), tc.total, err)
			}
			var ids, want []string
			for _, i := range tc.picked {
				ids = append(ids, listed[i].MessageID)
				want = append(want, listed[i].Body)
			}
			for i := range tc.gone {
				ids = append(ids, fmt.Sprintf("no-such-message-%d", i))
			}
			var moved []string
			sum, err := redrive.Run(ctx, c, redrive.Options{From: dlq, To: src, IDs: ids, Report: func(e redrive.Entry) {
				if e.Outcome == redrive.Moved {
					moved = append(moved, e.MessageID)
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Moved != len(tc.picked) || sum.Failed != 0 {
				t.Fatalf("summary %+v, want %d moved", sum, len(tc.picked))
			}
			if !slices.Equal(sorted(moved), sorted(ids[:len(tc.picked)])) {
				t.Errorf("moved %v, want %v", moved, ids)
			}
			if v, f := sqstest.CountReleased(t, c, dlq, 5*time.Second); v != tc.total-len(tc.picked) || f != 0 {
				t.Errorf("the dead-letter queue has %d visible and %d in flight, want %d visible (the rest released)", v, f, tc.total-len(tc.picked))
			}
			got := drain(t, c, src)
			if !slices.Equal(sorted(bodies(got)), sorted(want)) {
				t.Errorf("the source queue holds %v, want %v", bodies(got), want)
			}
			for _, m := range got {
				if _, ok := m.MessageAttributes["ErrorCode"]; ok {
					t.Errorf("message %s kept its failure context", aws.ToString(m.Body))
				}
			}
		})
	}
}
