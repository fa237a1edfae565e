package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/betcode-dev/betcode/agent/server"
	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// change is a FileChange as a comparable value.
type change struct {
	Path, Status, OldPath string
	Add, Del              uint32
	Binary, Staged        bool
}

func changes(files []*pb.FileChange) []change {
	var out []change
	for _, f := range files {
		out = append(out, change{f.Path, f.Status, f.OldPath, f.Additions, f.Deletions, f.Binary, f.Staged})
	}
	return out
}

func lines(n int, prefix string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%s line %d\n", prefix, i)
	}
	return b.String()
}

// changedRepo is a repository with one file in each kind of change.
func changedRepo(t *testing.T) (dir string, want []change) {
	dir = newRepo(t)
	w := func(name, content string) { writeFile(t, filepath.Join(dir, name), content) }
	w("modified.txt", "a\nb\nc\n")
	w("staged.txt", "one\n")
	w("deleted.txt", "gone\ngone\n")
	w("removed.txt", "x\n")
	w("old name.txt", lines(20, "renamed"))
	w("image.bin", "\x00\x01\x02binary")
	w("sub/dir/deep.txt", "deep\n")
	w("ünï cödé.txt", "1\n")
	w("unchanged.txt", "same\n")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "initial")

	w("modified.txt", "a\nB\nc\nd\n") // +2 -1, not staged
	w("staged.txt", "one\ntwo\n")
	git(t, dir, "add", "staged.txt")
	git(t, dir, "rm", "-q", "deleted.txt")
	if err := os.Remove(filepath.Join(dir, "removed.txt")); err != nil { // deleted, not staged
		t.Fatal(err)
	}
	git(t, dir, "mv", "old name.txt", "new name.txt")
	w("added.txt", "n1\nn2\nn3\n")
	git(t, dir, "add", "added.txt")
	w("image.bin", "\x00\x03binary too")
	w("sub/dir/deep.txt", "deeper\n")
	w("ünï cödé.txt", "1\n2\n")
	w("untracked.txt", "u1\nu2") // no final newline: still two lines
	w("new dir/nested/file.txt", "n\n")
	w("untracked.bin", "\x00\xff")
	w("empty", "")
	symlink(t, "untracked.txt", filepath.Join(dir, "a-link"))

	want = []change{
		{Path: "a-link", Status: StatusUntracked, Add: 1},
		{Path: "added.txt", Status: StatusAdded, Add: 3, Staged: true},
		{Path: "deleted.txt", Status: StatusDeleted, Del: 2, Staged: true},
		{Path: "empty", Status: StatusUntracked},
		{Path: "image.bin", Status: StatusModified, Binary: true},
		{Path: "modified.txt", Status: StatusModified, Add: 2, Del: 1},
		{Path: "new dir/nested/file.txt", Status: StatusUntracked, Add: 1},
		{Path: "new name.txt", Status: StatusRenamed, OldPath: "old name.txt", Staged: true},
		{Path: "removed.txt", Status: StatusDeleted, Del: 1},
		{Path: "staged.txt", Status: StatusModified, Add: 1, Staged: true},
		{Path: "sub/dir/deep.txt", Status: StatusModified, Add: 1, Del: 1},
		{Path: "untracked.bin", Status: StatusUntracked, Binary: true},
		{Path: "untracked.txt", Status: StatusUntracked, Add: 2},
		{Path: "ünï cödé.txt", Status: StatusModified, Add: 1},
	}
	return dir, want
}

func TestGetChanges(t *testing.T) {
	dir, want := changedRepo(t)
	s := newService(t, t.TempDir(), nil)
	for _, wd := range []string{dir, filepath.Join(dir, "sub"), filepath.Join(dir, "sub", "dir") + "/"} {
		t.Run(strings.TrimPrefix(wd, dir), func(t *testing.T) {
			resp, err := s.GetChanges(t.Context(), &pb.GetChangesRequest{WorkingDirectory: wd})
			if err != nil {
				t.Fatal(err)
			}
			if !resp.IsGitRepo || resp.Branch != "main" || resp.Root != realPath(t, dir) || resp.Truncated {
				t.Fatalf("git=%v branch=%q root=%q truncated=%v", resp.IsGitRepo, resp.Branch, resp.Root, resp.Truncated)
			}
			if got := changes(resp.Files); !slices.Equal(got, want) {
				t.Fatalf("files:\n%s\nwant:\n%s", dump(got), dump(want))
			}
		})
	}
}

func dump(cs []change) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "  %+v\n", c)
	}
	return b.String()
}

func TestGetChangesStates(t *testing.T) {
	requireGit(t)
	tests := []struct {
		name       string
		setup      func(t *testing.T, dir string)
		wantBranch string
		want       []change
	}{
		{
			name:       "empty repository",
			setup:      func(*testing.T, string) {},
			wantBranch: "main",
		},
		{
			name: "no commit yet",
			setup: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "staged.txt"), "a\nb\n")
				git(t, dir, "add", "staged.txt")
				writeFile(t, filepath.Join(dir, "staged.txt"), "a\nb\nc\n") // more in the work tree
				writeFile(t, filepath.Join(dir, "loose.txt"), "l\n")
			},
			wantBranch: "main",
			want: []change{
				{Path: "loose.txt", Status: StatusUntracked, Add: 1},
				{Path: "staged.txt", Status: StatusAdded, Add: 3, Staged: true},
			},
		},
		{
			name: "clean",
			setup: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "a"), "a\n")
				git(t, dir, "add", "a")
				git(t, dir, "commit", "-q", "-m", "a")
			},
			wantBranch: "main",
		},
		{
			name: "detached HEAD",
			setup: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "a"), "a\n")
				git(t, dir, "add", "a")
				git(t, dir, "commit", "-q", "-m", "a")
				git(t, dir, "checkout", "-q", "--detach")
				writeFile(t, filepath.Join(dir, "a"), "b\n")
			},
			want: []change{{Path: "a", Status: StatusModified, Add: 1, Del: 1}},
		},
		{
			name: "conflicted merge",
			setup: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "c.txt"), "base\n")
				git(t, dir, "add", "c.txt")
				git(t, dir, "commit", "-q", "-m", "base")
				git(t, dir, "checkout", "-q", "-b", "other")
				writeFile(t, filepath.Join(dir, "c.txt"), "other\n")
				git(t, dir, "commit", "-q", "-am", "other")
				git(t, dir, "checkout", "-q", "main")
				writeFile(t, filepath.Join(dir, "c.txt"), "mine\n")
				git(t, dir, "commit", "-q", "-am", "mine")
				if out, err := gitMayFail(dir, "merge", "other"); err == nil {
					t.Fatalf("merge did not conflict:\n%s", out)
				}
			},
			wantBranch: "main",
			// git diff HEAD of an unmerged file: the markers and theirs, against ours.
			want: []change{{Path: "c.txt", Status: StatusConflicted, Add: 4}},
		},
		{
			name: "ignored files are left out",
			setup: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, ".gitignore"), "*.log\n")
				writeFile(t, filepath.Join(dir, "debug.log"), "noise\n")
			},
			wantBranch: "main",
			want:       []change{{Path: ".gitignore", Status: StatusUntracked, Add: 1}},
		},
	}
	s := newService(t, t.TempDir(), nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := newRepo(t)
			tc.setup(t, dir)
			resp, err := s.GetChanges(t.Context(), &pb.GetChangesRequest{WorkingDirectory: dir})
			if err != nil {
				t.Fatal(err)
			}
			if !resp.IsGitRepo || resp.Branch != tc.wantBranch || resp.Root != realPath(t, dir) {
				t.Fatalf("git=%v branch=%q root=%q", resp.IsGitRepo, resp.Branch, resp.Root)
			}
			if got := changes(resp.Files); !slices.Equal(got, tc.want) {
				t.Fatalf("files:\n%s\nwant:\n%s", dump(got), dump(tc.want))
			}
		})
	}
}

func TestGetChangesTruncated(t *testing.T) {
	dir := newRepo(t)
	for i := range MaxChanges + 3 {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("f%05d", i)), "x\n")
	}
	resp, err := newService(t, t.TempDir(), nil).GetChanges(t.Context(), &pb.GetChangesRequest{WorkingDirectory: dir})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Truncated || len(resp.Files) != MaxChanges || resp.Files[MaxChanges-1].Path != fmt.Sprintf("f%05d", MaxChanges-1) {
		t.Fatalf("truncated=%v, %d files", resp.Truncated, len(resp.Files))
	}
}

func TestGetChangesRequests(t *testing.T) {
	repo, _ := changedRepo(t)
	plain := t.TempDir()
	home := t.TempDir()
	writeFile(t, filepath.Join(home, "file"), "")
	sessions := SessionsFunc(func(_ context.Context, id string) (string, error) {
		switch id {
		case "in-repo":
			return filepath.Join(repo, "sub"), nil
		case "plain":
			return plain, nil
		case "dir-gone":
			return filepath.Join(plain, "gone"), nil
		case "broken":
			return "", errors.New("database is locked")
		}
		return "", fmt.Errorf("lookup %s: %w", id, ErrSessionNotFound)
	})
	tests := []struct {
		name        string
		req         *pb.GetChangesRequest
		noSessions  bool
		wantGit     bool
		wantCode    codes.Code
		wantBetCode string
	}{
		{name: "session in a repository", req: &pb.GetChangesRequest{SessionId: "in-repo"}, wantGit: true},
		{name: "session wins over directory", req: &pb.GetChangesRequest{SessionId: "plain", WorkingDirectory: repo}},
		{name: "session outside any repository", req: &pb.GetChangesRequest{SessionId: "plain"}},
		{name: "directory outside any repository", req: &pb.GetChangesRequest{WorkingDirectory: plain}},
		{name: "directory under home", req: &pb.GetChangesRequest{WorkingDirectory: "~"}},
		{name: "unknown session", req: &pb.GetChangesRequest{SessionId: "nope"}, wantCode: codes.NotFound, wantBetCode: server.CodeSessionNotFound},
		{name: "lookup failure", req: &pb.GetChangesRequest{SessionId: "broken"}, wantCode: codes.Internal, wantBetCode: server.CodeInternal},
		{name: "session's directory gone", req: &pb.GetChangesRequest{SessionId: "dir-gone"}, wantCode: codes.NotFound, wantBetCode: server.CodeDirectoryNotFound},
		{name: "no session manager", req: &pb.GetChangesRequest{SessionId: "in-repo"}, noSessions: true, wantCode: codes.InvalidArgument, wantBetCode: server.CodeInvalidArgument},
		{name: "nothing named", req: &pb.GetChangesRequest{}, wantCode: codes.InvalidArgument, wantBetCode: server.CodeInvalidArgument},
		{name: "relative directory", req: &pb.GetChangesRequest{WorkingDirectory: "src"}, wantCode: codes.InvalidArgument, wantBetCode: server.CodeInvalidArgument},
		{name: "missing directory", req: &pb.GetChangesRequest{WorkingDirectory: filepath.Join(plain, "missing")}, wantCode: codes.NotFound, wantBetCode: server.CodeDirectoryNotFound},
		{name: "a file", req: &pb.GetChangesRequest{WorkingDirectory: filepath.Join(home, "file")}, wantCode: codes.InvalidArgument, wantBetCode: server.CodeInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{Home: home, Sessions: sessions, Logger: testLogger(t)}
			if tc.noSessions {
				opts.Sessions = nil
			}
			resp, err := New(opts).GetChanges(t.Context(), tc.req)
			if tc.wantCode != codes.OK {
				wantStatus(t, err, tc.wantCode, tc.wantBetCode)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.IsGitRepo != tc.wantGit || (len(resp.Files) > 0) != tc.wantGit || (resp.Root != "") != tc.wantGit {
				t.Fatalf("git=%v root=%q with %d files, want git=%v", resp.IsGitRepo, resp.Root, len(resp.Files), tc.wantGit)
			}
		})
	}
}

func TestGetChangesWithoutGit(t *testing.T) {
	dir := newRepo(t)
	s := New(Options{Git: filepath.Join(t.TempDir(), "no-git-here"), Logger: testLogger(t)})
	_, err := s.GetChanges(t.Context(), &pb.GetChangesRequest{WorkingDirectory: dir})
	wantStatus(t, err, codes.FailedPrecondition, server.CodeGitUnavailable)

	// ValidateDirectory still answers, without the git part.
	resp, err := s.ValidateDirectory(t.Context(), &pb.ValidateDirectoryRequest{Path: dir})
	if err != nil || !resp.Valid || resp.IsGitRepo {
		t.Fatalf("validate = %v, %v", resp, err)
	}
}

// TestGetChangesIgnoresEnvironment: a GIT_DIR in the daemon's environment
// must not point the view at another repository.
func TestGetChangesIgnoresEnvironment(t *testing.T) {
	dir, want := changedRepo(t)
	other := newRepo(t)
	t.Setenv("GIT_DIR", filepath.Join(other, ".git"))
	t.Setenv("GIT_WORK_TREE", other)
	resp, err := newService(t, t.TempDir(), nil).GetChanges(t.Context(), &pb.GetChangesRequest{WorkingDirectory: dir})
	if err != nil {
		t.Fatal(err)
	}
	if got := changes(resp.Files); !slices.Equal(got, want) {
		t.Fatalf("files:\n%s\nwant:\n%s", dump(got), dump(want))
	}
}

func TestSessionDirs(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		wantErr error
	}{
		{name: "unknown session", err: session.ErrNotFound, wantErr: ErrSessionNotFound},
		{name: "other failure", err: errors.New("disk on fire")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := SessionDirs(func(context.Context, string) (*session.Session, error) { return nil, tc.err }).WorkingDirectory(t.Context(), "id")
			if err == nil || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) || (tc.wantErr == nil && errors.Is(err, ErrSessionNotFound)) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
		})
	}
}
