//go:build unix

package permission

import (
	"syscall"
	"time"
)

// processCPU returns the user+system CPU time the process has used, so a
// benchmark on a shared machine can report throughput per CPU second.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
