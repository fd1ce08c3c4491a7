package httpcore

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		value  string
		want   time.Duration
		wantOK bool
	}{
		{"a number of seconds is that long", "120", 2 * time.Minute, true},
		{"spaces around the seconds are ignored", " 5 ", 5 * time.Second, true},
		{"zero seconds is no wait", "0", 0, true},
		{"an HTTP date is the time until it", now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{"a date in the past is no wait", now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"more than 12 hours of seconds is cut to 12 hours", "86400", 12 * time.Hour, true},
		{"a number too large for an int64 is cut to 12 hours", "99999999999999999999999999", 12 * time.Hour, true},
		{"a date more than 12 hours away is cut to 12 hours", now.Add(48 * time.Hour).Format(http.TimeFormat), 12 * time.Hour, true},
		{"an empty value is not read", "", 0, false},
		{"a negative number is not read", "-5", 0, false},
		{"a fraction is not read", "1.5", 0, false},
		{"seconds with a unit are not read", "5s", 0, false},
		{"a word is not read", "soon", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseRetryAfter(tt.value, now)
			if got != tt.want || ok != tt.wantOK {
				t.Fatalf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.value, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	now := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	for _, s := range []string{"120", "0", " 7 ", "-1", "1.5", "Wed, 02 Dec 2026 07:01:30 GMT", "Monday, 02-Dec-26 07:01:30 GMT", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := ParseRetryAfter(v, now)
		if d < 0 || d > maxRetryAfter {
			t.Fatalf("ParseRetryAfter(%q) = %v, outside 0..12h", v, d)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v but not ok", v, d)
		}
		// Differential: a plain number of seconds reads as strconv does.
		if n, err := strconv.ParseUint(v, 10, 63); err == nil && v[0] != '+' {
			want := min(time.Duration(min(n, uint64(maxRetryAfter/time.Second)))*time.Second, maxRetryAfter)
			if !ok || d != want {
				t.Fatalf("ParseRetryAfter(%q) = %v, %v; strconv says %v", v, d, ok, want)
			}
		}
	})
}
