//go:build unix

package h1

import "syscall"

// peekable tells that alive can see bytes a server sent unasked.
const peekable = true

// aliveCheck is what a connection keeps for alive, so that a check
// allocates nothing: the function given to the socket, made once, and what
// it finds.
type aliveCheck struct {
	probe func(fd uintptr)
	buf   [1]byte
	quiet bool
}

// alive reports whether an idle connection is still open and silent: a
// non-blocking peek at its socket (recv with MSG_PEEK|MSG_DONTWAIT) must
// find nothing to read yet. A server that closed it (FIN: the peek reads
// 0 bytes; RST: an error) or sent anything unasked (a byte to read: a
// second answer, the rest of a body longer than its Content-Length, a TLS
// alert or record) makes it unfit for the next request, which would read
// those bytes as its own answer. One system call that neither waits nor
// makes the kernel send anything. (What came after an answer and was
// already read into the connection's buffers was checked when it went
// idle: see putIdle.)
func (c *conn) alive() bool {
	if c.raw == nil {
		return true
	}
	if c.probe == nil {
		c.probe = func(fd uintptr) {
			_, _, err := syscall.Recvfrom(int(fd), c.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			c.quiet = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		}
	}
	c.quiet = false
	err := c.raw.Control(c.probe)
	return err == nil && c.quiet
}
