//go:build unix && !linux

package h1

import "syscall"

// aliveCheck is what a connection keeps for alive, so that a check
// allocates nothing: the function given to the socket, made once, and what
// it finds.
type aliveCheck struct {
	probe func(fd uintptr) bool
	buf   [1]byte
	open  bool
}

// alive reports whether an idle connection is still open and silent: a
// peek at its socket that must find nothing to read yet. A server that
// closed it (FIN, or a TLS alert before it) or sent anything unasked makes
// it unfit for the next request. One system call, no wait. (An idle
// connection holds no read buffer: what came after an answer was checked
// when it went idle.)
func (c *conn) alive() bool {
	if c.raw == nil {
		return true
	}
	if c.probe == nil {
		c.probe = func(fd uintptr) bool {
			_, _, err := syscall.Recvfrom(int(fd), c.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			c.open = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK || err == syscall.EINTR
			return true
		}
	}
	c.open = false
	err := c.raw.Read(c.probe)
	return c.open && err == nil
}
