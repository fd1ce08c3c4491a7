//go:build !unix

package h1

// aliveCheck holds nothing here.
type aliveCheck struct{}

// alive reports whether an idle connection may be reused. Without a
// non-blocking peek here, a connection the server closed is found out by
// the request written to it (see RoundTrip's retry rule).
func (c *conn) alive() bool { return true }
