package h1

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
)

// coalescingConn holds what is written to it until flush, which sends it
// in one write: TLS records written one by one leave in one segment.
type coalescingConn struct {
	net.Conn
	held  bool
	mu    sync.Mutex
	queue bytes.Buffer
}

func (c *coalescingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held {
		return c.queue.Write(p)
	}
	return c.Conn.Write(p)
}

func (c *coalescingConn) hold() { c.mu.Lock(); c.held = true; c.mu.Unlock() }

func (c *coalescingConn) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held = false
	_, err := c.Conn.Write(c.queue.Bytes())
	c.queue.Reset()
	return err
}

// TestStaleRecordsHeldByTheTLSLayer: a TLS server writes its answer and a
// stale one as two records that arrive in one segment. The TLS layer reads
// both from the socket and decrypts the first only, so the socket is empty
// when the connection is next taken: the stale record, held in the TLS
// layer, must still keep the connection from being reused.
func TestStaleRecordsHeldByTheTLSLayer(t *testing.T) {
	cert, roots := serverTLS(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for n := 0; ; n++ {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer raw.Close()
				cc := &coalescingConn{Conn: raw}
				tc := tls.Server(cc, &tls.Config{Certificates: []tls.Certificate{cert}})
				br := bufio.NewReader(tc)
				for first := n == 0; ; first = false {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					if first {
						cc.hold()
						io.WriteString(tc, answerFor(req.URL.Path)) // one record
						io.WriteString(tc, stale())                 // another
						if cc.flush() != nil {
							return
						}
						continue
					}
					if _, err := io.WriteString(tc, answerFor(req.URL.Path)); err != nil {
						return
					}
				}
			})
		}
	})
	tr := New(Options{TLSConfig: &tls.Config{RootCAs: roots}})
	defer tr.CloseIdleConnections()
	url := "https://" + ln.Addr().String()
	for _, path := range []string{"/1", "/2", "/3"} {
		if _, got, _ := do(t, tr, "GET", url+path, nil); got != "for "+path {
			t.Fatalf("%s got %q: another request's answer", path, got)
		}
	}
}
