package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/betcode-dev/betcode/agent/server"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// homeFixture is a home directory with plain, hidden, git and symlinked
// directories, a file, a broken link and a link to a file.
func homeFixture(t *testing.T) string {
	home := t.TempDir()
	mkdirs(t, filepath.Join(home, "alpha", "inner"), filepath.Join(home, "beta", ".git"),
		filepath.Join(home, ".hidden"), filepath.Join(home, "Zeta"), filepath.Join(home, "wt"))
	writeFile(t, filepath.Join(home, "wt", ".git"), "gitdir: /somewhere/else\n") // a linked work tree
	writeFile(t, filepath.Join(home, "file.txt"), "x")
	symlink(t, filepath.Join(home, "alpha"), filepath.Join(home, "link-to-alpha"))
	symlink(t, filepath.Join(home, "beta"), filepath.Join(home, ".link-hidden"))
	symlink(t, filepath.Join(home, "nowhere"), filepath.Join(home, "broken"))
	symlink(t, filepath.Join(home, "file.txt"), filepath.Join(home, "link-to-file"))
	return home
}

func TestListDirectories(t *testing.T) {
	home := homeFixture(t)
	s := newService(t, home, nil)
	all := []string{"Zeta", "alpha", "beta", "link-to-alpha", "wt"}
	tests := []struct {
		name          string
		path          string
		hidden        bool
		wantPath      string
		wantParent    string
		wantNames     []string
		wantCode      codes.Code
		wantBetCode   string
		wantErrSubstr string
	}{
		{name: "empty is home", path: "", wantPath: home, wantParent: filepath.Dir(home), wantNames: all},
		{name: "tilde is home", path: "~", wantPath: home, wantParent: filepath.Dir(home), wantNames: all},
		{name: "tilde slash is home", path: "~/", wantPath: home, wantParent: filepath.Dir(home), wantNames: all},
		{name: "under home", path: "~/alpha", wantPath: filepath.Join(home, "alpha"), wantParent: home, wantNames: []string{"inner"}},
		{name: "absolute, cleaned", path: home + "/alpha/inner/../..//", wantPath: home, wantParent: filepath.Dir(home), wantNames: all},
		{name: "hidden shown on request", path: home, hidden: true, wantPath: home, wantParent: filepath.Dir(home),
			wantNames: []string{".hidden", ".link-hidden", "Zeta", "alpha", "beta", "link-to-alpha", "wt"}},
		{name: "through a symlink", path: filepath.Join(home, "link-to-alpha"), wantPath: filepath.Join(home, "link-to-alpha"), wantParent: home, wantNames: []string{"inner"}},
		{name: "empty directory", path: filepath.Join(home, "Zeta"), wantPath: filepath.Join(home, "Zeta"), wantParent: home, wantNames: nil},
		{name: "root has no parent", path: "/", wantPath: "/", wantParent: ""},
		{name: "relative", path: "alpha", wantCode: codes.InvalidArgument, wantBetCode: server.CodeInvalidArgument, wantErrSubstr: "absolute"},
		{name: "other user's home", path: "~root", wantCode: codes.InvalidArgument, wantBetCode: server.CodeInvalidArgument},
		{name: "a file", path: filepath.Join(home, "file.txt"), wantCode: codes.InvalidArgument, wantBetCode: server.CodeInvalidArgument, wantErrSubstr: "is not a directory"},
		{name: "a link to a file", path: filepath.Join(home, "link-to-file"), wantCode: codes.InvalidArgument, wantBetCode: server.CodeInvalidArgument, wantErrSubstr: "is not a directory"},
		{name: "missing", path: filepath.Join(home, "missing"), wantCode: codes.NotFound, wantBetCode: server.CodeDirectoryNotFound, wantErrSubstr: "does not exist"},
		{name: "broken link", path: filepath.Join(home, "broken"), wantCode: codes.NotFound, wantBetCode: server.CodeDirectoryNotFound},
		{name: "NUL", path: "/tmp/a\x00b", wantCode: codes.InvalidArgument, wantBetCode: server.CodeInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := s.ListDirectories(t.Context(), &pb.ListDirectoriesRequest{Path: tc.path, IncludeHidden: tc.hidden})
			if tc.wantCode != codes.OK {
				wantStatus(t, err, tc.wantCode, tc.wantBetCode)
				if !strings.Contains(err.Error(), tc.wantErrSubstr) {
					t.Fatalf("error %q does not say %q", err, tc.wantErrSubstr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.Path != tc.wantPath || resp.Parent != tc.wantParent {
				t.Fatalf("path, parent = %q, %q; want %q, %q", resp.Path, resp.Parent, tc.wantPath, tc.wantParent)
			}
			if resp.Truncated {
				t.Fatal("truncated")
			}
			if tc.path == "/" {
				return // whatever the machine has
			}
			var names []string
			for _, d := range resp.Directories {
				names = append(names, d.Name)
				if d.Path != filepath.Join(tc.wantPath, d.Name) {
					t.Errorf("%s: path %q", d.Name, d.Path)
				}
			}
			if !slices.Equal(names, tc.wantNames) {
				t.Fatalf("names = %q, want %q", names, tc.wantNames)
			}
		})
	}
}

func TestListDirectoriesGitRepos(t *testing.T) {
	home := homeFixture(t)
	resp, err := newService(t, home, nil).ListDirectories(t.Context(), &pb.ListDirectoriesRequest{IncludeHidden: true})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, d := range resp.Directories {
		got[d.Name] = d.IsGitRepo
	}
	want := map[string]bool{".hidden": false, ".link-hidden": true, "Zeta": false, "alpha": false, "beta": true, "link-to-alpha": false, "wt": true}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("is_git_repo = %v, want %v", got, want)
	}
}

func TestListDirectoriesTruncated(t *testing.T) {
	home := t.TempDir()
	for i := range MaxDirectories + 5 {
		mkdirs(t, filepath.Join(home, fmt.Sprintf("d%04d", i)))
	}
	for i := range 10 { // files do not count towards the cap
		writeFile(t, filepath.Join(home, fmt.Sprintf("a-file%d", i)), "")
	}
	resp, err := newService(t, home, nil).ListDirectories(t.Context(), &pb.ListDirectoriesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Truncated || len(resp.Directories) != MaxDirectories {
		t.Fatalf("truncated=%v with %d entries, want true with %d", resp.Truncated, len(resp.Directories), MaxDirectories)
	}
	if first, last := resp.Directories[0].Name, resp.Directories[MaxDirectories-1].Name; first != "d0000" || last != "d0999" {
		t.Fatalf("first, last = %s, %s", first, last)
	}

	// Exactly the cap is not truncated.
	for i := MaxDirectories; i < MaxDirectories+5; i++ {
		if err := os.Remove(filepath.Join(home, fmt.Sprintf("d%04d", i))); err != nil {
			t.Fatal(err)
		}
	}
	resp, err = newService(t, home, nil).ListDirectories(t.Context(), &pb.ListDirectoriesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Truncated || len(resp.Directories) != MaxDirectories {
		t.Fatalf("truncated=%v with %d entries, want false with %d", resp.Truncated, len(resp.Directories), MaxDirectories)
	}
}

// TestUnreadable runs as user nobody when the tests run as root.
func TestUnreadable(t *testing.T) {
	if asNobody(t) {
		return
	}
	home := t.TempDir()
	locked := filepath.Join(home, "locked")
	mkdirs(t, filepath.Join(home, "open"), filepath.Join(locked, "inside"))
	writeFile(t, filepath.Join(home, "noexec", "f"), "")
	if err := os.Chmod(locked, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(home, "noexec"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(locked, 0o755); os.Chmod(filepath.Join(home, "noexec"), 0o755) })
	s := newService(t, home, nil)

	t.Run("listing skips what cannot be entered", func(t *testing.T) {
		resp, err := s.ListDirectories(t.Context(), &pb.ListDirectoriesRequest{Path: home})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Directories) != 1 || resp.Directories[0].Name != "open" {
			t.Fatalf("directories = %v, want only open", resp.Directories)
		}
	})
	for _, dir := range []string{locked, filepath.Join(locked, "inside")} {
		t.Run("listing "+filepath.Base(dir), func(t *testing.T) {
			_, err := s.ListDirectories(t.Context(), &pb.ListDirectoriesRequest{Path: dir})
			wantStatus(t, err, codes.PermissionDenied, server.CodeDirectoryNotReadable)
		})
	}
	for _, dir := range []string{locked, filepath.Join(locked, "inside"), filepath.Join(home, "noexec")} {
		t.Run("validating "+filepath.Base(dir), func(t *testing.T) {
			resp, err := s.ValidateDirectory(t.Context(), &pb.ValidateDirectoryRequest{Path: dir})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Valid || resp.Error != dir+" is not readable" {
				t.Fatalf("valid=%v error=%q", resp.Valid, resp.Error)
			}
		})
	}
}

func TestValidateDirectory(t *testing.T) {
	home := homeFixture(t)
	repo := newRepo(t)
	mkdirs(t, filepath.Join(repo, "sub", "deeper"))
	s := newService(t, home, nil)
	tests := []struct {
		name      string
		path      string
		wantValid bool
		wantPath  string
		wantGit   bool
		wantError string
	}{
		{name: "plain directory", path: filepath.Join(home, "alpha"), wantValid: true, wantPath: filepath.Join(home, "alpha")},
		{name: "home", path: "~", wantValid: true, wantPath: home},
		{name: "under home, cleaned", path: "~/alpha/./inner/", wantValid: true, wantPath: filepath.Join(home, "alpha", "inner")},
		{name: "top of a repository", path: repo, wantValid: true, wantPath: repo, wantGit: true},
		{name: "inside a repository", path: filepath.Join(repo, "sub", "deeper"), wantValid: true, wantPath: filepath.Join(repo, "sub", "deeper"), wantGit: true},
		{name: "inside .git is no work tree", path: filepath.Join(repo, ".git"), wantValid: true, wantPath: filepath.Join(repo, ".git")},
		{name: "a .git that is not a repository", path: filepath.Join(home, "beta"), wantValid: true, wantPath: filepath.Join(home, "beta")},
		{name: "symlink to a directory", path: filepath.Join(home, "link-to-alpha"), wantValid: true, wantPath: filepath.Join(home, "link-to-alpha")},
		{name: "missing", path: filepath.Join(home, "missing"), wantPath: filepath.Join(home, "missing"), wantError: filepath.Join(home, "missing") + " does not exist"},
		{name: "a file", path: filepath.Join(home, "file.txt"), wantPath: filepath.Join(home, "file.txt"), wantError: filepath.Join(home, "file.txt") + " is not a directory"},
		{name: "under a file", path: filepath.Join(home, "file.txt", "x"), wantPath: filepath.Join(home, "file.txt", "x"), wantError: "does not exist"},
		{name: "relative", path: "alpha", wantPath: "alpha", wantError: `"alpha" must be an absolute path or start with ~/`},
		{name: "empty", path: "", wantError: "a path is required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := s.ValidateDirectory(t.Context(), &pb.ValidateDirectoryRequest{Path: tc.path})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Valid != tc.wantValid || resp.Path != tc.wantPath || resp.IsGitRepo != tc.wantGit {
				t.Fatalf("valid=%v path=%q git=%v; want %v %q %v (error %q)", resp.Valid, resp.Path, resp.IsGitRepo, tc.wantValid, tc.wantPath, tc.wantGit, resp.Error)
			}
			if !strings.Contains(resp.Error, tc.wantError) || (tc.wantError == "") != (resp.Error == "") {
				t.Fatalf("error = %q, want %q", resp.Error, tc.wantError)
			}
		})
	}
}
