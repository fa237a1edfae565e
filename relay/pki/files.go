package pki

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

const (
	keyMode  fs.FileMode = 0o600
	certMode fs.FileMode = 0o644
	// dirMode keeps other users from listing a directory of private keys.
	dirMode fs.FileMode = 0o700
)

// writer writes files into dir and remembers the first error, so a sequence
// of puts reads as a list.
type writer struct {
	dir   string
	force bool
	files []string
	err   error
}

func (w *writer) put(name string, data []byte, mode fs.FileMode) {
	if w.err != nil {
		return
	}
	path := filepath.Join(w.dir, name)
	if err := writeFile(path, data, mode, w.force); err != nil {
		w.err = err
		return
	}
	w.files = append(w.files, path)
}

// writeFile writes data to path with exactly mode (whatever the umask), via
// a temporary file so that a reader never sees half a key. Without force it
// never replaces an existing file, even one created since the caller checked.
func writeFile(path string, data []byte, mode fs.FileMode, force bool) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return fmt.Errorf("create directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		// After a successful Link or Rename the name is gone or a second
		// link; removing it is right either way.
		if rmErr := os.Remove(tmp.Name()); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) && err == nil {
			err = fmt.Errorf("remove temporary file: %w", rmErr)
		}
	}()
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if force {
		if err := os.Rename(tmp.Name(), path); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		return nil
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("refusing to overwrite %s (--force replaces it): %w", path, fs.ErrExist)
		}
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
