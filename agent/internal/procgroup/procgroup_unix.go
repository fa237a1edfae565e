//go:build unix

package procgroup

import (
	"os"
	"syscall"
)

// Attr is the SysProcAttr that starts a child as the leader of a new
// process group.
func Attr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// Signal sends sig to p's process group (p started with Attr).
func Signal(p *os.Process, sig syscall.Signal) error { return syscall.Kill(-p.Pid, sig) }
