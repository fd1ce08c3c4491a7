package pipe

import "testing"

func TestSizeEstimate(t *testing.T) {
	type receive struct{ n, bytes int }
	tests := []struct {
		name      string
		receives  []receive
		wantKnown bool
		reserveOf int
		want      int64
	}{
		{name: "nothing received: unknown, reckoned at the floor", reserveOf: 10, want: 10 * sizeFloor},
		{name: "the first receive's mean", receives: []receive{{10, 10_000}}, wantKnown: true, reserveOf: 10, want: 10_000},
		{name: "then a moving average", receives: []receive{{10, 10_000}, {5, 10_000}}, wantKnown: true, reserveOf: 1, want: 1200},
		{name: "small messages are reckoned at the floor", receives: []receive{{10, 100}}, wantKnown: true, reserveOf: 4, want: 4 * sizeFloor},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s sizeEstimate
			for _, r := range tt.receives {
				s.add(r.n, r.bytes)
			}
			if s.known() != tt.wantKnown {
				t.Errorf("known = %v, want %v", s.known(), tt.wantKnown)
			}
			if got := s.reserve(tt.reserveOf); got != tt.want {
				t.Errorf("reserve(%d) = %d, want %d", tt.reserveOf, got, tt.want)
			}
		})
	}
}
