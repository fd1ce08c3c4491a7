package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/testenv"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source/memory"
	"github.com/pipesproject/pipes/ui"
)

// topPage serves the status page of a running memory pipe whose target
// fails the bodies holding "bad", fed a message every 50 ms; it returns
// the page's address.
func topPage(t *testing.T) string {
	t.Helper()
	q, err := memory.NewBroker().Queue("orders", memory.Options{WaitTime: 50 * time.Millisecond, VisibilityTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	target := pipe.TargetFunc(func(_ context.Context, evs []*pipe.Event) (pipe.Result, error) {
		var res pipe.Result
		for _, ev := range evs {
			if strings.Contains(ev.Message.Body, "bad") {
				res.Failures = append(res.Failures, pipe.ItemFailure{ID: ev.ID(), Err: errors.New("refused")})
			}
		}
		return res, nil
	})
	p, err := pipe.New(pipe.Options{Name: "orders", Source: q, Target: target})
	if err != nil {
		t.Fatal(err)
	}
	rec := ui.NewRecorder(200*time.Millisecond, nil)
	p.SetObserver(rec)
	srv, err := ui.New(ui.Config{Addr: "127.0.0.1:0", Token: "top-token-never-shown", SampleEvery: 200 * time.Millisecond,
		Pipes: []ui.Pipe{{Control: p, Recorder: rec}}})
	if err != nil {
		t.Fatal(err)
	}
	addr, err := srv.Start()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	feed := make(chan struct{})
	go func() {
		defer close(feed)
		for i := 0; ctx.Err() == nil; i++ {
			body := fmt.Sprintf(`{"n":%d}`, i)
			if i%5 == 0 {
				body = `{"n":"bad"}`
			}
			_, _ = q.Send(ctx, memory.SendInput{Body: body})
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-feed
		if err := <-done; err != nil {
			t.Error(err)
		}
		_ = srv.Close()
	})
	return addr
}

// TestTopShowsThePipesRowAndItsNumbersMoveUnderTmux runs `pipes top` in a
// detached tmux session of its own (a private tmux server) and reads the
// screen with capture-pane.
func TestTopShowsThePipesRowAndItsNumbersMoveUnderTmux(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		testenv.Missing(t, testenv.Service{Name: "tmux (for the pipes top test)", Fix: "install it with `apt-get install tmux`"}, err)
	}
	addr := topPage(t)
	socket := fmt.Sprintf("pipes-top-test-%d", os.Getpid())
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(tmux, append([]string{"-L", socket}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	command := fmt.Sprintf("env PIPES_TEST_MAIN=1 PIPES_UI_TOKEN=top-token-never-shown %s top --url http://%s --interval 300ms", os.Args[0], addr)
	run("new-session", "-d", "-s", "top", "-x", "120", "-y", "20", command)
	t.Cleanup(func() { _ = exec.Command(tmux, "-L", socket, "kill-server").Run() })

	row := regexp.MustCompile(`(?m)^orders\s+running\s+(\d+\.\d)\s+(\d+\.\d)\s+(\d+\.\d)\s+.*?\s(\d+)\s`)
	var screens []string
	var firstTotal string
	waitUntil(t, 30*time.Second, "the orders row with its failed total moving", func() bool {
		screen := run("capture-pane", "-p", "-t", "top")
		screens = append(screens, screen)
		if strings.Contains(screen, "top-token-never-shown") {
			t.Fatalf("pipes top shows the token:\n%s", screen)
		}
		m := row.FindStringSubmatch(screen)
		if m == nil || !strings.Contains(screen, "STATE") || !strings.Contains(screen, "FAILED") {
			return false
		}
		if firstTotal == "" {
			firstTotal = m[4]
			return false
		}
		return m[4] != firstTotal
	})
	last := screens[len(screens)-1]
	if !strings.Contains(last, "! failing") {
		t.Errorf("the failing pipe is not marked:\n%s", last)
	}
	t.Logf("screen:\n%s", last)
	if err := os.WriteFile(filepath.Join(artifactsDir(t), "top.txt"), []byte(last), 0o644); err != nil {
		t.Fatal(err)
	}

	// The terminal narrows: the table follows, dropping columns from the right.
	run("resize-window", "-t", "top", "-x", "50", "-y", "20")
	waitUntil(t, 10*time.Second, "the narrow table", func() bool {
		screen := run("capture-pane", "-p", "-t", "top")
		return strings.Contains(screen, "orders") && !strings.Contains(screen, "FAILED") && strings.Contains(screen, "IN/s")
	})
	run("send-keys", "-t", "top", "q")
	waitUntil(t, 10*time.Second, "pipes top to quit on q", func() bool {
		return exec.Command(tmux, "-L", socket, "has-session", "-t", "top").Run() != nil
	})
}
