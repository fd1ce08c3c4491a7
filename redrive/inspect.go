package redrive

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pipesproject/pipes/source"
)

// DefaultInspectVisibility is how long Inspect hides what it has seen
// while it reads on; everything is made visible again when it returns.
const DefaultInspectVisibility = 30 * time.Second

// InspectOptions says what Inspect reads.
type InspectOptions struct {
	// Max is the most messages returned (at least 1).
	Max int
	// ARN is the queue's ARN, put in each record's eventSourceARN (its
	// region becomes awsRegion).
	ARN string
	// Visibility hides the messages seen while Inspect reads on, so that
	// each is returned once; 0 means DefaultInspectVisibility. If the
	// process dies, they reappear after it.
	Visibility time.Duration
}

// Inspect returns up to opt.Max messages of the queue as Pipes SQS
// records without consuming them: SQS has no peek, so it receives them
// (which raises their ApproximateReceiveCount), keeps them hidden while it
// reads on, and makes them all visible again (visibility 0) before it
// returns, on every path. It stops at opt.Max messages or at a receive that
// comes back empty after a 1 s wait. It blocks; it is not meant for
// concurrent use on one queue.
func Inspect(ctx context.Context, api API, queueURL string, opt InspectOptions) (msgs []*source.Message, err error) {
	if opt.Max < 1 {
		return nil, fmt.Errorf("inspecting %s: the most messages to read must be at least 1, got %d", queueURL, opt.Max)
	}
	vis := opt.Visibility
	if vis <= 0 {
		vis = DefaultInspectVisibility
	}
	vis = max(vis, 2*emptyWait) // some servers want it at least the long-poll wait
	region := ""
	if a, err := ParseQueueARN(opt.ARN); err == nil {
		region = a.Region
	}
	h := newKeeper(api, queueURL, vis, nil)
	defer func() {
		rctx, cancel := releaseCtx(ctx)
		defer cancel()
		if rerr := h.Close(rctx); rerr != nil {
			err = errors.Join(err, fmt.Errorf("making the inspected messages visible again: %w", rerr))
		}
	}()
	seen := map[string]bool{}
	for len(msgs) < opt.Max {
		got, err := receive(ctx, api, queueURL, opt.Max-len(msgs), vis)
		now := time.Now()
		for _, m := range got {
			rec := Record(m, opt.ARN, region)
			hold(h, rec.MessageID, rec.ReceiptHandle, now)
			if !seen[rec.MessageID] && len(msgs) < opt.Max {
				seen[rec.MessageID] = true
				msgs = append(msgs, rec)
			}
		}
		if err != nil {
			return msgs, err
		}
		if len(got) == 0 {
			break
		}
	}
	return msgs, nil
}
