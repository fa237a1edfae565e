//go:build windows

package procgroup

import (
	"os"
	"syscall"
)

// Attr is the SysProcAttr that starts a child in a new process group.
func Attr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}

// Signal ends p: Windows delivers no SIGTERM to another process, so every
// signal kills it.
func Signal(p *os.Process, _ syscall.Signal) error { return p.Kill() }
