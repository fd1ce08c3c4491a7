package main

import (
	"bytes"
	"testing"
	"time"
)

func TestProgressLineDrawsTheBar(t *testing.T) {
	tests := []struct {
		name          string
		done, total   int
		speed, detail string
		want          string
	}{
		{"nothing done", 0, 10, "", "0 moved", "[------------------------------] 0/10   0% 0 moved"},
		{"a third done", 10, 30, "", "", "[##########--------------------] 10/30  33%"},
		{"a third done, with the rate", 10, 30, "5.00/s, ETA 4s", "10 moved", "[##########--------------------] 10/30  33% (5.00/s, ETA 4s) 10 moved"},
		{"all done", 7, 7, "", "7 moved", "[##############################] 7/7 100% 7 moved"},
		{"an approximate total passed counts as done", 12, 10, "", "", "[##############################] 12/12 100%"},
		{"an unknown total gives counts only", 5, 0, "", "4 moved, 1 skipped", "5 handled, 4 moved, 1 skipped"},
		{"an unknown total with the rate", 5, 0, "2.50/s", "5 moved", "5 handled, 2.50/s, 5 moved"},
		{"an unknown total without detail", 3, 0, "", "", "3 handled"},
		{"a negative count is none", -1, 4, "", "", "[------------------------------] 0/4   0%"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := progressLine(tt.done, tt.total, tt.speed, tt.detail); got != tt.want {
				t.Errorf("progressLine(%d, %d, %q, %q) = %q, want %q", tt.done, tt.total, tt.speed, tt.detail, got, tt.want)
			}
		})
	}
}

func TestProgressSpeedGivesTheRateAndTheTimeLeft(t *testing.T) {
	tests := []struct {
		name    string
		n, left int
		elapsed time.Duration
		want    string
	}{
		{"before a second: no rate yet", 50, 50, 900 * time.Millisecond, ""},
		{"nothing done yet", 0, 100, 5 * time.Second, ""},
		{"slow", 3, 9, 2 * time.Second, "1.50/s, ETA 6s"},
		{"tens a second", 125, 1000, 10 * time.Second, "12.5/s, ETA 1m20s"},
		{"hundreds a second", 4000, 250000, 10 * time.Second, "400/s, ETA 10m25s"},
		{"nothing left: the rate alone", 40, 0, 4 * time.Second, "10.0/s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := progressSpeed(tt.n, tt.left, tt.elapsed); got != tt.want {
				t.Errorf("progressSpeed(%d, %d, %v) = %q, want %q", tt.n, tt.left, tt.elapsed, got, tt.want)
			}
		})
	}
}

func TestProgressRedrawsInPlaceOnATerminalOnly(t *testing.T) {
	clock := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var tty bytes.Buffer
	p := &dlqProgress{w: &tty, tty: true, now: func() time.Time { return clock }}
	p.show(1, 40, "", false)
	p.show(2, 40, "", false) // within 100 ms: not drawn
	clock = clock.Add(150 * time.Millisecond)
	p.show(3, 40, "", false)
	clock = clock.Add(1850 * time.Millisecond)
	p.show(21, 40, "", false) // 20 more in 2 s since the first drawing: 10/s, 19 left
	p.show(40, 40, "", true)  // final: drawn at once
	p.clear()
	want := "\r\033[K" + progressLine(1, 40, "", "") + "\r\033[K" + progressLine(3, 40, "", "") +
		"\r\033[K" + progressLine(21, 40, "10.0/s, ETA 2s", "") + "\r\033[K" + progressLine(40, 40, "19.5/s", "") + "\r\033[K"
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
