package permission

import (
	"path"
	"strings"
)

// Tool families: Claude Code applies Edit rules to every built-in tool that
// edits files and (best effort) Read rules to every one that reads them.
var (
	editFamily = []string{"Edit", "Write", "MultiEdit", "NotebookEdit"}
	readFamily = []string{"Read", "Glob", "Grep", "LS", "NotebookRead"}
)

// pathTools are the tools whose Claude rules take a path specifier.
var pathTools = map[string]bool{
	"Read": true, "Edit": true, "Write": true, "MultiEdit": true,
	"NotebookEdit": true, "NotebookRead": true, "Glob": true, "Grep": true, "LS": true,
}

func family(tool string) []string {
	switch tool {
	case "Edit":
		return editFamily
	case "Read":
		return readFamily
	}
	return nil
}

// pathOf returns the clean absolute path a call touches. Search tools
// without a "path" search the working directory.
func pathOf(tool string, input map[string]any, cwd string) (string, bool) {
	p := rawPath(tool, input)
	if p == "" && (tool == "Glob" || tool == "Grep" || tool == "LS") {
		p = cwd
	}
	switch {
	case p == "":
		return "", false
	case p[0] == '/':
		return path.Clean(p), true
	case cwd == "":
		return "", false
	}
	return path.Join(cwd, p), true
}

// rawPath returns the path field of the call's input as written.
func rawPath(tool string, input map[string]any) string {
	switch tool {
	case "Read", "Edit", "Write", "MultiEdit":
		return str(input, "file_path")
	case "NotebookEdit", "NotebookRead":
		return str(input, "notebook_path")
	case "Glob", "Grep", "LS":
		return str(input, "path")
	}
	for _, k := range [...]string{"file_path", "notebook_path", "path"} {
		if p := str(input, k); p != "" {
			return p
		}
	}
	return ""
}

func str(input map[string]any, key string) string {
	s, _ := input[key].(string)
	return s
}

// cleanDir returns d cleaned if it is absolute, else "".
func cleanDir(d string) string {
	if d == "" || d[0] != '/' {
		return ""
	}
	return path.Clean(d)
}

// hostOf returns the host of an http(s) URL, without port or user info.
func hostOf(u string) string {
	i := strings.Index(u, "://")
	if i < 0 {
		return ""
	}
	h := u[i+3:]
	if j := strings.IndexAny(h, "/?#"); j >= 0 {
		h = h[:j]
	}
	if j := strings.LastIndexByte(h, '@'); j >= 0 {
		h = h[j+1:]
	}
	if strings.HasPrefix(h, "[") { // IPv6 literal
		if j := strings.IndexByte(h, ']'); j >= 0 {
			return h[:j+1]
		}
		return h
	}
	if j := strings.IndexByte(h, ':'); j >= 0 {
		h = h[:j]
	}
	return strings.TrimSuffix(h, ".")
}

// asciiLower lowers ASCII letters only; hosts compare with EqualFold, and
// Unicode lowering can change a string's length.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
