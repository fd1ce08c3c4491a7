//go:build !unix

package sqstest

// lockFile does nothing where flock is missing: concurrent test binaries
// may then race on the first npm install.
func lockFile(string) (unlock func(), err error) { return func() {}, nil }
