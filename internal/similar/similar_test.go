package similar

import "testing"

func TestClosest(t *testing.T) {
	known := []string{"BatchSize", "MaximumBatchingWindowInSeconds", "outcome", "outcomes"}
	for _, tt := range []struct{ name, want string }{
		{"BatchSze", "BatchSize"},
		{"batchsize", "BatchSize"}, // case is ignored
		{"outcom", "outcome"},      // the closest of two
		{"outcomess", "outcomes"},
		{"Colour", ""},
		{"", ""},
	} {
		if got := Closest(tt.name, known); got != tt.want {
			t.Errorf("Closest(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"flaw", "lawn", 2}, {"same", "same", 0}} {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
