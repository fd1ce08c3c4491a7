package pipe

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestTheMemoryLimitFollowsTheInflightBudget(t *testing.T) {
	tests := []struct {
		name   string
		budget int64
		env    string
		want   int64 // set and returned; 0: none set
	}{
		{"no budget sets no limit", 0, "", 0},
		{"the default 256 MiB budget allows 896 MiB", 256 << 20, "", 3*(256<<20) + 128<<20},
		{"a small budget keeps room for the process", 1 << 20, "", 3<<20 + 128<<20},
		{"GOMEMLIMIT set by the user wins", 256 << 20, "1GiB", 0},
		{"a huge budget does not overflow", math.MaxInt64 / 2, "", math.MaxInt64},
	}
	before := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(before)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			debug.SetMemoryLimit(before)
			got := ApplyMemoryLimit(tt.budget, func(k string) string {
				if k == "GOMEMLIMIT" {
					return tt.env
				}
				return ""
			})
			if got != tt.want {
				t.Fatalf("ApplyMemoryLimit(%d) = %d, want %d", tt.budget, got, tt.want)
			}
			now := debug.SetMemoryLimit(-1)
			if tt.want == 0 && now != before || tt.want != 0 && now != tt.want {
				t.Fatalf("the process's limit is %d (was %d), want %d", now, before, tt.want)
			}
		})
	}
}
