package workspace

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/codes"

	"github.com/betcode-dev/betcode/agent/internal/confine"
	"github.com/betcode-dev/betcode/agent/server"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// File statuses of a FileChange.
const (
	StatusModified   = "modified"
	StatusAdded      = "added"
	StatusDeleted    = "deleted"
	StatusRenamed    = "renamed"
	StatusUntracked  = "untracked"
	StatusConflicted = "conflicted"
)

// bigFile is the size from which git treats a file as binary
// (core.bigFileThreshold's default); untracked files that large are
// reported as binary rather than read for their line count.
const bigFile = 512 << 20

// GetChanges is `git status` of the work tree that holds the session's
// working directory, with each file's line counts against HEAD (against the
// empty tree before the first commit).
func (s *Service) GetChanges(ctx context.Context, req *pb.GetChangesRequest) (*pb.GetChangesResponse, error) {
	_, root, ok, err := s.workTree(ctx, req.SessionId, req.WorkingDirectory)
	if err != nil {
		return nil, err
	}
	if !ok {
		return &pb.GetChangesResponse{}, nil
	}
	// The status and the line counts are independent: run them side by
	// side, and always wait, so that no git outlives the call.
	countsc := make(chan counts, 1)
	go func() { countsc <- s.numstat(ctx, root, "HEAD") }()
	out, truncated, err := s.git.run(ctx, root, maxStatusBytes, nil, statusArgs()...)
	c := <-countsc
	if err != nil {
		return nil, s.gitErr(err)
	}
	st, err := parseStatus(wholeRecords(out, truncated))
	if err != nil {
		return nil, s.internal("parse git status", err)
	}
	if st.Initial { // no HEAD to compare with
		c = s.numstat(ctx, root, "")
	}
	if c.err != nil {
		return nil, c.err
	}
	resp := &pb.GetChangesResponse{IsGitRepo: true, Branch: validUTF8(st.Branch), Root: validUTF8(root), Truncated: truncated}
	entries := st.Entries
	slices.SortFunc(entries, func(a, b statusEntry) int { return strings.Compare(a.Path, b.Path) })
	if len(entries) > MaxChanges {
		entries, resp.Truncated = entries[:MaxChanges], true
	}
	var buf []byte
	for _, e := range entries {
		fc := fileChange(e)
		if e.Kind == '?' {
			if buf == nil {
				buf = make([]byte, 32<<10)
			}
			fc.Additions, fc.Binary = countLines(ctx, filepath.Join(root, e.Path), buf)
		} else if n, ok := c.m[e.Path]; ok {
			fc.Additions, fc.Deletions, fc.Binary = n.Added, n.Deleted, n.Binary
		}
		resp.Files = append(resp.Files, fc)
	}
	return resp, nil
}

// counts are the line counts of the tracked files, by path.
type counts struct {
	m   map[string]numstat
	err error // a status error
}

// numstat runs `git diff --numstat` of the work tree against base, or
// against the empty tree when base is "".
func (s *Service) numstat(ctx context.Context, root, base string) counts {
	if base == "" {
		var err error
		if base, err = s.git.emptyTree(ctx, root); err != nil {
			return counts{err: s.gitErr(err)}
		}
	}
	args := append(append([]string{"diff", "--numstat", "-z"}, diffFlags...), base)
	out, truncated, err := s.git.run(ctx, root, maxStatusBytes, nil, args...)
	if err != nil {
		return counts{err: s.gitErr(err)}
	}
	m, err := parseNumstat(wholeRecords(out, truncated))
	if err != nil {
		return counts{err: s.internal("parse git diff --numstat", err)}
	}
	return counts{m: m}
}

// wholeRecords drops the record a size limit cut (records end in NUL).
func wholeRecords(out []byte, truncated bool) []byte {
	if truncated {
		out = out[:bytes.LastIndexByte(out, 0)+1]
	}
	return out
}

// fileChange maps a status record to a FileChange without counts. Staged
// is true when the index differs from HEAD, that is when some or all of the
// change is staged.
func fileChange(e statusEntry) *pb.FileChange {
	fc := &pb.FileChange{Path: validUTF8(e.Path)}
	x, y := e.XY[0], e.XY[1]
	switch e.Kind {
	case '?':
		fc.Status = StatusUntracked
		return fc
	case 'u':
		fc.Status = StatusConflicted
		return fc
	case '2':
		fc.OldPath = validUTF8(e.OrigPath)
		fc.Status = StatusRenamed
		if x == 'C' {
			fc.Status = StatusAdded // a copy: the old file is still there
		}
	case '1':
		switch {
		case x == 'A':
			fc.Status = StatusAdded
		case x == 'D' || y == 'D':
			fc.Status = StatusDeleted
		default:
			fc.Status = StatusModified
		}
	}
	fc.Staged = x != '.'
	return fc
}

// countLines counts the lines of an untracked file as git's numstat would
// against /dev/null, and tells whether git would call it binary (a NUL in
// its first 8000 bytes, or larger than bigFile). Only regular files are
// read: a symlink could lead out of the work tree and a FIFO would block.
// buf is scratch space of at least 8000 bytes.
func countLines(ctx context.Context, path string, buf []byte) (lines uint32, binary bool) {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0, false
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return 1, false // git diffs a symlink as one line: its target
	}
	if !fi.Mode().IsRegular() || fi.Size() == 0 {
		return 0, false
	}
	if fi.Size() > bigFile {
		return 0, true
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	var n, read uint64
	var last byte
	for ctx.Err() == nil {
		k, err := f.Read(buf)
		if k > 0 {
			if read < 8000 && bytes.IndexByte(buf[:min(k, 8000-int(read))], 0) >= 0 {
				return 0, true
			}
			read += uint64(k)
			n += uint64(bytes.Count(buf[:k], []byte{'\n'}))
			last = buf[k-1]
		}
		if err != nil {
			break
		}
	}
	if read > 0 && last != '\n' {
		n++ // an unterminated last line counts too
	}
	return uint32(min(n, uint64(^uint32(0)))), false
}

// GetFileDiff is the unified diff of one file against HEAD (an untracked
// file against an empty one). The path must be relative to the work tree's
// top and stay inside it, symlinks followed.
func (s *Service) GetFileDiff(ctx context.Context, req *pb.GetFileDiffRequest) (*pb.GetFileDiffResponse, error) {
	dir, root, ok, err := s.workTree(ctx, req.SessionId, req.WorkingDirectory)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, server.Status(codes.InvalidArgument, server.CodeInvalidArgument, dir+" is not in a git work tree")
	}
	rel, err := insideTree(root, req.Path)
	if err != nil {
		return nil, server.Status(codes.InvalidArgument, server.CodeInvalidArgument, "path "+quote(req.Path)+": "+err.Error())
	}
	// A directory's pathspec would diff everything under it; a submodule
	// (its own .git) is the one directory with a diff of its own.
	if fi, err := os.Lstat(filepath.Join(root, rel)); err == nil && fi.IsDir() && !exists(filepath.Join(root, rel, ".git")) {
		return nil, server.Status(codes.InvalidArgument, server.CodeInvalidArgument, "path "+quote(req.Path)+" is a directory: name a file")
	}
	out, _, err := s.git.run(ctx, root, 0, nil, statusArgs(rel)...)
	if err != nil {
		return nil, s.gitErr(err)
	}
	st, err := parseStatus(out)
	if err != nil {
		return nil, s.internal("parse git status", err)
	}
	var args []string
	var okCodes []int
	if slices.ContainsFunc(st.Entries, func(e statusEntry) bool { return e.Kind == '?' && e.Path == rel }) {
		// Only a path git itself lists as untracked is read this way, so
		// ignored files and .git/ never are.
		args = append(append([]string{"diff", "--no-index"}, diffFlags...), "--", "/dev/null", rel)
		okCodes = []int{1} // --no-index exits 1 when the files differ
	} else {
		base := "HEAD"
		if st.Initial {
			if base, err = s.git.emptyTree(ctx, root); err != nil {
				return nil, s.gitErr(err)
			}
		}
		args = append(append([]string{"diff"}, diffFlags...), base, "--", rel)
	}
	out, truncated, err := s.git.run(ctx, root, MaxDiffBytes, okCodes, args...)
	if err != nil {
		return nil, s.gitErr(err)
	}
	resp := &pb.GetFileDiffResponse{Path: validUTF8(rel)}
	if isBinaryDiff(out) {
		resp.Binary = true
		return resp, nil
	}
	if truncated {
		resp.Truncated = true
		if i := bytes.LastIndexByte(out, '\n'); i >= 0 {
			out = out[:i+1] // end on a whole line
		}
	}
	resp.Diff = validUTF8(string(out))
	return resp, nil
}

// insideTree checks a request path against the work tree at root and
// returns it cleaned. It must be relative, must not climb with "..", and
// once symlinks are resolved (as far as the path exists) must still be
// inside the tree: `git diff --no-index` would follow a symlinked directory
// out of it.
func insideTree(root, p string) (string, error) {
	switch {
	case p == "":
		return "", errors.New("is required")
	case strings.ContainsRune(p, 0):
		return "", errors.New("must not contain NUL")
	case filepath.IsAbs(p):
		return "", errors.New("must be relative to the work tree")
	case slices.Contains(strings.Split(filepath.ToSlash(p), "/"), ".."):
		return "", errors.New(`must not contain ".."`)
	}
	rel := filepath.Clean(p)
	if !filepath.IsLocal(rel) || rel == "." {
		return "", errors.New("must name a file inside the work tree")
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	real, err := confine.ResolveExisting(filepath.Join(root, rel))
	if err != nil {
		return "", err
	}
	if _, in := confine.Rel(realRoot, real); !in {
		return "", errors.New("leads out of the work tree through a symlink")
	}
	return filepath.ToSlash(rel), nil
}

// isBinaryDiff tells whether git reported a binary difference instead of
// text hunks: "Binary files a/x and b/x differ" before any hunk.
func isBinaryDiff(out []byte) bool {
	for len(out) > 0 {
		line := out
		if i := bytes.IndexByte(out, '\n'); i >= 0 {
			line, out = out[:i], out[i+1:]
		} else {
			out = nil
		}
		if bytes.HasPrefix(line, []byte("@@")) {
			return false
		}
		if bytes.HasPrefix(line, []byte("Binary files ")) && bytes.HasSuffix(line, []byte(" differ")) {
			return true
		}
	}
	return false
}

// validUTF8 makes s fit a protobuf string: git and file names may carry
// bytes of other encodings, which would fail the whole response.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func quote(s string) string { return strconv.Quote(s) }
