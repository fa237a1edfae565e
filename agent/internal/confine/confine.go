// Package confine keeps file paths inside a directory: the lexical check
// (is a path the directory or below it) and the resolution of the symlinks
// of the part of a path that exists, which the agent's file-serving code
// (the workspace service, the OpenAI API provider's tools, the ACP
// provider's fs and terminal requests) combine before it opens anything
// through an os.Root.
package confine

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
)

// Rel returns p relative to dir and whether p is dir or below it. Both
// are compared lexically, as given: callers pass clean absolute paths (or
// resolve them first with ResolveExisting).
func Rel(dir, p string) (string, bool) {
	rel, err := filepath.Rel(dir, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", false
	}
	return rel, true
}

// ResolveExisting resolves the symlinks of the longest prefix of p that
// exists and appends the rest unresolved: a file about to be created (or a
// deleted one) resolves through its existing parents. It fails with an
// error other than fs.ErrNotExist from resolving, or when nothing of p
// exists.
func ResolveExisting(p string) (string, error) {
	var rest []string
	for {
		real, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(append([]string{real}, rest...)...), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", err
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}
