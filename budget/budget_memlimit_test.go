package budget

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestTheMemoryLimitFollowsTheInflightBudget(t *testing.T) {
	tests := []struct {
		name       string
		budget     int64
		env        map[string]string
		wantLimit  int64 // set and returned; 0: none set
		wantGCPerc int
	}{
		{"no budget sets nothing", 0, nil, 0, 0},
		{"the default 256 MiB budget allows 896 MiB", 256 << 20, nil, 3*(256<<20) + 128<<20, 400},
		{"a small budget keeps room for the process", 1 << 20, nil, 3<<20 + 128<<20, 400},
		{"GOMEMLIMIT set by the user wins", 256 << 20, map[string]string{"GOMEMLIMIT": "1GiB"}, 0, 0},
		{"GOGC set by the user is kept", 256 << 20, map[string]string{"GOGC": "100"}, 3*(256<<20) + 128<<20, 0},
		{"a huge budget does not overflow", math.MaxInt64 / 2, nil, math.MaxInt64, 400},
	}
	before := debug.SetMemoryLimit(-1)
	beforeGC := debug.SetGCPercent(-1)
	debug.SetGCPercent(beforeGC)
	defer debug.SetMemoryLimit(before)
	defer debug.SetGCPercent(beforeGC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			debug.SetMemoryLimit(before)
			debug.SetGCPercent(beforeGC)
			limit, gc := ApplyMemoryLimit(tt.budget, func(k string) string { return tt.env[k] })
			if limit != tt.wantLimit || gc != tt.wantGCPerc {
				t.Fatalf("ApplyMemoryLimit(%d) = %d, %d; want %d, %d", tt.budget, limit, gc, tt.wantLimit, tt.wantGCPerc)
			}
			now := debug.SetMemoryLimit(-1)
			if tt.wantLimit == 0 && now != before || tt.wantLimit != 0 && now != tt.wantLimit {
				t.Fatalf("the process's limit is %d (was %d), want %d", now, before, tt.wantLimit)
			}
			nowGC := debug.SetGCPercent(beforeGC)
			if tt.wantGCPerc == 0 && nowGC != beforeGC || tt.wantGCPerc != 0 && nowGC != tt.wantGCPerc {
				t.Fatalf("the GC target is %d (was %d), want %d", nowGC, beforeGC, tt.wantGCPerc)
			}
		})
	}
}
