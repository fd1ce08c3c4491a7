package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pipesproject/pipes/ui"
)

func TestTopViewFollowsTheWidth(t *testing.T) {
	one := 1.0
	at := time.Date(2025, 1, 2, 12, 3, 30, 0, time.UTC)
	since := at.Add(-2*time.Minute - 5*time.Second)
	pipes := []ui.PipeView{
		{Name: "orders", State: "running", Circuit: "closed", Rates: ui.Counts{Received: 12.5, Delivered: 10, Failed: 2.5}, Totals: ui.Counts{Failed: 40},
			Depths: &ui.Depths{Queue: &ui.Depth{Visible: 7}, DLQ: &ui.Depth{Visible: 70}}, OldestMessageAgeSeconds: &one,
			Health: ui.Health{Level: "bad", Word: "failing", Since: &since}},
		{Name: "payments", State: "circuit open", Circuit: "open", Health: ui.Health{Level: "bad", Word: "circuit open"}},
		{Name: "quiet", State: "running", Circuit: "closed", Health: ui.Health{Level: "ok", Word: "healthy"}},
	}
	cases := []struct {
		name     string
		width    int
		want     []string
		wantNot  []string
		maxWidth int
		word     string // the first pipe's health word, when not "failing"
	}{
		{"a wide terminal shows every column and marks the unhealthy pipes with the page's word and since when", 160,
			[]string{"PIPE", "STATE", "IN/s", "FAIL/s", "QUEUE", "DLQ", "CIRCUIT", "FAILED", "RECEIVED", "12.5", "70",
				"! failing since 12:01:25", "! circuit open"}, nil, 160, ""},
		{"a narrow one keeps the name, the state and the first rates", 50,
			[]string{"orders", "running", "IN/s", "12.5", "! failing"}, []string{"CIRCUIT", "FAILED"}, 50, ""},
		{"an 80-column one keeps the depths and says how long the trouble lasts", 80,
			[]string{"QUEUE", "DLQ", "70", "! failing (2m5s)"}, []string{"RECEIVED", "since"}, 80, ""},
		{"a 120-column one drops the last columns for the since", 120,
			[]string{"FAILED", "! failing since 12:01:25"}, []string{"RECEIVED"}, 120, ""},
		{"a long word is cut rather than the DLQ column dropped", 80,
			[]string{"DLQ", "70", "! failing, DLQ …"}, []string{"growing"}, 80, "failing, DLQ growing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ps := slices.Clone(pipes)
			if tc.word != "" {
				ps[0].Health.Word = tc.word
			}
			m := &topModel{client: &topClient{shown: "http://127.0.0.1:8080"}, width: tc.width, pipes: ps, at: at}
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
			if strings.Contains(rowOf(view, "quiet"), "!") {
				t.Errorf("the healthy pipe is marked:\n%s", view)
			}
		})
	}
}

func TestTopMarksAPipeByThePagesHealth(t *testing.T) {
	at := time.Date(2025, 1, 2, 12, 0, 0, 0, time.UTC)
	since := at.Add(-90 * time.Second)
	cases := []struct {
		name string
		pipe ui.PipeView
		want string // the mark; "" none
	}{
		{"a failure in the last 5 minutes is failing, though the last sample failed none",
			ui.PipeView{State: "running", Health: ui.Health{Level: "bad", Word: "failing", Since: &since}}, "! failing since 11:58:30"},
		{"a failing rate of a pipe the page calls healthy is not marked",
			ui.PipeView{State: "running", Rates: ui.Counts{Failed: 1}, Health: ui.Health{Level: "ok", Word: "healthy"}}, ""},
		{"not ready is the page's word",
			ui.PipeView{State: "not ready", Health: ui.Health{Level: "bad", Word: "not ready"}}, "! not ready"},
		{"several troubles are joined as the page joins them",
			ui.PipeView{State: "running", Health: ui.Health{Level: "bad", Word: "failing, DLQ growing", Since: &since}}, "! failing, DLQ growing since 11:58:30"},
		{"a growing DLQ is a warning",
			ui.PipeView{State: "running", Health: ui.Health{Level: "warn", Word: "DLQ growing", Since: &since}}, "! DLQ growing since 11:58:30"},
		{"without the page's health (an older pipes), the rates judge",
			ui.PipeView{State: "running", Rates: ui.Counts{Failed: 1}}, "! failing"},
		{"and an older page's circuit open is its state",
			ui.PipeView{State: "circuit open"}, "! circuit open"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.pipe.Name = "orders"
			m := &topModel{client: &topClient{shown: "http://127.0.0.1:8080"}, width: 160, pipes: []ui.PipeView{tc.pipe}, at: at}
			row := rowOf(stripANSI(m.View()), "orders")
			if tc.want == "" {
				if strings.Contains(row, "!") {
					t.Fatalf("marked: %q", row)
				}
				return
			}
			if !strings.HasSuffix(row, tc.want) {
				t.Fatalf("row %q, want it to end with %q", row, tc.want)
			}
		})
	}
}

func TestTopViewFollowsTheHeight(t *testing.T) {
	var pipes []ui.PipeView
	for i := range 10 {
		pipes = append(pipes, ui.PipeView{Name: fmt.Sprintf("pipe-%02d", i), State: "running", Health: ui.Health{Level: "ok", Word: "healthy"}})
	}
	pipes[7].Health = ui.Health{Level: "bad", Word: "failing"}
	pipes[8].Health = ui.Health{Level: "warn", Word: "DLQ growing"}
	pipes[9].Health = ui.Health{Level: "bad", Word: "not ready"}
	cases := []struct {
		name    string
		height  int
		err     error
		want    []string // rows in order
		notWant []string
		more    string
	}{
		{"all fit: the page's order, no more line", 20, nil,
			[]string{"pipe-00", "pipe-01", "pipe-07", "pipe-08", "pipe-09"}, nil, ""},
		{"ten pipes in 13 lines fit exactly", 13, nil, []string{"pipe-00", "pipe-09"}, nil, ""},
		{"in 8 lines: the unhealthy first, bad before warn, then +N more", 8, nil,
			[]string{"pipe-07", "pipe-09", "pipe-08", "pipe-00"}, []string{"pipe-01"}, "+6 more"},
		{"an error line takes a row", 8, errors.New("reading: refused"),
			[]string{"pipe-07", "pipe-09", "pipe-08"}, []string{"pipe-00"}, "+7 more"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := &topModel{client: &topClient{shown: "http://127.0.0.1:8080"}, width: 100, height: tc.height, pipes: pipes, err: tc.err}
			view := stripANSI(m.View())
			lines := strings.Split(view, "\n")
			if len(lines) > tc.height {
				t.Errorf("%d lines in a terminal of %d:\n%s", len(lines), tc.height, view)
			}
			last := -1
			for _, w := range tc.want {
				i := strings.Index(view, w)
				if i < 0 || i < last {
					t.Errorf("%s missing or out of order in:\n%s", w, view)
				}
				last = i
			}
			for _, w := range tc.notWant {
				if strings.Contains(view, w) {
					t.Errorf("%s shown in:\n%s", w, view)
				}
			}
			if got := strings.Contains(view, "more"); tc.more == "" && got || tc.more != "" && !strings.Contains(view, tc.more) {
				t.Errorf("want %q in:\n%s", tc.more, view)
			}
		})
	}
}

// rowOf is the line of view that starts with the pipe's name.
func rowOf(view, name string) string {
	for _, line := range strings.Split(view, "\n") {
		if strings.HasPrefix(stripANSI(line), name+" ") {
			return strings.TrimRight(stripANSI(line), " ")
		}
	}
	return ""
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
