package openaiapi

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/betcode-dev/betcode/agent/internal/confine"
)

// workdir is a session's working directory, the only tree the file tools
// touch. Paths are checked twice: lexically and after resolving the
// symlinks that exist (for a clear message to the model), then every file
// operation goes through an os.Root, which refuses what escapes the tree
// even if a symlink appears between the check and the use.
type workdir struct {
	dir  string   // absolute, as configured (the rules' cwd)
	real string   // dir with its symlinks resolved
	root *os.Root // opened on real
}

// errOutside is wrapped by the error of a path outside the working directory.
var errOutside = errors.New("outside the working directory")

func openWorkdir(dir string) (*workdir, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("working directory %q: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("working directory %q: %w", dir, err)
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("open working directory %q: %w", dir, err)
	}
	return &workdir{dir: abs, real: real, root: root}, nil
}

func (w *workdir) close() error { return w.root.Close() }

// abs returns p (relative to the working directory, or absolute) as a
// clean absolute path, without checking it.
func (w *workdir) abs(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(w.dir, p)
}

// resolve returns the name of p relative to the root, with every symlink
// that exists resolved, or an error wrapping errOutside when p lies outside
// the working directory, lexically or through a symlink.
func (w *workdir) resolve(p string) (string, error) {
	if p == "" {
		return "", errors.New("empty path")
	}
	if strings.ContainsRune(p, 0) {
		return "", errors.New("path contains a NUL byte")
	}
	abs := w.abs(p)
	if _, ok := confine.Rel(w.dir, abs); !ok {
		if _, ok := confine.Rel(w.real, abs); !ok {
			return "", fmt.Errorf("%s is %w %s", p, errOutside, w.dir)
		}
	}
	real, err := confine.ResolveExisting(abs)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", p, err)
	}
	rel, ok := confine.Rel(w.real, real)
	if !ok {
		return "", fmt.Errorf("%s resolves to %s, %w %s", p, real, errOutside, w.dir)
	}
	return rel, nil
}
