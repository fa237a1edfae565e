package workspace

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc/codes"

	"github.com/betcode-dev/betcode/agent/server"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

func TestGetFileDiff(t *testing.T) {
	dir, _ := changedRepo(t)
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "secret.txt"), "top secret\n")
	symlink(t, filepath.Join(outside, "secret.txt"), filepath.Join(dir, "leak"))
	symlink(t, outside, filepath.Join(dir, "leakdir"))
	symlink(t, "../..", filepath.Join(dir, "sub", "up"))
	symlink(t, "modified.txt", filepath.Join(dir, "inner-link"))
	writeFile(t, filepath.Join(dir, ".gitignore"), "*.log\n")
	writeFile(t, filepath.Join(dir, "ignored.log"), "private\n")
	writeFile(t, filepath.Join(dir, "latin1.txt"), "caf\xe9\n")
	writeFile(t, filepath.Join(dir, "*.txt"), "a file named like a glob\n")
	s := newService(t, t.TempDir(), nil)

	tests := []struct {
		name        string
		path        string
		wantBinary  bool
		wantDiff    []string // substrings, in order
		wantEmpty   bool
		wantCode    codes.Code
		wantErrText string
	}{
		{name: "modified, not staged", path: "modified.txt", wantDiff: []string{"diff --git a/modified.txt b/modified.txt", "-b\n", "+B\n", "+d\n"}},
		{name: "staged", path: "staged.txt", wantDiff: []string{" one\n", "+two\n"}},
		{name: "added", path: "added.txt", wantDiff: []string{"new file mode", "+n1\n+n2\n+n3\n"}},
		{name: "deleted, staged", path: "deleted.txt", wantDiff: []string{"deleted file mode", "-gone\n-gone\n"}},
		{name: "deleted in the work tree", path: "removed.txt", wantDiff: []string{"deleted file mode", "-x\n"}},
		{name: "renamed: its new path", path: "new name.txt", wantDiff: []string{"new name.txt", "+renamed line 0\n"}},
		{name: "in a subdirectory", path: "sub/dir/deep.txt", wantDiff: []string{"-deep\n", "+deeper\n"}},
		{name: "not clean, cleaned", path: "sub/./dir//deep.txt", wantDiff: []string{"-deep\n"}},
		{name: "non-ASCII name", path: "ünï cödé.txt", wantDiff: []string{"a/ünï cödé.txt", "+2\n"}},
		{name: "untracked", path: "untracked.txt", wantDiff: []string{"new file mode", "+u1\n+u2\n\\ No newline at end of file"}},
		{name: "untracked in a new directory", path: "new dir/nested/file.txt", wantDiff: []string{"+n\n"}},
		{name: "untracked, not UTF-8", path: "latin1.txt", wantDiff: []string{"+caf\uFFFD\n"}},
		{name: "untracked symlink inside the tree", path: "inner-link", wantDiff: []string{"new file mode 120000", "+modified.txt"}},
		{name: "a glob is a name", path: "*.txt", wantDiff: []string{"+a file named like a glob\n"}},
		{name: "binary, tracked", path: "image.bin", wantBinary: true},
		{name: "binary, untracked", path: "untracked.bin", wantBinary: true},
		{name: "unchanged", path: "unchanged.txt", wantEmpty: true},
		{name: "dot-dot, even staying inside", path: "sub/../modified.txt", wantCode: codes.InvalidArgument, wantErrText: `".."`},
		{name: "missing file", path: "no/such/file", wantEmpty: true},
		{name: "ignored file is not shown", path: "ignored.log", wantEmpty: true},
		{name: ".git is not shown", path: ".git/config", wantEmpty: true},
		{name: "parent", path: "../x", wantCode: codes.InvalidArgument, wantErrText: `".."`},
		{name: "parent after a name", path: "sub/../../x", wantCode: codes.InvalidArgument, wantErrText: `".."`},
		{name: "absolute", path: "/etc/passwd", wantCode: codes.InvalidArgument, wantErrText: "relative"},
		{name: "absolute into the tree", path: filepath.Join(dir, "modified.txt"), wantCode: codes.InvalidArgument, wantErrText: "relative"},
		{name: "empty", path: "", wantCode: codes.InvalidArgument, wantErrText: "required"},
		{name: "the top itself", path: ".", wantCode: codes.InvalidArgument},
		{name: "a directory", path: "sub/dir", wantCode: codes.InvalidArgument, wantErrText: "is a directory"},
		{name: "NUL", path: "modified.txt\x00", wantCode: codes.InvalidArgument},
		{name: "symlink to a file outside", path: "leak", wantCode: codes.InvalidArgument, wantErrText: "symlink"},
		{name: "through a symlinked directory outside", path: "leakdir/secret.txt", wantCode: codes.InvalidArgument, wantErrText: "symlink"},
		{name: "through a symlink to a missing file outside", path: "leakdir/not-yet", wantCode: codes.InvalidArgument, wantErrText: "symlink"},
		{name: "through a symlink climbing out", path: "sub/up/etc/passwd", wantCode: codes.InvalidArgument, wantErrText: "symlink"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := s.GetFileDiff(t.Context(), &pb.GetFileDiffRequest{WorkingDirectory: dir, Path: tc.path})
			if tc.wantCode != codes.OK {
				wantStatus(t, err, tc.wantCode, server.CodeInvalidArgument)
				if !strings.Contains(err.Error(), tc.wantErrText) {
					t.Fatalf("error %q does not say %q", err, tc.wantErrText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.Binary != tc.wantBinary || resp.Truncated || !utf8.ValidString(resp.Diff) {
				t.Fatalf("binary=%v truncated=%v diff:\n%s", resp.Binary, resp.Truncated, resp.Diff)
			}
			if (tc.wantBinary || tc.wantEmpty) && resp.Diff != "" {
				t.Fatalf("diff = %q, want none", resp.Diff)
			}
			rest := resp.Diff
			for _, w := range tc.wantDiff {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("diff lacks %q (in order):\n%s", w, resp.Diff)
				}
				rest = rest[i+len(w):]
			}
			if strings.Contains(resp.Diff, "top secret") || strings.Contains(resp.Diff, "private") {
				t.Fatalf("diff shows what it must not:\n%s", resp.Diff)
			}
		})
	}
}

func TestGetFileDiffTruncated(t *testing.T) {
	dir := newRepo(t)
	big := lines(20000, "a fairly long line of text to make the diff large") // ~1 MiB
	writeFile(t, filepath.Join(dir, "big.txt"), big)
	git(t, dir, "add", "big.txt")
	git(t, dir, "commit", "-q", "-m", "big")
	writeFile(t, filepath.Join(dir, "big.txt"), strings.ReplaceAll(big, "text", "TEXT"))
	writeFile(t, filepath.Join(dir, "untracked.txt"), big)
	s := newService(t, t.TempDir(), nil)
	for _, path := range []string{"big.txt", "untracked.txt"} {
		t.Run(path, func(t *testing.T) {
			resp, err := s.GetFileDiff(t.Context(), &pb.GetFileDiffRequest{WorkingDirectory: dir, Path: path})
			if err != nil {
				t.Fatal(err)
			}
			if !resp.Truncated || len(resp.Diff) > MaxDiffBytes || len(resp.Diff) < MaxDiffBytes-200 || !strings.HasSuffix(resp.Diff, "\n") {
				t.Fatalf("truncated=%v, %d bytes, ends %q", resp.Truncated, len(resp.Diff), resp.Diff[max(0, len(resp.Diff)-20):])
			}
		})
	}
}

func TestGetFileDiffNoCommitYet(t *testing.T) {
	dir := newRepo(t)
	writeFile(t, filepath.Join(dir, "staged.txt"), "s\n")
	git(t, dir, "add", "staged.txt")
	writeFile(t, filepath.Join(dir, "loose.txt"), "l\n")
	s := newService(t, t.TempDir(), nil)
	for path, want := range map[string]string{"staged.txt": "+s\n", "loose.txt": "+l\n"} {
		resp, err := s.GetFileDiff(t.Context(), &pb.GetFileDiffRequest{WorkingDirectory: dir, Path: path})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(resp.Diff, "new file mode") || !strings.Contains(resp.Diff, want) {
			t.Fatalf("%s: diff:\n%s", path, resp.Diff)
		}
	}
}

func TestGetFileDiffRequests(t *testing.T) {
	plain := t.TempDir()
	repo := newRepo(t)
	s := newService(t, t.TempDir(), SessionsFunc(func(_ context.Context, id string) (string, error) {
		if id == "s" {
			return repo, nil
		}
		return "", ErrSessionNotFound
	}))
	tests := []struct {
		name        string
		req         *pb.GetFileDiffRequest
		wantCode    codes.Code
		wantBetCode string
	}{
		{name: "by session", req: &pb.GetFileDiffRequest{SessionId: "s", Path: "x"}},
		{name: "unknown session", req: &pb.GetFileDiffRequest{SessionId: "nope", Path: "x"}, wantCode: codes.NotFound, wantBetCode: server.CodeSessionNotFound},
		{name: "not a repository", req: &pb.GetFileDiffRequest{WorkingDirectory: plain, Path: "x"}, wantCode: codes.InvalidArgument, wantBetCode: server.CodeInvalidArgument},
		{name: "missing directory", req: &pb.GetFileDiffRequest{WorkingDirectory: filepath.Join(plain, "gone"), Path: "x"}, wantCode: codes.NotFound, wantBetCode: server.CodeDirectoryNotFound},
		{name: "nothing named", req: &pb.GetFileDiffRequest{Path: "x"}, wantCode: codes.InvalidArgument, wantBetCode: server.CodeInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.GetFileDiff(t.Context(), tc.req)
			if tc.wantCode == codes.OK {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantStatus(t, err, tc.wantCode, tc.wantBetCode)
		})
	}
}
