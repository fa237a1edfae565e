//go:build !linux

package installtest

import (
	"syscall"
	"testing"
	"time"
)

// terminate sends SIGTERM to pid. The tests that start an agent make a
// user with useradd and run on Linux, where terminate also waits for the
// exit (terminate_linux_test.go).
func terminate(_ *testing.T, pid int, _ time.Duration) {
	_ = syscall.Kill(pid, syscall.SIGTERM)
}
