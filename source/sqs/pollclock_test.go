package sqs

import (
	"testing"
	"time"
)

func TestPollLeftIsTheWaitTimeLeftOfTheLatestPoll(t *testing.T) {
	t0 := time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC)
	var c pollClock
	if got := c.left(20*time.Second, t0); got != 0 {
		t.Errorf("no poll under way: %v left, want 0", got)
	}
	c.begin(t0)
	if got := c.left(20*time.Second, t0.Add(6*time.Second)); got != 14*time.Second {
		t.Errorf("6 s into a 20 s poll: %v left, want 14s", got)
	}
	c.begin(t0.Add(10 * time.Second)) // a second poll, begun later
	c.end()                           // one of the two ends
	if got := c.left(20*time.Second, t0.Add(12*time.Second)); got != 18*time.Second {
		t.Errorf("12 s in, the latest begun at 10 s: %v left, want 18s (at most)", got)
	}
	if got := c.left(20*time.Second, t0.Add(time.Minute)); got != 0 {
		t.Errorf("past the wait: %v left, want 0", got)
	}
	c.end()
	if got := c.left(20*time.Second, t0.Add(12*time.Second)); got != 0 {
		t.Errorf("every poll ended: %v left, want 0", got)
	}
}
