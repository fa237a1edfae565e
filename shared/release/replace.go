package release

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// PreviousSuffix is added to a replaced binary's name: the old one stays
// beside the new one for a rollback (mv betcode-agent.previous betcode-agent).
const PreviousSuffix = ".previous"

// Replace puts data in place of the executable at exe atomically: it is
// written beside exe, synced and renamed over it, so exe is at every moment
// either the old binary or the whole new one. The old binary is kept as
// exe+PreviousSuffix (a hard link, replacing an older one).
func Replace(exe string, data []byte) error {
	dir := filepath.Dir(exe)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(exe)+".new-*")
	if err != nil {
		return fmt.Errorf("write the new binary beside %s: %w", exe, err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		return fmt.Errorf("chmod %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	prev := exe + PreviousSuffix
	if err := os.Remove(prev); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the older %s: %w", prev, err)
	}
	if err := os.Link(exe, prev); err != nil {
		return fmt.Errorf("keep the current binary as %s: %w", prev, err)
	}
	if err := os.Rename(tmp.Name(), exe); err != nil {
		return fmt.Errorf("replace %s: %w", exe, err)
	}
	done = true
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // the rename survives a crash
		d.Close()
	}
	return nil
}
