package sqs

import (
	"sync/atomic"
	"time"
)

// pollClock keeps the long polls of a Source under way, for PollLeft.
// Safe for concurrent use.
type pollClock struct {
	under atomic.Int64 // polls under way
	last  atomic.Int64 // when the latest began, Unix nanoseconds
}

func (c *pollClock) begin(now time.Time) {
	c.last.Store(now.UnixNano())
	c.under.Add(1)
}

func (c *pollClock) end() { c.under.Add(-1) }

// PollLeft is the longest the long polls under way may still take: the
// wait time left of the latest one begun (they all wait as long), 0 when
// none is under way. A stopping pipe waits for them (an abandoned long
// poll may still take messages on the server) and says how long at most.
// Safe for concurrent use; it does not block.
func (s *Source) PollLeft() time.Duration {
	return s.polls.left(time.Duration(ceilSeconds(s.cfg.WaitTime))*time.Second, time.Now())
}

func (c *pollClock) left(wait time.Duration, now time.Time) time.Duration {
	if c.under.Load() <= 0 {
		return 0
	}
	left := time.Unix(0, c.last.Load()).Add(wait).Sub(now)
	return min(max(left, 0), wait)
}
