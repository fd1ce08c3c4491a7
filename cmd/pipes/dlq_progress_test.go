package main

import (
	"bytes"
	"testing"
	"time"
)

func TestProgressLineDrawsTheBar(t *testing.T) {
	tests := []struct {
		name        string
		done, total int
		detail      string
		want        string
	}{
		{"nothing done", 0, 10, "0 moved", "[------------------------------] 0/10   0% 0 moved"},
		{"a third done", 10, 30, "", "[##########--------------------] 10/30  33%"},
		{"all done", 7, 7, "7 moved", "[##############################] 7/7 100% 7 moved"},
		{"an approximate total passed counts as done", 12, 10, "", "[##############################] 12/12 100%"},
		{"an unknown total gives counts only", 5, 0, "4 moved, 1 skipped", "5 handled, 4 moved, 1 skipped"},
		{"an unknown total without detail", 3, 0, "", "3 handled"},
		{"a negative count is none", -1, 4, "", "[------------------------------] 0/4   0%"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := progressLine(tt.done, tt.total, tt.detail); got != tt.want {
				t.Errorf("progressLine(%d, %d, %q) = %q, want %q", tt.done, tt.total, tt.detail, got, tt.want)
			}
		})
	}
}

func TestProgressRedrawsInPlaceOnATerminalOnly(t *testing.T) {
	clock := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var tty bytes.Buffer
	p := &dlqProgress{w: &tty, tty: true, now: func() time.Time { return clock }}
	p.show(1, 4, "", false)
	p.show(2, 4, "", false) // within 100 ms: not drawn
	clock = clock.Add(150 * time.Millisecond)
	p.show(3, 4, "", false)
	p.show(4, 4, "", true) // final: drawn at once
	p.clear()
	want := "\r\033[K" + progressLine(1, 4, "") + "\r\033[K" + progressLine(3, 4, "") + "\r\033[K" + progressLine(4, 4, "") + "\r\033[K"
	if got := tty.String(); got != want {
		t.Errorf("on a terminal it wrote %q, want %q", got, want)
	}

	var file bytes.Buffer
	p = newDLQProgress(&file) // a buffer is no terminal
	p.show(1, 4, "", true)
	p.clear()
	if file.Len() != 0 {
		t.Errorf("off a terminal it wrote %q, want nothing", file.String())
	}
}
