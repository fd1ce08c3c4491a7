//go:build !unix

package procs

import "time"

// processCPU cannot be read here: Run leaves GOMAXPROCS alone.
func processCPU() (time.Duration, bool) { return 0, false }
