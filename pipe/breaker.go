package pipe

import "time"

// Circuit breaker: after breakerTrips batches in a row fail whole with
// retryable errors (connection refused, timeouts, 5xx, 429), polling
// stops and one probe batch at a time goes to the target, at growing
// intervals; only a probe that the target answers closes it again.
// Outage batches are never a verdict, open or not (outage.go).
const (
	breakerTrips    = 3
	breakerProbeMin = time.Second
	breakerProbeMax = time.Minute
)

// breaker is the pipe's circuit breaker on target outages. It has no
// lock: the pipe's guards it, since whether a probe may start also
// depends on what the batcher and the held batches have.
type breaker struct {
	streak  int // batches in a row that failed whole with retryable errors
	open    bool
	probing bool // a probe batch is at the target
	// freshProbe: a held batch was the last probe and failed; the next is
	// a fresh batch when the source has one, so that a held batch that
	// fails on its own (a poison batch) does not keep the circuit open
	// and polling paused while the target works for other messages.
	freshProbe bool
	every      time.Duration
	probeAt    time.Time
	err        error
	// answeredStart is when the latest-started batch the target answered
	// started: a batch that failed whole before it is in a target that
	// works (bisect).
	answeredStart time.Time
}

// breakerChange is what a batch's outcome did to the circuit.
type breakerChange uint8

const (
	circuitKept        breakerChange = iota // nothing to say
	circuitOpened                           // the target keeps failing
	circuitClosed                           // a probe the target answered
	circuitProbeFailed                      // open, the next probe later
)

// record notes what a batch that started at start told of the target at
// now (probe: it was the probe), and returns what that did to the
// circuit. It opens after breakerTrips outage batches in a row (not while
// stopping), and closes only on a probe the target answered: a batch that
// started before it opened and succeeds after says nothing of the target
// now. err is the batch's error, the circuit's reason while open.
func (c *breaker) record(state targetState, probe bool, start, now time.Time, stopping bool, err error) breakerChange {
	if probe {
		c.probing = false
	}
	switch state {
	case targetUnknown:
		return circuitKept // no call: nothing learnt (a probe goes again now)
	case targetAnswered:
		c.streak = 0
		if start.After(c.answeredStart) {
			c.answeredStart = start
		}
		if c.open && probe {
			c.open, c.err = false, nil
			return circuitClosed
		}
		return circuitKept
	}
	c.streak++
	switch {
	case stopping:
		return circuitKept
	case !c.open && c.streak >= breakerTrips:
		c.open, c.every, c.err = true, breakerProbeMin, err
		c.probeAt = now.Add(c.every)
		return circuitOpened
	case c.open && probe:
		c.every = min(c.every*2, breakerProbeMax)
		c.probeAt = now.Add(c.every)
		c.err = err
		return circuitProbeFailed
	}
	return circuitKept
}

// probeWait is how long from now until the next probe is due, while the
// circuit is open and no probe is at the target; 0 otherwise, or when it
// is due.
func (c *breaker) probeWait(now time.Time) time.Duration {
	if !c.open || c.probing {
		return 0
	}
	return max(c.probeAt.Sub(now), 0)
}

// probeDue reports whether a probe may start now: the circuit is open,
// no probe is at the target and its time has come.
func (c *breaker) probeDue(now time.Time) bool {
	return c.open && !c.probing && !now.Before(c.probeAt)
}

// deferFor is how long an outage's messages are given back for: about
// when the next probe goes while the circuit is open, else d.
func (c *breaker) deferFor(now time.Time, d time.Duration) time.Duration {
	if c.open {
		return max(c.probeAt.Sub(now), breakerProbeMin)
	}
	return d
}
