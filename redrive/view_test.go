package redrive_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pipesproject/pipes/redrive"
)

func TestPreviewShowsABodyAsOneLineOfText(t *testing.T) {
	tests := []struct {
		name string
		body string
		max  int
		want string
	}{
		{"nothing is (empty)", "", 10, "(empty)"},
		{"text is quoted", "hello", 10, `"hello"`},
		{"quotes and backslashes are escaped", `a"b\c`, 10, `"a\"b\\c"`},
		{"newlines, tabs and controls are escaped", "a\nb\tc\r\x00\x7f", 20, `"a\nb\tc\r\x00\x7f"`},
		{"invisible runes are escaped", "a\u200bb\u2028", 20, `"a\u200bb\u2028"`},
		{"letters of any script stay", "héllo 世界", 20, `"héllo 世界"`},
		{"a long body is cut and says how much is left", "abcdefghij", 4, `"abcd" … 6 more bytes`},
		{"a cut never splits a rune", "ééé", 3, `"é" … 4 more bytes`},
		{"bytes that are not UTF-8 are binary, in hex", "\xff\xfe\x00A", 10, "(binary) fffe0041"},
		{"a long binary body shows its first 32 bytes", strings.Repeat("\xff", 40), 10, "(binary) " + strings.Repeat("ff", 32) + " … 8 more bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := redrive.Preview([]byte(tt.body), tt.max); got != tt.want {
				t.Errorf("Preview(%q, %d) = %s, want %s", tt.body, tt.max, got, tt.want)
			}
		})
	}
}

// FuzzPreview: whatever the body, the preview is one line of valid UTF-8
// with no control characters, and no longer than a bound of its max.
func FuzzPreview(f *testing.F) {
	for _, s := range []string{"", "a", "é\n\x00", "\xff", strings.Repeat("世", 100)} {
		f.Add([]byte(s), 10)
	}
	f.Fuzz(func(t *testing.T, body []byte, limit int) {
		limit = 1 + abs(limit)%300
		got := redrive.Preview(body, limit)
		if !utf8.ValidString(got) {
			t.Fatalf("Preview(%q) = %q: not UTF-8", body, got)
		}
		for _, r := range got {
			if r < 0x20 || r == 0x7f || r == '\u2028' || r == '\u2029' {
				t.Fatalf("Preview(%q) = %q: holds %U", body, got, r)
			}
		}
		// Each byte kept shows as at most 6 (\u200b), binary as 64 hex digits; the rest is framing.
		if len(got) > max(6*limit, 64)+80 {
			t.Fatalf("Preview(%d bytes, %d) is %d bytes long", len(body), limit, len(got))
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
