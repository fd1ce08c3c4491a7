package ui

import (
	"strings"
	"testing"
)

func TestPreview(t *testing.T) {
	cases := []struct {
		name, body, want string
	}{
		{"JSON text is shown as it is", `{"order":"o-1"}`, `{"order":"o-1"}`},
		{"empty stays empty", "", ""},
		{"a long text is cut after 200 bytes", strings.Repeat("x", 250), strings.Repeat("x", 200) + "…"},
		{"a cut never splits a character", strings.Repeat("x", 199) + "€€", strings.Repeat("x", 199) + "…"},
		{"binary is shown in hex, as pipes dlq inspect does", "\xff\x00", "(binary) ff00"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := preview([]byte(tc.body)); got != tc.want {
				t.Errorf("preview(%q) = %q, want %q", tc.body, got, tc.want)
			}
		})
	}
}
