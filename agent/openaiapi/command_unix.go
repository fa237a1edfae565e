//go:build unix

package openaiapi

import (
	"os/exec"
	"syscall"
)

// setProcessGroup starts cmd in its own process group and makes its
// cancellation kill the whole group, so that what the command started
// dies with it.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
