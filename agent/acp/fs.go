package acp

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/betcode-dev/betcode/agent/internal/confine"
)

// maxReadBytes bounds fs/read_text_file: a bigger file is refused rather
// than sent whole over the agent's stdin.
const maxReadBytes = 8 << 20

// errOutside is returned for paths outside the session's working directory.
var errOutside = errors.New("outside the session's working directory")

// within returns p (absolute, or relative to dir) relative to dir, or an
// error wrapping errOutside when it lies outside dir. The check is
// lexical (after cleaning ".."); symlinks are resolved by os.Root when the
// path is opened, which refuses any that lead outside.
func within(dir, p string) (string, error) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	p = filepath.Clean(p)
	bases := []string{filepath.Clean(dir)}
	if real, err := filepath.EvalSymlinks(dir); err == nil && real != bases[0] {
		bases = append(bases, real)
	}
	for _, base := range bases {
		if rel, ok := confine.Rel(base, p); ok {
			return rel, nil
		}
	}
	return "", fmt.Errorf("%s: %w", p, errOutside)
}

// inside reports whether p lies inside dir once symlinks are resolved (as
// far as p exists).
func inside(dir, p string) bool {
	rel, err := within(dir, p)
	if err != nil {
		return false
	}
	real, err := filepath.EvalSymlinks(filepath.Join(dir, rel))
	if err != nil {
		// Missing: reading it fails anyway; anything else: refuse.
		return errors.Is(err, fs.ErrNotExist)
	}
	_, err = within(dir, real)
	return err == nil
}

// fsError is the JSON-RPC error of a refused or failed file request.
func fsError(op, path string, err error) error {
	return acpsdk.NewInvalidParams(map[string]any{"error": fmt.Sprintf("%s %s: %v", op, path, err)})
}

// readTextFile serves fs/read_text_file inside dir: the file's text, from
// line (1-based) for limit lines when they are set.
func readTextFile(dir string, req acpsdk.ReadTextFileRequest) (acpsdk.ReadTextFileResponse, error) {
	rel, err := within(dir, req.Path)
	if err != nil {
		return acpsdk.ReadTextFileResponse{}, fsError("read", req.Path, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return acpsdk.ReadTextFileResponse{}, fsError("read", req.Path, err)
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		return acpsdk.ReadTextFileResponse{}, fsError("read", req.Path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxReadBytes+1))
	if err != nil {
		return acpsdk.ReadTextFileResponse{}, fsError("read", req.Path, err)
	}
	if len(b) > maxReadBytes {
		return acpsdk.ReadTextFileResponse{}, fsError("read", req.Path, fmt.Errorf("larger than %d bytes", maxReadBytes))
	}
	return acpsdk.ReadTextFileResponse{Content: lines(string(b), req.Line, req.Limit)}, nil
}

// lines returns limit lines of s from line (1-based); nil means all.
func lines(s string, line, limit *int) string {
	if line == nil && limit == nil {
		return s
	}
	parts := strings.SplitAfter(s, "\n")
	start := 0
	if line != nil && *line > 1 {
		start = min(*line-1, len(parts))
	}
	end := len(parts)
	if limit != nil && *limit >= 0 && start+*limit < end {
		end = start + *limit
	}
	return strings.Join(parts[start:end], "")
}

// writeTextFile serves fs/write_text_file inside dir, creating the file
// and its parent directories.
func writeTextFile(dir string, req acpsdk.WriteTextFileRequest) (acpsdk.WriteTextFileResponse, error) {
	rel, err := within(dir, req.Path)
	if err != nil {
		return acpsdk.WriteTextFileResponse{}, fsError("write", req.Path, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return acpsdk.WriteTextFileResponse{}, fsError("write", req.Path, err)
	}
	defer root.Close()
	if d := filepath.Dir(rel); d != "." {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return acpsdk.WriteTextFileResponse{}, fsError("write", req.Path, err)
		}
	}
	if err := root.WriteFile(rel, []byte(req.Content), 0o644); err != nil {
		return acpsdk.WriteTextFileResponse{}, fsError("write", req.Path, err)
	}
	return acpsdk.WriteTextFileResponse{}, nil
}
