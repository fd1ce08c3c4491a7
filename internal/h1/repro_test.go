package h1

// Repros. Run: go test -run 'TestRepro' -v ./internal/h1/

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawServer accepts connections and runs serve on each.
func revRawServer(t *testing.T, serve func(c net.Conn, br *bufio.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c, bufio.NewReader(c))
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

func revGet(t *testing.T, rt http.RoundTripper, method, url string, body []byte) (int, string, error) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, url, rd)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// A server (buggy, or a confused proxy) that writes bytes after a complete
// answer, a little later: a wrong Content-Length, a body sent to HEAD, a
// second answer. net/http's read loop watches every idle connection and
// drops it ("Unsolicited response received on idle HTTP channel"); h1's
// Linux liveness check only reads the TCP state (ESTABLISHED), so the next
// request on that connection — possibly another batch — reads the stale
// bytes as its own answer. Every later answer on the connection is then
// shifted by one.
func TestReproUnsolicitedBytesOnIdleConnDesync(t *testing.T) {
	url := revRawServer(t, func(c net.Conn, br *bufio.Reader) {
		first := true
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			body := req.Method + " " + req.URL.Path
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+itoa(len(body))+"\r\n\r\n"+body)
			if first {
				first = false
				time.Sleep(30 * time.Millisecond)
				stale := `{"batchItemFailures":[]}`
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+itoa(len(stale))+"\r\n\r\n"+stale)
			}
		}
	})
	for _, tc := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{"net/http", &http.Transport{}},
		{"h1", New(Options{})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, b, err := revGet(t, tc.rt, "POST", url+"/batch-1", []byte("a")); err != nil || b != "POST /batch-1" {
				t.Fatalf("first: %q %v", b, err)
			}
			time.Sleep(150 * time.Millisecond)
			st, b, err := revGet(t, tc.rt, "POST", url+"/batch-2", []byte("b"))
			t.Logf("%s: second request got %d %q err=%v", tc.name, st, b, err)
			if b != "POST /batch-2" {
				t.Errorf("%s: the second request read another answer: %q (response desync)", tc.name, b)
			}
		})
	}
}

// A server that answers before reading a large body and keeps the
// connection open (it neither reads nor closes). net/http writes the body
// on its own goroutine and returns the answer as soon as it is read; h1
// writes the whole body first on the caller's goroutine, so it blocks
// until the context ends and the caller gets a timeout instead of the
// 413 (which the http target would classify as a permanent client error).
func TestReproEarlyAnswerOnAnOpenConnection(t *testing.T) {
	url := revRawServer(t, func(c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 413 Request Entity Too Large\r\nContent-Length: 9\r\n\r\ntoo large")
		time.Sleep(10 * time.Second) // neither reads nor closes
	})
	body := bytes.Repeat([]byte("x"), 64<<20)
	for _, tc := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{"net/http", &http.Transport{}},
		{"h1", New(Options{})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			st, b, err := revGet(t, tc.rt, "POST", url+"/", body)
			t.Logf("%s: %d %q err=%v after %s", tc.name, st, b, err, time.Since(start).Round(time.Millisecond))
			if st != http.StatusRequestEntityTooLarge {
				t.Errorf("%s: got %d %v, want the server's 413", tc.name, st, err)
			}
		})
	}
}

func itoa(n int) string {
	return strings.TrimSpace(strings.Repeat(" ", 0) + func() string { return fmtInt(n) }())
}

func fmtInt(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}
