package h1

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// deadlineConn records the read deadlines set on it after lent is set
// (the connection was handed to another request).
type deadlineConn struct {
	net.Conn
	lent     atomic.Bool
	touched  atomic.Int32 // deadlines set while lent
	deadline atomic.Int32 // deadlines set in all
}

func (d *deadlineConn) SetReadDeadline(time.Time) error {
	d.deadline.Add(1)
	if d.lent.Load() {
		d.touched.Add(1)
	}
	return nil
}

func (d *deadlineConn) SetDeadline(t time.Time) error { return d.SetReadDeadline(t) }

// gatedBody is an answer's body whose reads each wait for their own gate
// (the first read the first gate, and so on) and then end it.
type gatedBody struct {
	entered chan int
	gates   [2]chan struct{}
	calls   atomic.Int32
}

func (g *gatedBody) Read([]byte) (int, error) {
	i := int(g.calls.Add(1)) - 1
	g.entered <- i
	if i < len(g.gates) {
		<-g.gates[i]
	}
	return 0, io.EOF
}

func (g *gatedBody) Close() error { return nil }

// TestCloseRacingTheLastReadLeavesTheConnectionAlone: a Read that reaches
// the body's end gives the connection back, and a Close racing it must
// then touch the connection no more, because another request (a 20 s long
// poll) may hold it already. Here the Read reaches the end while the Close
// drains; the connection is taken at once by another request. Before, the
// Close then set the connection's read deadline (to none, wiping a
// cancelled request's, or, a moment earlier, to 1 s, failing a long poll
// after 1 s). Now the Close, having begun, is the one that gives the
// connection back, once, after its last touch.
func TestCloseRacingTheLastReadLeavesTheConnectionAlone(t *testing.T) {
	tr := New(Options{})
	defer tr.CloseIdleConnections()
	a, b := net.Pipe()
	defer b.Close()
	nc := &deadlineConn{Conn: a}
	c := &conn{t: tr, key: "http://example.test:80", nc: nc}
	g := &gatedBody{entered: make(chan int, 4), gates: [2]chan struct{}{make(chan struct{}), make(chan struct{})}}
	bd := &body{rc: g, c: c, stop: func() bool { return true }, keep: true, ctx: context.Background()}

	var wg sync.WaitGroup
	read := make(chan error, 1)
	wg.Go(func() {
		var p [8]byte
		_, err := bd.Read(p[:])
		read <- err
	})
	<-g.entered // the Read waits inside the body
	wg.Go(func() { bd.Close() })
	<-g.entered // the Close's drain waits inside the body too

	close(g.gates[0]) // the Read reaches the end
	if err := <-read; err != io.EOF {
		t.Fatalf("the read got %v, want io.EOF", err)
	}
	// Another request takes the connection if it is idle now.
	if got := tr.popIdle(c.key); got != nil {
		nc.lent.Store(true)
	}
	close(g.gates[1]) // the Close's drain ends
	wg.Wait()
	if n := nc.touched.Load(); n > 0 {
		t.Fatalf("the racing Close set the read deadline %d times on a connection another request held", n)
	}
	if !nc.lent.Load() {
		if got := tr.popIdle(c.key); got != c {
			t.Fatalf("the connection was not given back after the Close")
		}
	}
	if got := tr.popIdle(c.key); got != nil {
		t.Fatalf("the connection was given back twice")
	}
}
