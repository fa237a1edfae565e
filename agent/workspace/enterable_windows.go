//go:build windows

package workspace

import (
	"errors"
	"io"
	"os"
)

// enterable tells whether the agent may list a directory (Windows has no
// separate permission to enter one).
func enterable(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	return err == nil || errors.Is(err, io.EOF)
}
