//go:build !unix

package openaiapi

import "os/exec"

// setProcessGroup leaves cmd as it is: only the command itself is killed.
func setProcessGroup(*exec.Cmd) {}
