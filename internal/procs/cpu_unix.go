//go:build unix

package procs

import (
	"syscall"
	"time"
)

// ProcessCPU is the process's user and system CPU time so far (all its
// threads); ok is false where it cannot be read.
func ProcessCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
