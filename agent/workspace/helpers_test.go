package workspace

import (
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/server"
)

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// newService returns a Service whose "~" is home.
func newService(t testing.TB, home string, sessions Sessions) *Service {
	return New(Options{Home: home, Sessions: sessions, Logger: testLogger(t)})
}

// requireGit fails the test when git is missing: the changes view is
// nothing without it, and a skip would hide that.
func requireGit(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is not installed (needed by agent/workspace): apt-get install git (Debian/Ubuntu) or brew install git (macOS)")
	}
}

// git runs git in dir with a fixed identity and no user configuration.
func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := gitMayFail(dir, args...)
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// gitMayFail is git for commands whose failure is the point (a
// conflicting merge).
func gitMayFail(dir string, args ...string) (string, error) {
	full := append([]string{"-C", dir, "-c", "user.name=Test", "-c", "user.email=test@example.com",
		"-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main", "-c", "core.autocrlf=false"}, args...)
	cmd := exec.Command("git", full...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// newRepo returns an empty repository on branch main.
func newRepo(t testing.TB) string {
	t.Helper()
	requireGit(t)
	dir := t.TempDir()
	git(t, dir, "init", "-q")
	return dir
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mkdirs(t testing.TB, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func symlink(t testing.TB, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// realPath is p with symlinks resolved, as git reports a work tree's top.
func realPath(t testing.TB, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// wantStatus checks an error's gRPC code and BetCode code.
func wantStatus(t testing.TB, err error, code codes.Code, betcode string) {
	t.Helper()
	if status.Code(err) != code || server.BetCodeCode(err) != betcode {
		t.Fatalf("error = %v (%s, %q), want %s with %q", err, status.Code(err), server.BetCodeCode(err), code, betcode)
	}
}

// childEnv marks the child process asNobody starts.
const childEnv = "BETCODE_WORKSPACE_TEST_CHILD"

// asNobody runs the calling test again in a child process as user nobody
// when the test binary runs as root, as CI does: root reads every directory
// whatever its mode, so only an unprivileged user sees one as unreadable.
// It returns true in the root parent, which has nothing left to do.
func asNobody(t *testing.T) (parent bool) {
	t.Helper()
	if os.Getuid() != 0 {
		return false
	}
	if os.Getenv(childEnv) != "" {
		t.Fatal("the child test still runs as root")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The go build cache is root's alone; nobody needs a copy it may run.
	dir, err := os.MkdirTemp("", "workspace-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "workspace.test")
	copyFile(t, exe, bin, 0o755)
	cmd := exec.CommandContext(t.Context(), bin, "-test.run", "^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	t.Logf("as nobody:\n%s", out)
	if err != nil {
		t.Fatalf("the test as user nobody failed: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("the test did not run as user nobody")
	}
	return true
}

func copyFile(t testing.TB, from, to string, mode os.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
