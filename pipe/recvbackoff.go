package pipe

import (
	"time"

	"github.com/pipesproject/pipes/internal/backoff"
)

// recvRetry is the pause of the receives by the failed rounds in a row.
var recvRetry = backoff.Exponential{Base: 200 * time.Millisecond, Max: 20 * time.Second, Jitter: backoff.Equal}

// recvFailing is how many failed rounds in a row make the pipe not ready.
const recvFailing = 3

// recvBackoff is the pause of the receives after the source fails, and
// the source's last error while it keeps failing (or while it cannot be
// opened). It has no lock: the pipe's guards it.
type recvBackoff struct {
	until  time.Time // no receive starts before
	at     time.Time // when the last counted failure came back
	rounds int       // receive rounds that failed in a row
	err    error
}

// failed notes a receive that started at start and failed with err at
// now, and returns how long the receives pause from now. Receives under
// way together fail together (a lost connection): one that started before
// the last counted failure came back is of the same round, and does not
// grow the pause again — else five pollers turn a short outage into a 20 s
// stall.
func (b *recvBackoff) failed(start, now time.Time, err error) time.Duration {
	b.err = err
	if !start.Before(b.at) {
		b.rounds++
		b.at = now
		b.until = start.Add(recvRetry.Delay(b.rounds))
	}
	return max(b.until.Sub(now), 0)
}

// succeeded notes a receive that worked: the source is well again.
func (b *recvBackoff) succeeded() { b.rounds, b.err = 0, nil }

// wait is how long from now before a receive may start (0 or less: now).
func (b *recvBackoff) wait(now time.Time) time.Duration { return b.until.Sub(now) }

// failing reports whether the source keeps failing (the pipe is not
// ready).
func (b *recvBackoff) failing() bool { return b.rounds >= recvFailing }
