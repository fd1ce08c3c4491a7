//go:build linux

package h1

import (
	"syscall"
	"unsafe"
)

// tcpEstablished is Linux's TCP_ESTABLISHED state (include/net/tcp_states.h).
const tcpEstablished = 1

// aliveCheck is what a connection keeps for alive, so that a check
// allocates nothing: the function given to the socket, made once, and what
// it reads.
type aliveCheck struct {
	probe func(fd uintptr)
	info  [8]byte // the head of struct tcp_info: tcpi_state first
	state int
}

// alive reports whether an idle connection is still open: its socket's
// TCP state, read with getsockopt(TCP_INFO), must still be ESTABLISHED. A
// server that closed it (FIN: CLOSE_WAIT) or reset it makes it unfit for
// the next request. One system call that neither waits nor, unlike a peek
// at the socket, makes the kernel send anything. (An idle connection holds
// no read buffer: what came after an answer was checked when it went idle.)
func (c *conn) alive() bool {
	if c.raw == nil {
		return true
	}
	if c.probe == nil {
		c.probe = func(fd uintptr) {
			size := uint32(len(c.info))
			_, _, errno := syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, syscall.IPPROTO_TCP, syscall.TCP_INFO,
				uintptr(unsafe.Pointer(&c.info[0])), uintptr(unsafe.Pointer(&size)), 0)
			if errno == 0 && size >= 1 {
				c.state = int(c.info[0])
			}
		}
	}
	c.state = -1
	err := c.raw.Control(c.probe)
	return err == nil && c.state == tcpEstablished
}
