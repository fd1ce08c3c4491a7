package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pipesproject/pipes/ui"
)

func TestTopViewFollowsTheWidth(t *testing.T) {
	one := 1.0
	pipes := []ui.PipeView{
		{Name: "orders", State: "running", Circuit: "closed", Rates: ui.Counts{Received: 12.5, Delivered: 10, Failed: 2.5}, Totals: ui.Counts{Failed: 40},
			Depths: &ui.Depths{Queue: &ui.Depth{Visible: 7}, DLQ: &ui.Depth{Visible: 70}}, OldestMessageAgeSeconds: &one},
		{Name: "payments", State: "circuit open", Circuit: "open"},
		{Name: "quiet", State: "running", Circuit: "closed"},
	}
	cases := []struct {
		name     string
		width    int
		want     []string
		wantNot  []string
		maxWidth int
	}{
		{"a wide terminal shows every column and marks the unhealthy pipes", 160,
			[]string{"PIPE", "STATE", "IN/s", "FAIL/s", "QUEUE", "DLQ", "CIRCUIT", "FAILED", "RECEIVED", "12.5", "70", "! failing", "! circuit open"}, nil, 160},
		{"a narrow one keeps the name, the state and the first rates", 50,
			[]string{"orders", "running", "IN/s", "12.5"}, []string{"CIRCUIT", "FAILED"}, 50},
		{"an 80-column one keeps the depths", 80, []string{"QUEUE", "DLQ", "70"}, []string{"RECEIVED"}, 80},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := &topModel{client: &topClient{shown: "http://127.0.0.1:8080"}, width: tc.width, pipes: pipes}
			view := m.View()
			for _, w := range tc.want {
				if !strings.Contains(view, w) {
					t.Errorf("no %q in:\n%s", w, view)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(view, w) {
					t.Errorf("%q at width %d in:\n%s", w, tc.width, view)
				}
			}
			for _, line := range strings.Split(view, "\n") {
				if n := len([]rune(stripANSI(line))); n > tc.maxWidth {
					t.Errorf("a line of %d cells at width %d: %q", n, tc.width, line)
				}
			}
		})
	}
}

// stripANSI drops the escape sequences lipgloss adds.
func stripANSI(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b {
			for i < len(s) && s[i] != 'm' {
				i++
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func TestTopClientSendsTheTokenAndNeverShowsIt(t *testing.T) {
	const token = "top-secret-token"
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"pipes":[{"name":"orders","state":"running"}]}`))
	}))
	defer hs.Close()
	cases := []struct {
		name, url, token string
		wantErr          string
	}{
		{"with the token the pipes are read", hs.URL, token, ""},
		{"without it the error names the variable", hs.URL, "", "set PIPES_UI_TOKEN"},
		{"a password in the URL is not shown", "http://user:url-pass@127.0.0.1:1", token, "xxxxx@127.0.0.1:1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := newTopClient(tc.url, tc.token)
			if err != nil {
				t.Fatal(err)
			}
			ps, err := c.pipes(context.Background())
			if tc.wantErr == "" {
				if err != nil || len(ps) != 1 || ps[0].Name != "orders" {
					t.Fatalf("%+v, %v", ps, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), token) || strings.Contains(err.Error(), "url-pass") {
				t.Fatalf("the error shows a secret: %v", err)
			}
		})
	}
	if _, err := newTopClient("ftp://x", ""); err == nil {
		t.Error("an ftp URL was taken")
	}
}
