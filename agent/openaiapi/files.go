package openaiapi

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"
)

// Bounds of what the file tools read and return.
const (
	maxOutput     = 30_000  // bytes of a tool's output sent to the model and clients
	maxReadBytes  = 2 << 20 // bytes of a file Read or Edit loads
	defaultLines  = 2000    // lines Read returns without a limit
	maxGrepFiles  = 5000    // files Grep opens
	maxGrepHits   = 200     // matches Grep returns
	maxListShown  = 1000    // entries LS returns
	grepLineBytes = 500     // bytes of a matching line Grep shows
)

// readFile reads a file of the tree, refusing huge and binary ones.
func (w *workdir) readFile(rel string) ([]byte, error) {
	f, err := w.root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return nil, errors.New("is a directory (use LS)")
	}
	b, err := io.ReadAll(io.LimitReader(f, maxReadBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxReadBytes {
		return nil, fmt.Errorf("file is larger than %d bytes", maxReadBytes)
	}
	return b, nil
}

// read runs Read: the numbered lines [offset, offset+limit).
func (w *workdir) read(in *toolInput) (string, error) {
	rel, err := w.resolve(in.FilePath)
	if err != nil {
		return "", err
	}
	b, err := w.readFile(rel)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", in.FilePath, err)
	}
	if !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
		return "", fmt.Errorf("read %s: binary file (%d bytes)", in.FilePath, len(b))
	}
	if len(b) == 0 {
		return "(empty file)", nil
	}
	lines := strings.SplitAfter(string(b), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	first := max(in.Offset, 1)
	limit := in.Limit
	if limit <= 0 {
		limit = defaultLines
	}
	if first > len(lines) {
		return "", fmt.Errorf("read %s: offset %d is past its %d lines", in.FilePath, first, len(lines))
	}
	end := min(len(lines), first-1+limit)
	var sb strings.Builder
	for i := first - 1; i < end; i++ {
		fmt.Fprintf(&sb, "%6d\t%s", i+1, strings.TrimSuffix(lines[i], "\n")+"\n")
	}
	if end < len(lines) {
		fmt.Fprintf(&sb, "(%d more lines; read on with offset %d)\n", len(lines)-end, end+1)
	}
	return sb.String(), nil
}

// write runs Write.
func (w *workdir) write(in *toolInput) (string, error) {
	rel, err := w.resolve(in.FilePath)
	if err != nil {
		return "", err
	}
	if err := w.writeFile(rel, []byte(in.Content)); err != nil {
		return "", fmt.Errorf("write %s: %w", in.FilePath, err)
	}
	return fmt.Sprintf("Wrote %d bytes to %s", len(in.Content), in.FilePath), nil
}

// writeFile creates or replaces rel, keeping the mode of a file it
// replaces, and creates its parent directories.
func (w *workdir) writeFile(rel string, data []byte) error {
	if dir := filepath.Dir(rel); dir != "." {
		if err := w.root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	mode := fs.FileMode(0o644)
	if st, err := w.root.Stat(rel); err == nil {
		if st.IsDir() {
			return errors.New("is a directory")
		}
		mode = st.Mode().Perm()
	}
	return w.root.WriteFile(rel, data, mode)
}

// edit runs Edit.
func (w *workdir) edit(in *toolInput) (string, error) {
	rel, err := w.resolve(in.FilePath)
	if err != nil {
		return "", err
	}
	b, err := w.readFile(rel)
	if in.OldString == "" {
		if err == nil && len(b) > 0 {
			return "", fmt.Errorf("edit %s: the file exists; old_string must not be empty", in.FilePath)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("edit %s: %w", in.FilePath, err)
		}
		if err := w.writeFile(rel, []byte(in.NewString)); err != nil {
			return "", fmt.Errorf("edit %s: %w", in.FilePath, err)
		}
		return "Created " + in.FilePath, nil
	}
	if err != nil {
		return "", fmt.Errorf("edit %s: %w", in.FilePath, err)
	}
	s := string(b)
	n := strings.Count(s, in.OldString)
	switch {
	case n == 0:
		return "", fmt.Errorf("edit %s: old_string not found", in.FilePath)
	case n > 1 && !in.ReplaceAll:
		return "", fmt.Errorf("edit %s: old_string occurs %d times; make it unique or set replace_all", in.FilePath, n)
	}
	if in.ReplaceAll {
		s = strings.ReplaceAll(s, in.OldString, in.NewString)
	} else {
		s = strings.Replace(s, in.OldString, in.NewString, 1)
		n = 1
	}
	if err := w.writeFile(rel, []byte(s)); err != nil {
		return "", fmt.Errorf("edit %s: %w", in.FilePath, err)
	}
	return fmt.Sprintf("Replaced %d occurrence(s) in %s", n, in.FilePath), nil
}

// list runs LS.
func (w *workdir) list(in *toolInput) (string, error) {
	p := in.path(ToolLS)
	rel, err := w.resolve(p)
	if err != nil {
		return "", err
	}
	f, err := w.root.Open(rel)
	if err != nil {
		return "", fmt.Errorf("list %s: %w", p, err)
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return "", fmt.Errorf("list %s: %w", p, err)
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		name := e.Name()
		switch {
		case e.IsDir():
			name += "/"
		case e.Type()&fs.ModeSymlink != 0:
			name += "@"
		}
		names = append(names, name)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "(empty directory)", nil
	}
	more := ""
	if len(names) > maxListShown {
		more = fmt.Sprintf("\n(%d more entries)", len(names)-maxListShown)
		names = names[:maxListShown]
	}
	return strings.Join(names, "\n") + more, nil
}

// skipDirs are not searched.
var skipDirs = map[string]bool{".git": true, "node_modules": true, ".hg": true, ".svn": true}

// grep runs Grep: path:line:text for each line matching the pattern.
func (w *workdir) grep(in *toolInput) (string, error) {
	re, err := regexp.Compile(in.Pattern)
	if err != nil {
		return "", fmt.Errorf("bad pattern: %w", err)
	}
	p := in.path(ToolGrep)
	rel, err := w.resolve(p)
	if err != nil {
		return "", err
	}
	fsys := w.root.FS()
	name := filepath.ToSlash(rel)
	var hits []string
	files := 0
	walkErr := fs.WalkDir(fsys, name, func(fp string, d fs.DirEntry, err error) error {
		if err != nil {
			if fp == name {
				return err
			}
			return nil // unreadable entries are skipped
		}
		if d.IsDir() {
			if fp != name && skipDirs[d.Name()] {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if files++; files > maxGrepFiles || len(hits) >= maxGrepHits {
			return fs.SkipAll
		}
		hits = grepFile(fsys, fp, re, hits)
		return nil
	})
	if walkErr != nil {
		return "", fmt.Errorf("search %s: %w", p, walkErr)
	}
	if len(hits) == 0 {
		return "No matches.", nil
	}
	out := strings.Join(hits, "\n")
	if len(hits) >= maxGrepHits || files > maxGrepFiles {
		out += "\n(search stopped early; narrow the pattern or the path)"
	}
	return out, nil
}

// grepFile appends the matching lines of one text file.
func grepFile(fsys fs.FS, name string, re *regexp.Regexp, hits []string) []string {
	f, err := fsys.Open(name)
	if err != nil {
		return hits
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, maxReadBytes))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan() && len(hits) < maxGrepHits; n++ {
		line := sc.Bytes()
		if bytes.IndexByte(line, 0) >= 0 {
			return hits // binary
		}
		if re.Match(line) {
			text := string(line)
			if len(text) > grepLineBytes {
				text = text[:grepLineBytes] + "…"
			}
			hits = append(hits, fmt.Sprintf("%s:%d:%s", path.Clean(name), n, text))
		}
	}
	return hits
}

// bound cuts s to maxOutput bytes, keeping its head and tail.
func bound(s string) string {
	if len(s) <= maxOutput {
		return s
	}
	head, tail := s[:maxOutput*2/3], s[len(s)-maxOutput/3:]
	head = strings.ToValidUTF8(head, "")
	tail = strings.ToValidUTF8(tail, "")
	return fmt.Sprintf("%s\n… (%d bytes cut) …\n%s", head, len(s)-len(head)-len(tail), tail)
}
