//go:build !unix

package procs

import "time"

// ProcessCPU cannot be read here (ok false): Run leaves GOMAXPROCS alone.
func ProcessCPU() (time.Duration, bool) { return 0, false }
