package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/relay/internal/pgtest"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// reason is the BetCode error code (ErrorInfo reason) of a status error.
func reason(err error) string {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			return ei.Reason
		}
	}
	return ""
}

// initRepo makes a git repository with one commit at dir.
func initRepo(t *testing.T, dir string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is not installed: install it (apt-get install git) to run the worktree tests")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."}, {"commit", "-q", "-m", "first"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// TestWorktreesThroughRelay: WorktreeService reaches the machine through
// the relay's tunnel with the owner's token, with its error codes intact; a
// session started in a worktree by id is listed by worktree; another user
// reaches nothing.
func TestWorktreesThroughRelay(t *testing.T) {
	w := newWorld(t, pgtest.URL(t))
	a := w.startAgent("m1", w.addr)
	ctx := onMachine(ctxT(t, 120*time.Second), "m1")
	repo := filepath.Join(a.project, "repo")
	initRepo(t, repo)
	alice := w.client()
	wts := pb.NewWorktreeServiceClient(alice)

	wt, err := wts.CreateWorktree(ctx, &pb.CreateWorktreeRequest{RepoPath: repo, Branch: "feature", CreateBranch: true})
	if err != nil {
		t.Fatalf("CreateWorktree through the relay: %v", err)
	}
	if want := filepath.Join(a.project, "repo.worktrees", "feature"); wt.Path != want {
		t.Fatalf("created %v; want it at %s", wt, want)
	}
	list, err := wts.ListWorktrees(ctx, &pb.ListWorktreesRequest{RepoPath: repo})
	if err != nil || len(list.Worktrees) != 2 {
		t.Fatalf("ListWorktrees through the relay: %v (%v)", list, err)
	}
	_, err = wts.CreateWorktree(ctx, &pb.CreateWorktreeRequest{RepoPath: repo, Branch: "feature", Name: "again"})
	if status.Code(err) != codes.FailedPrecondition || reason(err) != "BRANCH_CHECKED_OUT" {
		t.Fatalf("branch checked out twice: %v (%s)", err, reason(err))
	}

	agentAPI := pb.NewAgentServiceClient(alice)
	s, err := agentAPI.Converse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Start{Start: &pb.StartConversation{WorktreeId: wt.Id}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&pb.AgentRequest{Request: &pb.AgentRequest_Message{Message: &pb.UserMessage{Content: "hello"}}}); err != nil {
		t.Fatal(err)
	}
	evs := recvUntil(t, s, isTurnComplete)
	id := sessionOf(t, evs)
	sessions, err := agentAPI.ListSessions(ctx, &pb.ListSessionsRequest{WorktreeId: wt.Id})
	if err != nil || len(sessions.Sessions) != 1 || sessions.Sessions[0].Id != id || sessions.Sessions[0].WorkingDirectory != wt.Path {
		t.Fatalf("ListSessions by worktree through the relay: %v (%v)", sessions, err)
	}
	sw, err := wts.SwitchWorktree(ctx, &pb.SwitchWorktreeRequest{WorktreeId: list.Worktrees[0].Id, SessionId: id})
	if err != nil || sw.PreviousWorktreeId != wt.Id {
		t.Fatalf("SwitchWorktree through the relay: %v (%v)", sw, err)
	}

	// bob: NOT_FOUND for alice's machine, as for every other call.
	bob := pb.NewWorktreeServiceClient(w.dial(w.addr, w.userToken("bob")))
	_, err = bob.ListWorktrees(ctx, &pb.ListWorktreesRequest{RepoPath: repo})
	wantCode(t, "bob ListWorktrees on m1", err, codes.NotFound, `no machine "m1"`)
	_, err = bob.RemoveWorktree(ctx, &pb.RemoveWorktreeRequest{WorktreeId: wt.Id, Force: true})
	wantCode(t, "bob RemoveWorktree on m1", err, codes.NotFound, `no machine "m1"`)
	// No token: refused before the machine.
	_, err = pb.NewWorktreeServiceClient(w.dial(w.addr, "")).ListWorktrees(ctx, &pb.ListWorktreesRequest{RepoPath: repo})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("ListWorktrees without a token: %v", err)
	}

	rm, err := wts.RemoveWorktree(ctx, &pb.RemoveWorktreeRequest{WorktreeId: wt.Id})
	if err != nil || !rm.Removed {
		t.Fatalf("RemoveWorktree through the relay: %v (%v)", rm, err)
	}
	if _, err := os.Stat(wt.Path); !os.IsNotExist(err) {
		t.Fatalf("the worktree is still there: %v", err)
	}
}
