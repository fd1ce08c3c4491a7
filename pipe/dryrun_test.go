package pipe

import (
	"testing"
	"time"

	"github.com/pipesproject/pipes/source"
)

func TestDryHoldKeepsAllButTheReleases(t *testing.T) {
	d := &delivery{Message: &source.Message{}}
	tests := []struct {
		name     string
		items    []settle
		wantKept int
		wantHeld int
	}{
		{"acks are held", []settle{{d: d, v: verbAck}, {d: d, v: verbAck}}, 0, 2},
		{"retries and dead-letters are held", []settle{{d: d, v: verbRetry}, {d: d, v: verbTerm}, {d: d, v: verbNak, delay: time.Second}}, 0, 3},
		{"a stop's releases go", []settle{{d: d, v: verbNak}, {d: d, v: verbAck}}, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h dryHold
			kept := h.keep(tt.items)
			if len(kept) != tt.wantKept || h.held != tt.wantHeld {
				t.Errorf("kept %d, held %d; want %d, %d", len(kept), h.held, tt.wantKept, tt.wantHeld)
			}
		})
	}
}

func TestDryHoldSaysOnceThatItIsFull(t *testing.T) {
	h := dryHold{held: dryRunHold - 1}
	if h.filled() {
		t.Fatal("filled one short of the hold")
	}
	h.held++
	if !h.filled() || h.filled() {
		t.Fatal("want filled true once at the hold, then false")
	}
}
