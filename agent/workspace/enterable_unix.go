//go:build unix

package workspace

import "syscall"

// enterable tells whether the agent may list and enter a directory (a
// session's CLI needs both).
func enterable(dir string) bool {
	const rOK, xOK = 0x4, 0x1
	return syscall.Access(dir, rOK|xOK) == nil
}
