package pipe

import (
	"time"

	"golang.org/x/time/rate"
)

// limiter gates the receives by Options.RateLimit: a token bucket of
// messages (x/time/rate) with a burst of one second's worth, at least a
// full receive (maxReceive). A receive takes the tokens of all it asks
// for and gives back those of what it did not get, so that messages
// beyond the rate stay in the queue and burn no receive count.
//
// Giving back is rate.Limiter.AllowN with a negative n, which credits the
// tokens (capped at the burst when next read): the behaviour
// golang/go#54082 asks to document; TestLimiter pins it, so that an
// upgrade that changes it fails there.
//
// Safe for concurrent use (rate.Limiter has its own lock). A nil
// *limiter is no limit.
type limiter struct {
	lim    *rate.Limiter
	perSec float64
}

// newLimiter is the limiter of perSec messages a second; nil (no limit)
// when perSec is 0 or less.
func newLimiter(perSec float64) *limiter {
	if perSec <= 0 {
		return nil
	}
	burst := max(int(perSec), maxReceive)
	return &limiter{lim: rate.NewLimiter(rate.Limit(perSec), burst), perSec: perSec}
}

// take takes up to n whole tokens at now when at least need of them are
// there. It returns how many it took, or 0 and how long until need are
// there.
func (l *limiter) take(now time.Time, n, need int) (took int, wait time.Duration) {
	if l == nil {
		return n, 0
	}
	avail := l.lim.TokensAt(now)
	took = min(n, int(avail))
	if took < need {
		return 0, time.Duration((float64(need) - avail) / l.perSec * float64(time.Second))
	}
	l.lim.AllowN(now, took)
	return took, 0
}

// need is how many tokens a receive of n waits for: a full call's worth,
// up to one second of tokens. Receives are paced rather than shrunk: a
// receive of one message costs as much as one of ten.
func (l *limiter) need(n int) int {
	if l == nil {
		return n
	}
	return min(n, max(1, int(l.perSec)))
}

// giveBack returns n tokens taken for messages that were not received.
func (l *limiter) giveBack(now time.Time, n int) {
	if l == nil || n <= 0 {
		return
	}
	l.lim.AllowN(now, -n)
}
