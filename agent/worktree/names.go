package worktree

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameBytes is the longest worktree name (or branch) accepted.
const MaxNameBytes = 200

// invalidError is a request the caller must fix.
type invalidError struct{ msg string }

func (e *invalidError) Error() string { return e.msg }

func invalidf(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}

// checkPathSafe refuses a name that could not be a path element below the
// worktrees directory: absolute, "..", control characters, invalid UTF-8,
// too long.
func checkPathSafe(what, s string) error {
	switch {
	case s == "":
		return invalidf("%s is empty", what)
	case len(s) > MaxNameBytes:
		return invalidf("%s is %d bytes long; the limit is %d", what, len(s), MaxNameBytes)
	case !utf8.ValidString(s):
		return invalidf("%s is not valid UTF-8", what)
	case filepath.IsAbs(s) || strings.HasPrefix(s, "/"):
		return invalidf("%s %q must not be an absolute path", what, s)
	case strings.HasPrefix(s, "-"):
		return invalidf("%s %q must not start with '-'", what, s)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return invalidf("%s %q contains a control character", what, s)
		}
	}
	for _, el := range strings.Split(s, "/") {
		if el == ".." || el == "." {
			return invalidf("%s %q must not contain %q", what, s, el)
		}
	}
	return nil
}

// checkRefName checks a branch or display name with path safety and then
// with `git check-ref-format --branch` (which needs no repository: it runs
// in "/").
func (g *git) checkRefName(ctx context.Context, what, s string) error {
	if err := checkPathSafe(what, s); err != nil {
		return err
	}
	if _, err := g.run(ctx, "/", "check-ref-format", "--branch", s); err != nil {
		if _, ok := err.(*gitError); ok {
			return invalidf("%s %q is not a valid git branch name (git check-ref-format)", what, s)
		}
		return err
	}
	return nil
}

// dirName is the directory a worktree of this name gets below the
// repository's worktrees directory: one path element.
func dirName(name string) string { return strings.ReplaceAll(name, "/", "-") }

// defaultPath is where a worktree named name goes: beside the repository
// at base, in <parent>/<repo>.worktrees/.
func defaultPath(base, name string) string {
	repo := strings.TrimSuffix(filepath.Base(base), ".git")
	if repo == "" {
		repo = "repo"
	}
	return filepath.Join(filepath.Dir(base), repo+".worktrees", dirName(name))
}

// checkTargetPath checks a path a client asked for.
func checkTargetPath(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", invalidf("path %q must be absolute", p)
	}
	if !utf8.ValidString(p) {
		return "", invalidf("path is not valid UTF-8")
	}
	for _, r := range p {
		if unicode.IsControl(r) {
			return "", invalidf("path %q contains a control character", p)
		}
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return "", invalidf("path %q must not contain \"..\"", p)
		}
	}
	return filepath.Clean(p), nil
}
