package pipe

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/pipesproject/pipes/source"
)

// Keeper holds messages received outside a pipe — the dead-letter queue
// tools' inspect and redrive runs — invisible with a pipe's own settler
// and heartbeat, and gives them back when it is closed. It is safe for
// concurrent use.
type Keeper struct {
	s *settler

	mu   sync.Mutex
	byID map[string]*delivery
	errs []error
}

// NewKeeper makes a keeper of messages received from src with visibility
// vis; log receives the settler's log lines (nil: discard). src must be an
// Extender for the leases to be extended.
func NewKeeper(src source.Source, vis time.Duration, log *slog.Logger) *Keeper {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	k := &Keeper{byID: map[string]*delivery{}}
	k.s = newSettler(settlerConfig{
		src: src, vis: vis, log: log, met: NewMetrics(nil).forPipe("keeper"),
		onErr: func(err error) {
			k.mu.Lock()
			k.errs = append(k.errs, err)
			k.mu.Unlock()
		},
	}, 2)
	return k
}

// Hold keeps m, received at receivedAt, invisible until Close. A message
// held again (received anew after its hold lapsed) is kept by its latest
// receipt handle.
func (k *Keeper) Hold(m *source.Message, receivedAt time.Time) {
	d := k.s.track(m, receivedAt)
	k.mu.Lock()
	old := k.byID[m.MessageID]
	k.byID[m.MessageID] = d
	k.mu.Unlock()
	if old != nil {
		_ = k.s.final(old, verbRetry, 0, nil) // its receipt is stale: forget it
	}
}

// Held is the number of messages held.
func (k *Keeper) Held() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.byID)
}

// Close gives every held message back (visible at once) and returns once
// that is done, or ctx is done, and every error a settling call met
// (extensions that failed included).
func (k *Keeper) Close(ctx context.Context) error {
	hard := time.Now().Add(settleCallTimeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(hard) {
		hard = dl
	}
	k.s.close(hard)
	k.mu.Lock()
	defer k.mu.Unlock()
	clear(k.byID)
	return errors.Join(k.errs...)
}
