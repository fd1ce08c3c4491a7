package pipe

import (
	"math"
	"time"
)

// Scaling reasons, as they appear in logs.
const (
	reasonBacklog   = "messages keep coming"
	reasonIdle      = "receives came back empty"
	reasonErrors    = "target failed"
	reasonThrottled = "target throttled"
)

// controller decides how many batches a pipe may have in flight, the way
// Lambda's SQS pollers and Pipes do (SPEC.md Part A item 2): start at
// initial, add up to perMinute while receives come back full, halve
// towards the base on empty receives, halve on throttling and shrink by a
// quarter on target errors, never below floor nor above max.
//
// It is not safe for concurrent use; the pipe calls it under its lock. Time
// is passed in, so tests drive it with a fake clock.
type controller struct {
	cur, max, base, floor int
	perMinute             float64

	credit   float64
	last     time.Time
	coolTill time.Time

	full, empty, failed, throttled bool
}

func newController(initial, limit, perMinute int, now time.Time) *controller {
	limit = max(limit, 1)
	initial = min(max(initial, 1), limit)
	floor := min(2, limit)
	return &controller{
		cur: initial, max: limit, base: max(min(initial, 5), floor), floor: floor,
		perMinute: float64(perMinute), last: now,
	}
}

// received notes a receive's outcome: full when it returned as many messages
// as asked, empty when it returned none.
func (c *controller) received(n, asked int) {
	switch {
	case n == 0:
		c.empty = true
	case n >= asked:
		c.full = true
	}
}

// batchDone notes a batch's outcome at the target.
func (c *controller) batchDone(failed, throttled bool) {
	c.failed = c.failed || failed
	c.throttled = c.throttled || throttled
}

// tick applies what was seen since the last tick and returns the new
// concurrency and, when it changed, why.
func (c *controller) tick(now time.Time) (int, string) {
	dt := now.Sub(c.last)
	if dt < 0 {
		dt = 0
	}
	c.last = now
	before := c.cur
	reason := ""
	switch {
	case c.throttled:
		c.cur = max(c.floor, c.cur/2)
		c.credit = 0
		c.coolTill = now.Add(5 * time.Second)
		reason = reasonThrottled
	case c.failed:
		c.cur = max(c.floor, c.cur*3/4)
		c.credit = 0
		c.coolTill = now.Add(5 * time.Second)
		reason = reasonErrors
	case c.full && !c.empty && !now.Before(c.coolTill):
		c.credit += c.perMinute * dt.Minutes()
		if add := math.Floor(c.credit); add >= 1 {
			c.credit -= add
			c.cur = min(c.max, c.cur+int(add))
		}
		if c.cur == c.max {
			c.credit = 0
		}
		reason = reasonBacklog
	case c.empty && !c.full && c.cur > c.base:
		// An idle pipe has one poller, so an empty receive comes once per
		// wait time (20 s): halve, so 1000 falls back to 5 in minutes.
		c.cur = max(c.base, c.cur/2)
		c.credit = 0
		reason = reasonIdle
	}
	c.full, c.empty, c.failed, c.throttled = false, false, false, false
	if c.cur == before {
		return c.cur, ""
	}
	return c.cur, reason
}
