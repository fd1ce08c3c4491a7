package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// barWidth is the number of cells of a progress bar.
const barWidth = 30

// dlqProgress draws the progress bar of a dlq redrive on standard error
// when it is a terminal, redrawn in place at most ten times a second, with
// the rate since the first drawing and the time left at that rate; when it
// is not, it draws nothing and the summary line alone is printed.
type dlqProgress struct {
	w     io.Writer
	tty   bool
	now   func() time.Time
	last  time.Time
	drawn bool

	started   bool
	start     time.Time // the first show
	startDone int       // done at the first show
}

// newDLQProgress returns the progress of a command writing to w.
func newDLQProgress(w io.Writer) *dlqProgress {
	return &dlqProgress{w: w, tty: isTerminal(w), now: time.Now}
}

// show draws done of total (total 0: unknown) with detail after the bar.
// final draws it even when the last drawing is less than 100 ms old.
func (p *dlqProgress) show(done, total int, detail string, final bool) {
	if !p.tty {
		return
	}
	now := p.now()
	if !p.started {
		p.started, p.start, p.startDone = true, now, done
	}
	if !final && p.drawn && now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	p.last, p.drawn = now, true
	fmt.Fprintf(p.w, "\r\033[K%s", progressLine(done, total, progressSpeed(done-p.startDone, total-done, now.Sub(p.start)), detail))
}

// minRateTime is how long the bar waits before it shows a rate: the first
// batches alone say little about the pace.
const minRateTime = time.Second

// progressSpeed is the rate of n done in elapsed and the time left for the
// left still to do at that rate ("42.5/s, ETA 1m12s"; left <= 0: the rate
// alone); "" before minRateTime, or when nothing was done yet.
func progressSpeed(n, left int, elapsed time.Duration) string {
	if elapsed < minRateTime || n <= 0 {
		return ""
	}
	rate := float64(n) / elapsed.Seconds()
	var s string
	switch {
	case rate >= 100:
		s = fmt.Sprintf("%.0f/s", rate)
	case rate >= 10:
		s = fmt.Sprintf("%.1f/s", rate)
	default:
		s = fmt.Sprintf("%.2f/s", rate)
	}
	if left > 0 {
		eta := time.Duration(float64(left) / rate * float64(time.Second))
		s += ", ETA " + eta.Round(time.Second).String()
	}
	return s
}

// clear erases the bar, so that the summary line takes its place.
func (p *dlqProgress) clear() {
	if p.tty && p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
}

// progressLine is the text of the bar: "[#####-----] 12/40 30% (speed)
// detail", or "12 handled, speed, detail" when the total is unknown (0);
// speed (progressSpeed) and detail may be empty. An approximate total
// passed by done counts as done.
func progressLine(done, total int, speed, detail string) string {
	done = max(done, 0)
	if total <= 0 {
		parts := []string{fmt.Sprintf("%d handled", done)}
		for _, p := range []string{speed, detail} {
			if p != "" {
				parts = append(parts, p)
			}
		}
		return strings.Join(parts, ", ")
	}
	total = max(total, done)
	filled := done * barWidth / total
	line := fmt.Sprintf("[%s%s] %d/%d %3d%%", strings.Repeat("#", filled), strings.Repeat("-", barWidth-filled), done, total, done*100/total)
	if speed != "" {
		line += " (" + speed + ")"
	}
	if detail != "" {
		line += " " + detail
	}
	return line
}
