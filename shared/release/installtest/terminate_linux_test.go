package installtest

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// terminate sends SIGTERM to pid, a process that is not the test's child
// (the agent install.sh started in the background, so Wait cannot see it
// end), and waits up to d for its exit through a pidfd, which turns readable
// when the process exits; then SIGKILL. The pidfd, opened first, keeps a
// reused pid from being signalled.
func terminate(t *testing.T, pid int, d time.Duration) {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return // gone already
	}
	if err != nil { // a kernel before 5.3
		t.Logf("pidfd_open(%d): %v: SIGTERM without waiting for the exit", pid, err)
		_ = unix.Kill(pid, unix.SIGTERM)
		return
	}
	defer unix.Close(fd)
	if unix.PidfdSendSignal(fd, unix.SIGTERM, nil, 0) != nil {
		return
	}
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(left.Milliseconds())+1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			t.Logf("poll the agent's pidfd (pid %d): %v", pid, err)
			break
		}
		if n > 0 {
			return
		}
	}
	_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	t.Logf("the agent (pid %d) ignored SIGTERM for %s: killed", pid, d)
}
