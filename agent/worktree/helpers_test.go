package worktree

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/server"
	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// requireGit fails (never skips) when git is missing.
func requireGit(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is not installed: install it (apt-get install git) to run the worktree tests")
	}
}

// gitEnv is the environment of the tests' own git commands: a fixed
// identity, no user or system config.
func gitEnv() []string {
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return append(env, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
		"GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "LC_ALL=C")
}

// run runs git in dir for a test's setup.
func run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "protocol.file.allow=always", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = gitEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return strings.TrimSpace(string(out))
}

// newRepo makes a repository at <tmp>/<name> with one commit on main.
func newRepo(t testing.TB, name string) string {
	t.Helper()
	requireGit(t)
	dir := filepath.Join(canonical(t.TempDir()), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, dir, "init", "-q")
	write(t, filepath.Join(dir, "README.md"), "hello\n")
	run(t, dir, "add", ".")
	run(t, dir, "commit", "-q", "-m", "first")
	return dir
}

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fixture is a Service on a real event log with a real session manager
// (whose sessions never start a CLI in these tests).
type fixture struct {
	svc *Service
	mgr *session.Manager
	ctx context.Context
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	dir := t.TempDir()
	mgr, err := session.Open(ctx, session.Config{ClaudeBin: "/nonexistent/claude", DefaultDir: dir}, filepath.Join(dir, "agent.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mgr.Close(context.Background()) })
	svc := New(Options{Store: mgr.Log(), Sessions: ManagerSessions{M: mgr}})
	mgr.SetWorktrees(svc)
	return &fixture{svc: svc, mgr: mgr, ctx: ctx}
}

func (f *fixture) list(t *testing.T, repo string) []*pb.WorktreeInfo {
	t.Helper()
	resp, err := f.svc.ListWorktrees(f.ctx, &pb.ListWorktreesRequest{RepoPath: repo})
	if err != nil {
		t.Fatalf("ListWorktrees(%s): %v", repo, err)
	}
	return resp.Worktrees
}

func (f *fixture) create(t *testing.T, req *pb.CreateWorktreeRequest) *pb.WorktreeInfo {
	t.Helper()
	wi, err := f.svc.CreateWorktree(f.ctx, req)
	if err != nil {
		t.Fatalf("CreateWorktree(%v): %v", req, err)
	}
	return wi
}

// wantErr checks a status error's gRPC and BetCode codes.
func wantErr(t *testing.T, what string, err error, c codes.Code, betcode string) {
	t.Helper()
	if status.Code(err) != c || server.BetCodeCode(err) != betcode {
		t.Fatalf("%s: got %v (%s), want %s %s", what, err, server.BetCodeCode(err), c, betcode)
	}
}

func byPath(list []*pb.WorktreeInfo, path string) *pb.WorktreeInfo {
	for _, w := range list {
		if w.Path == path {
			return w
		}
	}
	return nil
}
