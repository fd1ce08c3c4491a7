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
// when it is a terminal, redrawn in place at most ten times a second; when
// it is not, it draws nothing and the summary line alone is printed.
type dlqProgress struct {
	w     io.Writer
	tty   bool
	now   func() time.Time
	last  time.Time
	drawn bool
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
	if !final && p.drawn && now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	p.last, p.drawn = now, true
	fmt.Fprintf(p.w, "\r\033[K%s", progressLine(done, total, detail))
}

// clear erases the bar, so that the summary line takes its place.
func (p *dlqProgress) clear() {
	if p.tty && p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
}

// progressLine is the text of the bar: "[#####-----] 12/40 30% detail",
// or "12 done, detail" when the total is unknown (0). An approximate total
// passed by done counts as done.
func progressLine(done, total int, detail string) string {
	if total <= 0 {
		return strings.TrimSuffix(fmt.Sprintf("%d handled, %s", max(done, 0), detail), ", ")
	}
	done = max(done, 0)
	total = max(total, done)
	filled := done * barWidth / total
	line := fmt.Sprintf("[%s%s] %d/%d %3d%%", strings.Repeat("#", filled), strings.Repeat("-", barWidth-filled), done, total, done*100/total)
	if detail != "" {
		line += " " + detail
	}
	return line
}
