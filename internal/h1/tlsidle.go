package h1

import (
	"errors"
	"net"
	"os"
	"time"
)

// recordTracker is the socket under a TLS connection as the TLS layer
// reads it: it follows the TLS record framing of what was read (a 5-byte
// header whose last two bytes are the length of what follows), so that it
// can tell whether the TLS layer holds part of a record it has not
// decrypted yet. It is used by one goroutine at a time (the TLS layer's
// reads are serialized).
type recordTracker struct {
	net.Conn
	left int     // bytes of the current record's body not read yet
	hdr  [5]byte // the current record's header, while it is read
	nhdr int     // bytes of hdr read
}

func (r *recordTracker) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	for b := p[:n]; len(b) > 0; {
		if r.left > 0 {
			k := min(r.left, len(b))
			r.left -= k
			b = b[k:]
			continue
		}
		k := copy(r.hdr[r.nhdr:], b)
		r.nhdr += k
		b = b[k:]
		if r.nhdr == len(r.hdr) {
			r.left, r.nhdr = int(r.hdr[3])<<8|int(r.hdr[4]), 0
		}
	}
	return n, err
}

// midRecord reports whether the bytes read so far end inside a record.
func (r *recordTracker) midRecord() bool { return r.left > 0 || r.nhdr > 0 }

// tlsQuiet reports whether a TLS connection whose answer was read to its
// end holds nothing more: no decrypted byte, no record read from the
// socket but not yet decrypted, whole or in part. The TLS layer reads from
// the socket as much as has arrived, so the bytes a server sent after its
// answer may sit there rather than in the kernel, out of alive's sight.
// It reads the connection with a deadline in the past, which processes
// the whole records held (handshake messages, such as session tickets,
// are consumed; data or an alert makes the connection unfit) and never
// reaches the socket.
func (c *conn) tlsQuiet() bool {
	if c.rec.midRecord() || c.nc.SetReadDeadline(aLongTimeAgo) != nil {
		return false
	}
	var p [1]byte
	n, err := c.tc.Read(p[:])
	if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) || c.rec.midRecord() {
		return false
	}
	return c.nc.SetReadDeadline(time.Time{}) == nil
}
