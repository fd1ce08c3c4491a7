package h1

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkAlive is the check an idle connection passes before it is
// reused (a system call: getsockopt on Linux, a peek elsewhere).
func BenchmarkAlive(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "x") }))
	defer srv.Close()
	tr := New(Options{})
	req, _ := http.NewRequest("GET", srv.URL, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		b.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	key, _ := hostKey(req.URL)
	c := tr.popIdle(key)
	if c == nil {
		b.Fatal("no idle connection")
	}
	defer c.close()
	for b.Loop() {
		if !c.alive() {
			b.Fatal("an open connection was found closed")
		}
	}
}
