//go:build unix && !linux

package h1

import "syscall"

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
	ok := false
	var b [1]byte
	err := c.raw.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		ok = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK || err == syscall.EINTR
		return true
	})
	return ok && err == nil
}
