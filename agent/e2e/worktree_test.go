package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/betcode-dev/betcode/agent/client"
	"github.com/betcode-dev/betcode/agent/internal/testenv"
	"github.com/betcode-dev/betcode/agent/worktree"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
	"github.com/betcode-dev/betcode/shared/fakeapi"
)

// gitRepo makes a git repository with one commit in a new directory of the
// agent's home.
func gitRepo(t *testing.T, agent *testenv.Agent) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is not installed: install it (apt-get install git) to run the worktree tests")
	}
	dir := filepath.Join(agent.ProjectDir(t), "repo")
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
	return dir
}

// runToolTurn sends RUNTOOL (Bash allowed) on a conversation and waits for
// the turn to end; the fake model's Bash call creates fakeapi.ToolFile in
// the session's working directory.
func runToolTurn(t *testing.T, s convStream) []*pb.AgentEvent {
	t.Helper()
	say(t, s, "RUNTOOL please")
	return until(t, s, isTurnComplete)
}

// TestWorktreesWithTheRealCLI: worktrees made, listed, switched and
// removed through the client CLI and gRPC; a session started in a worktree
// by id runs its tools there, is found by ListSessions, and after a switch
// its next turn (the CLI restarted with --resume) runs in the new one.
func TestWorktreesWithTheRealCLI(t *testing.T) {
	api := testenv.FakeAPI(t)
	agent := testenv.StartAgent(t, testenv.AgentOptions{APIURL: api.URL()})
	ctx := ctxT(t)
	sock := agent.Opts.Socket
	repo := gitRepo(t, agent)
	wts := pb.NewWorktreeServiceClient(agent.Conn)

	out, errOut, code := runCLI(t, sock, "worktree", "create", "-b", "feature/one", "--repo", repo)
	if code != 0 {
		t.Fatalf("worktree create: code %d\n%s%s", code, out, errOut)
	}
	oneID, onePath, _ := strings.Cut(strings.TrimSpace(out), "\t")
	if want := filepath.Join(filepath.Dir(repo), "repo.worktrees", "feature-one"); onePath != want {
		t.Fatalf("worktree create printed %q; want an id and %s", out, want)
	}
	two, err := wts.CreateWorktree(ctx, &pb.CreateWorktreeRequest{RepoPath: repo, Branch: "two", CreateBranch: true})
	if err != nil {
		t.Fatal(err)
	}
	out, _, code = runCLI(t, sock, "worktree", "list", "--repo", repo)
	if code != 0 || !strings.Contains(out, oneID) || !strings.Contains(out, two.Id) || !strings.Contains(out, "main") {
		t.Fatalf("worktree list: code %d\n%s", code, out)
	}

	// A session started in worktree one, by id.
	s := startConv(t, ctx, agent.API, &pb.StartConversation{WorktreeId: oneID, AllowedTools: []string{"Bash"}})
	evs := until(t, s, func(ev *pb.AgentEvent) bool { return ev.GetSessionInfo() != nil })
	info := evs[len(evs)-1].GetSessionInfo()
	if info.WorktreeId != oneID || info.WorkingDirectory != onePath {
		t.Fatalf("SessionInfo %v; want worktree %s in %s", info, oneID, onePath)
	}
	sid := info.SessionId
	runToolTurn(t, s)
	if _, err := os.Stat(filepath.Join(onePath, fakeapi.ToolFile)); err != nil {
		t.Fatalf("the tool did not run in worktree one: %v", err)
	}
	list, err := agent.API.ListSessions(ctx, &pb.ListSessionsRequest{WorktreeId: oneID})
	if err != nil || len(list.Sessions) != 1 || list.Sessions[0].Id != sid || list.Sessions[0].WorktreeId != oneID {
		t.Fatalf("ListSessions in worktree one: %v (%v)", list, err)
	}
	if l, _ := agent.API.ListSessions(ctx, &pb.ListSessionsRequest{WorktreeId: two.Id}); len(l.GetSessions()) != 0 {
		t.Fatalf("ListSessions in worktree two: %v", l)
	}

	// Switch to worktree two: the previous one is reported; the next turn
	// runs there.
	out, errOut, code = runCLI(t, sock, "worktree", "switch", two.Id, "--session", sid)
	if code != 0 || !strings.Contains(out, "previously "+oneID) {
		t.Fatalf("worktree switch: code %d\n%s%s", code, out, errOut)
	}
	runToolTurn(t, s)
	if _, err := os.Stat(filepath.Join(two.Path, fakeapi.ToolFile)); err != nil {
		t.Fatalf("after the switch the tool did not run in worktree two: %v", err)
	}
	if n := runtoolPrompts(api.Requests()); n < 2 {
		t.Fatalf("the turn after the switch did not continue the conversation: its requests hold %d RUNTOOL prompts, want 2", n)
	}
	list, err = agent.API.ListSessions(ctx, &pb.ListSessionsRequest{WorktreeId: two.Id})
	if err != nil || len(list.Sessions) != 1 || list.Sessions[0].WorkingDirectory != two.Path {
		t.Fatalf("ListSessions in worktree two: %v (%v)", list, err)
	}

	// Worktree one has no session now, but the tool's file: refused, then
	// forced. Worktree two has the session: refused, then forced, closing it.
	_, errOut, code = runCLI(t, sock, "worktree", "remove", oneID)
	if code == 0 || !strings.Contains(errOut, "changed or untracked file") {
		t.Fatalf("remove of a dirty worktree: code %d\n%s", code, errOut)
	}
	if out, errOut, code = runCLI(t, sock, "worktree", "remove", "--force", oneID); code != 0 {
		t.Fatalf("forced remove: code %d\n%s%s", code, out, errOut)
	}
	_, err = wts.RemoveWorktree(ctx, &pb.RemoveWorktreeRequest{WorktreeId: two.Id})
	wantStatus(t, "remove a worktree with a session", err, codes.ResourceExhausted, worktree.CodeWorktreeInUse)
	rm, err := wts.RemoveWorktree(ctx, &pb.RemoveWorktreeRequest{WorktreeId: two.Id, Force: true})
	if err != nil || rm.SessionsClosed != 1 {
		t.Fatalf("forced remove with the session: %v %v", rm, err)
	}
	ev := until(t, s, func(ev *pb.AgentEvent) bool { return ev.GetError() != nil })
	if e := last(ev).GetError(); e.Code != worktree.CodeWorktreeRemoved || e.IsFatal {
		t.Fatalf("the session was told %v; want a non-fatal %s", e, worktree.CodeWorktreeRemoved)
	}
	if _, err := os.Stat(two.Path); !os.IsNotExist(err) {
		t.Fatalf("worktree two is still there: %v", err)
	}

	// Errors keep their codes through the CLI's exit code.
	_, errOut, code = runCLI(t, sock, "worktree", "list", "--repo", agent.ProjectDir(t))
	if code != client.ExitInternal || !strings.Contains(errOut, "not in a git repository") {
		t.Fatalf("list outside a repository: code %d\n%s", code, errOut)
	}
}

// runtoolPrompts is the most RUNTOOL prompts one request's conversation
// holds: 2 once the second turn carries the first turn's history.
func runtoolPrompts(reqs []fakeapi.Request) int {
	most := 0
	for _, r := range reqs {
		n := 0
		for _, m := range r.Conversation() {
			if m.Role == "user" {
				n += strings.Count(m.Text, "RUNTOOL please")
			}
		}
		most = max(most, n)
	}
	return most
}
