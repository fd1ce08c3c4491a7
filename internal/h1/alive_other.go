//go:build !unix

package h1

// peekable is false here: without a non-blocking peek at an idle socket,
// bytes a server sent unasked could be read as the next request's answer,
// so every request goes to the fallback (see RoundTrip).
const peekable = false

// aliveCheck holds nothing here.
type aliveCheck struct{}

// alive is never called here (see peekable).
func (c *conn) alive() bool { return false }
