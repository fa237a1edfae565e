package worktree

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/betcode-dev/betcode/agent/eventlog"
	"github.com/betcode-dev/betcode/agent/server"
	"github.com/betcode-dev/betcode/agent/session"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// TestLifecycle: list, create (new and existing branch, default path
// beside the repository), a session started by worktree id, switch,
// remove refusing sessions and a dirty tree, then forced.
func TestLifecycle(t *testing.T) {
	f := newFixture(t)
	repo := newRepo(t, "proj")
	run(t, repo, "branch", "dev")

	list := f.list(t, repo)
	if len(list) != 1 || !list[0].IsMain || list[0].Branch != "main" || list[0].Path != repo || list[0].Head == "" {
		t.Fatalf("fresh repository lists %v", list)
	}
	mainID := list[0].Id

	feat := f.create(t, &pb.CreateWorktreeRequest{RepoPath: repo, Branch: "feature/a", CreateBranch: true})
	wantPath := filepath.Join(filepath.Dir(repo), "proj.worktrees", "feature-a")
	if feat.Path != wantPath || feat.Branch != "feature/a" || feat.Name != "feature/a" || feat.IsMain || feat.RepoPath != repo {
		t.Fatalf("created %v; want path %s on branch feature/a", feat, wantPath)
	}
	if _, err := os.Stat(filepath.Join(feat.Path, "README.md")); err != nil {
		t.Fatalf("worktree not checked out: %v", err)
	}
	dev := f.create(t, &pb.CreateWorktreeRequest{RepoPath: repo, Branch: "dev", Name: "dev-box"})
	if dev.Branch != "dev" || dev.Name != "dev-box" || filepath.Base(dev.Path) != "dev-box" {
		t.Fatalf("created %v", dev)
	}
	// From a linked worktree, the same repository and the same ids.
	list = f.list(t, feat.Path)
	if len(list) != 3 || list[0].Id != mainID || byPath(list, feat.Path).GetId() != feat.Id {
		t.Fatalf("listing from the worktree: %v", list)
	}
	// Ids and names survive a new service on the same store.
	again := New(Options{Store: f.mgr.Log()})
	resp, err := again.ListWorktrees(f.ctx, &pb.ListWorktreesRequest{RepoPath: repo})
	if err != nil || byPath(resp.Worktrees, dev.Path).GetId() != dev.Id || byPath(resp.Worktrees, dev.Path).GetName() != "dev-box" {
		t.Fatalf("new service lists %v (%v)", resp.GetWorktrees(), err)
	}

	_, err = f.svc.CreateWorktree(f.ctx, &pb.CreateWorktreeRequest{RepoPath: repo, Branch: "dev", Name: "dev2"})
	wantErr(t, "dev checked out twice", err, codes.FailedPrecondition, CodeBranchCheckedOut)
	if server.ErrorDetails(err)["worktree_path"] != dev.Path {
		t.Fatalf("details %v; want worktree_path %s", server.ErrorDetails(err), dev.Path)
	}
	_, err = f.svc.CreateWorktree(f.ctx, &pb.CreateWorktreeRequest{RepoPath: repo, Branch: "dev", Name: "dev3", CreateBranch: true})
	wantErr(t, "create_branch of an existing branch", err, codes.AlreadyExists, CodeBranchExists)
	_, err = f.svc.CreateWorktree(f.ctx, &pb.CreateWorktreeRequest{RepoPath: repo, Branch: "other", Name: "dev-box", CreateBranch: true})
	wantErr(t, "a second worktree at dev-box's path", err, codes.AlreadyExists, CodeWorktreeExists)

	// A session started by worktree id runs in it, and ListSessions finds
	// it by worktree; one started by the directory is recognised too.
	s, err := f.mgr.Create(f.ctx, session.CreateRequest{WorktreeID: dev.Id})
	if err != nil {
		t.Fatal(err)
	}
	if m := s.Meta(); m.WorkingDirectory != dev.Path || m.WorktreeID != dev.Id {
		t.Fatalf("session in %q worktree %q; want %s %s", m.WorkingDirectory, m.WorktreeID, dev.Path, dev.Id)
	}
	byDir, err := f.mgr.Create(f.ctx, session.CreateRequest{WorkingDirectory: feat.Path})
	if err != nil || byDir.Meta().WorktreeID != feat.Id {
		t.Fatalf("session started in %s has worktree %q (%v); want %s", feat.Path, byDir.Meta().WorktreeID, err, feat.Id)
	}
	_, err = f.mgr.Create(f.ctx, session.CreateRequest{WorktreeID: "wt-0000000000000000"})
	wantErr(t, "session in an unknown worktree", err, codes.NotFound, CodeWorktreeNotFound)
	inDev, _, err := f.mgr.List(f.ctx, eventlog.SessionFilter{WorktreeID: dev.Id})
	if err != nil || len(inDev) != 1 || inDev[0].ID != s.ID() {
		t.Fatalf("sessions in dev: %v (%v)", inDev, err)
	}
	if got := byPath(f.list(t, repo), dev.Path).GetActiveSessionId(); got != s.ID() {
		t.Fatalf("dev's active session %q; want %s", got, s.ID())
	}

	// Switch the session to feature/a: the previous worktree is reported.
	sw, err := f.svc.SwitchWorktree(f.ctx, &pb.SwitchWorktreeRequest{WorktreeId: feat.Id, SessionId: s.ID()})
	if err != nil {
		t.Fatal(err)
	}
	if sw.PreviousWorktreeId != dev.Id || sw.PreviousWorkingDirectory != dev.Path || sw.Worktree.GetId() != feat.Id {
		t.Fatalf("switch answered %v", sw)
	}
	if m := s.Meta(); m.WorkingDirectory != feat.Path || m.WorktreeID != feat.Id {
		t.Fatalf("after switch the session is in %q (%q)", m.WorkingDirectory, m.WorktreeID)
	}
	_, err = f.svc.SwitchWorktree(f.ctx, &pb.SwitchWorktreeRequest{WorktreeId: feat.Id})
	wantErr(t, "switch without session", err, codes.InvalidArgument, server.CodeInvalidArgument)
	_, err = f.svc.SwitchWorktree(f.ctx, &pb.SwitchWorktreeRequest{WorktreeId: feat.Id, SessionId: session.NewSessionID()})
	wantErr(t, "switch of an unknown session", err, codes.NotFound, server.CodeSessionNotFound)
	_, err = f.svc.SwitchWorktree(f.ctx, &pb.SwitchWorktreeRequest{WorktreeId: "wt-ffffffffffffffff", SessionId: s.ID()})
	wantErr(t, "switch to an unknown worktree", err, codes.NotFound, CodeWorktreeNotFound)

	// dev has no session now and a clean tree: removed.
	rm, err := f.svc.RemoveWorktree(f.ctx, &pb.RemoveWorktreeRequest{WorktreeId: dev.Id})
	if err != nil || !rm.Removed || rm.SessionsClosed != 0 {
		t.Fatalf("remove dev: %v %v", rm, err)
	}
	if _, err := os.Stat(dev.Path); !os.IsNotExist(err) {
		t.Fatalf("dev's directory is still there: %v", err)
	}
	// feature/a has two sessions and, once dirty, is refused twice.
	_, err = f.svc.RemoveWorktree(f.ctx, &pb.RemoveWorktreeRequest{WorktreeId: feat.Id})
	wantErr(t, "remove with sessions", err, codes.ResourceExhausted, CodeWorktreeInUse)
	if ids := server.ErrorDetails(err)["session_ids"]; !strings.Contains(ids, s.ID()) || !strings.Contains(ids, byDir.ID()) {
		t.Fatalf("session_ids %q", ids)
	}
	if _, _, err := f.mgr.MoveSession(f.ctx, s.ID(), repo, mainID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.mgr.Delete(f.ctx, byDir.ID()); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(feat.Path, "scratch.txt"), "untracked\n")
	_, err = f.svc.RemoveWorktree(f.ctx, &pb.RemoveWorktreeRequest{WorktreeId: feat.Id})
	wantErr(t, "remove a dirty tree", err, codes.FailedPrecondition, CodeWorktreeDirty)
	rm, err = f.svc.RemoveWorktree(f.ctx, &pb.RemoveWorktreeRequest{WorktreeId: feat.Id, Force: true})
	if err != nil || !rm.Removed {
		t.Fatalf("forced remove: %v %v", rm, err)
	}
	_, err = f.svc.RemoveWorktree(f.ctx, &pb.RemoveWorktreeRequest{WorktreeId: feat.Id})
	wantErr(t, "remove twice", err, codes.NotFound, CodeWorktreeNotFound)
	_, err = f.svc.RemoveWorktree(f.ctx, &pb.RemoveWorktreeRequest{WorktreeId: mainID})
	wantErr(t, "remove the main worktree", err, codes.FailedPrecondition, CodeMainWorktree)
	// The branches stay.
	if out := run(t, repo, "branch", "--list", "dev", "feature/a"); !strings.Contains(out, "dev") || !strings.Contains(out, "feature/a") {
		t.Fatalf("branches after removal: %q", out)
	}
}

// TestForcedRemoveClosesSessions: sessions in a removed worktree are
// closed, told why, and counted.
func TestForcedRemoveClosesSessions(t *testing.T) {
	f := newFixture(t)
	repo := newRepo(t, "proj")
	wt := f.create(t, &pb.CreateWorktreeRequest{RepoPath: repo, Branch: "x", CreateBranch: true})
	s, err := f.mgr.Create(f.ctx, session.CreateRequest{WorktreeID: wt.Id})
	if err != nil {
		t.Fatal(err)
	}
	rm, err := f.svc.RemoveWorktree(f.ctx, &pb.RemoveWorktreeRequest{WorktreeId: wt.Id, Force: true})
	if err != nil || !rm.Removed || rm.SessionsClosed != 1 {
		t.Fatalf("forced remove: %v %v", rm, err)
	}
	var found bool
	err = f.mgr.Log().Since(f.ctx, s.ID(), 0, func(ev eventlog.Event) error {
		found = found || strings.Contains(string(ev.Payload), CodeWorktreeRemoved)
		return nil
	})
	if err != nil || !found {
		t.Fatalf("the session got no %s event (%v)", CodeWorktreeRemoved, err)
	}
	_, err = f.mgr.Create(f.ctx, session.CreateRequest{WorktreeID: wt.Id})
	wantErr(t, "start in the removed worktree", err, codes.NotFound, CodeWorktreeNotFound)
}

// TestErrors: bad requests and git's refusals, each with its code.
func TestErrors(t *testing.T) {
	f := newFixture(t)
	repo := newRepo(t, "proj")
	plain := t.TempDir()
	full := filepath.Join(t.TempDir(), "full")
	if err := os.MkdirAll(full, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(full, "f"), "x")
	for _, tc := range []struct {
		name    string
		req     *pb.CreateWorktreeRequest
		code    codes.Code
		betcode string
	}{
		{"not a repository", &pb.CreateWorktreeRequest{RepoPath: plain, Branch: "b", CreateBranch: true}, codes.FailedPrecondition, CodeNotARepository},
		{"missing directory", &pb.CreateWorktreeRequest{RepoPath: filepath.Join(plain, "nope"), Branch: "b", CreateBranch: true}, codes.NotFound, server.CodeDirectoryNotFound},
		{"relative repo path", &pb.CreateWorktreeRequest{RepoPath: "proj", Branch: "b"}, codes.InvalidArgument, server.CodeInvalidArgument},
		{"no branch", &pb.CreateWorktreeRequest{RepoPath: repo}, codes.InvalidArgument, server.CodeInvalidArgument},
		{"branch with ..", &pb.CreateWorktreeRequest{RepoPath: repo, Branch: "a..b", CreateBranch: true}, codes.InvalidArgument, server.CodeInvalidArgument},
		{"branch with space", &pb.CreateWorktreeRequest{RepoPath: repo, Branch: "a b", CreateBranch: true}, codes.InvalidArgument, server.CodeInvalidArgument},
		{"branch like an option", &pb.CreateWorktreeRequest{RepoPath: repo, Branch: "-f", CreateBranch: true}, codes.InvalidArgument, server.CodeInvalidArgument},
		{"name climbing out", &pb.CreateWorktreeRequest{RepoPath: repo, Branch: "b", Name: "../../etc", CreateBranch: true}, codes.InvalidArgument, server.CodeInvalidArgument},
		{"absolute name", &pb.CreateWorktreeRequest{RepoPath: repo, Branch: "b", Name: "/tmp/x", CreateBranch: true}, codes.InvalidArgument, server.CodeInvalidArgument},
		{"control character", &pb.CreateWorktreeRequest{RepoPath: repo, Branch: "b", Name: "a\x01b", CreateBranch: true}, codes.InvalidArgument, server.CodeInvalidArgument},
		{"relative path", &pb.CreateWorktreeRequest{RepoPath: repo, Branch: "b", Path: "wt", CreateBranch: true}, codes.InvalidArgument, server.CodeInvalidArgument},
		{"path with ..", &pb.CreateWorktreeRequest{RepoPath: repo, Branch: "b", Path: plain + "/../x", CreateBranch: true}, codes.InvalidArgument, server.CodeInvalidArgument},
		{"path not empty", &pb.CreateWorktreeRequest{RepoPath: repo, Branch: "b", Path: full, CreateBranch: true}, codes.AlreadyExists, CodeWorktreeExists},
		{"no such branch", &pb.CreateWorktreeRequest{RepoPath: repo, Branch: "nope"}, codes.NotFound, CodeBranchNotFound},
		{"main checked out", &pb.CreateWorktreeRequest{RepoPath: repo, Branch: "main", Name: "m2"}, codes.FailedPrecondition, CodeBranchCheckedOut},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.svc.CreateWorktree(f.ctx, tc.req)
			wantErr(t, tc.name, err, tc.code, tc.betcode)
		})
	}
	_, err := f.svc.ListWorktrees(f.ctx, &pb.ListWorktreesRequest{RepoPath: plain})
	wantErr(t, "list outside a repository", err, codes.FailedPrecondition, CodeNotARepository)
	_, err = f.svc.RemoveWorktree(f.ctx, &pb.RemoveWorktreeRequest{WorktreeId: "../../x"})
	wantErr(t, "remove a malformed id", err, codes.NotFound, CodeWorktreeNotFound)
	// Nothing was left behind by the refused requests.
	if got := f.list(t, repo); len(got) != 1 {
		t.Fatalf("worktrees after refused requests: %v", got)
	}
}

// TestLocked: a locked worktree is listed as such and never removed, and
// a missing locked one's path cannot be reused.
func TestLocked(t *testing.T) {
	f := newFixture(t)
	repo := newRepo(t, "proj")
	wt := f.create(t, &pb.CreateWorktreeRequest{RepoPath: repo, Branch: "usb", CreateBranch: true})
	run(t, repo, "worktree", "lock", "--reason", "on a usb disk", wt.Path)
	got := byPath(f.list(t, repo), wt.Path)
	if !got.GetLocked() || got.GetLockReason() != "on a usb disk" {
		t.Fatalf("locked worktree listed as %v", got)
	}
	for _, force := range []bool{false, true} {
		_, err := f.svc.RemoveWorktree(f.ctx, &pb.RemoveWorktreeRequest{WorktreeId: wt.Id, Force: force})
		wantErr(t, "remove locked", err, codes.FailedPrecondition, CodeWorktreeLocked)
		if server.ErrorDetails(err)["lock_reason"] != "on a usb disk" {
			t.Fatalf("details %v", server.ErrorDetails(err))
		}
	}
	if err := os.RemoveAll(wt.Path); err != nil {
		t.Fatal(err)
	}
	_, err := f.svc.CreateWorktree(f.ctx, &pb.CreateWorktreeRequest{RepoPath: repo, Branch: "other", Path: wt.Path, CreateBranch: true})
	wantErr(t, "reuse a locked worktree's path", err, codes.FailedPrecondition, CodeWorktreeLocked)
}

// TestBareClone: worktrees of a bare repository go beside it, without its
// ".git" suffix; the bare repository itself is not listed.
func TestBareClone(t *testing.T) {
	f := newFixture(t)
	src := newRepo(t, "src")
	bare := filepath.Join(filepath.Dir(src), "proj.git")
	run(t, filepath.Dir(src), "clone", "-q", "--bare", src, bare)
	if got := f.list(t, bare); len(got) != 0 {
		t.Fatalf("bare repository lists %v", got)
	}
	wt := f.create(t, &pb.CreateWorktreeRequest{RepoPath: bare, Branch: "main"})
	if want := filepath.Join(filepath.Dir(bare), "proj.worktrees", "main"); wt.Path != want || wt.RepoPath != bare || wt.IsMain {
		t.Fatalf("bare clone's worktree %v; want at %s", wt, want)
	}
	list := f.list(t, bare)
	if len(list) != 1 || list[0].Id != wt.Id || list[0].Branch != "main" {
		t.Fatalf("bare repository lists %v", list)
	}
	if rm, err := f.svc.RemoveWorktree(f.ctx, &pb.RemoveWorktreeRequest{WorktreeId: wt.Id}); err != nil || !rm.Removed {
		t.Fatalf("remove: %v %v", rm, err)
	}
}

// TestDetachedHead: a detached main checkout is listed without a branch,
// and its branch is free for a worktree.
func TestDetachedHead(t *testing.T) {
	f := newFixture(t)
	repo := newRepo(t, "proj")
	head := run(t, repo, "rev-parse", "HEAD")
	run(t, repo, "checkout", "-q", "--detach", "HEAD")
	list := f.list(t, repo)
	if len(list) != 1 || !list[0].Detached || list[0].Branch != "" || list[0].Head != head {
		t.Fatalf("detached repository lists %v", list)
	}
	wt := f.create(t, &pb.CreateWorktreeRequest{RepoPath: repo, Branch: "main"})
	if wt.Branch != "main" || wt.Detached {
		t.Fatalf("worktree of main: %v", wt)
	}
	// A worktree made by git itself, detached, gets an id too.
	other := filepath.Join(filepath.Dir(repo), "elsewhere")
	run(t, repo, "worktree", "add", "-q", "--detach", other, "HEAD")
	got := byPath(f.list(t, repo), other)
	if got == nil || !got.Detached || !validID(got.Id) || got.Name != "elsewhere" {
		t.Fatalf("git-made worktree listed as %v", got)
	}
	if rm, err := f.svc.RemoveWorktree(f.ctx, &pb.RemoveWorktreeRequest{WorktreeId: got.Id}); err != nil || !rm.Removed {
		t.Fatalf("remove: %v %v", rm, err)
	}
}

// TestSubmodule: a submodule's own worktrees, and a superproject worktree
// whose initialised submodule git removes only with force.
func TestSubmodule(t *testing.T) {
	f := newFixture(t)
	lib := newRepo(t, "lib")
	super := newRepo(t, "super")
	run(t, super, "submodule", "add", "-q", lib, "lib")
	run(t, super, "commit", "-q", "-m", "add lib")
	sub := filepath.Join(super, "lib")

	list := f.list(t, sub)
	if len(list) != 1 || list[0].Path != sub || !list[0].IsMain {
		t.Fatalf("submodule lists %v", list)
	}
	swt := f.create(t, &pb.CreateWorktreeRequest{RepoPath: sub, Branch: "lib-fix", CreateBranch: true})
	if want := filepath.Join(super, "lib.worktrees", "lib-fix"); swt.Path != want {
		t.Fatalf("submodule worktree at %s; want %s", swt.Path, want)
	}
	if rm, err := f.svc.RemoveWorktree(f.ctx, &pb.RemoveWorktreeRequest{WorktreeId: swt.Id}); err != nil || !rm.Removed {
		t.Fatalf("remove submodule worktree: %v %v", rm, err)
	}

	wt := f.create(t, &pb.CreateWorktreeRequest{RepoPath: super, Branch: "with-lib", CreateBranch: true})
	run(t, wt.Path, "submodule", "update", "-q", "--init")
	if _, err := os.Stat(filepath.Join(wt.Path, "lib", "README.md")); err != nil {
		t.Fatalf("submodule not checked out in the worktree: %v", err)
	}
	_, err := f.svc.RemoveWorktree(f.ctx, &pb.RemoveWorktreeRequest{WorktreeId: wt.Id})
	wantErr(t, "remove with a submodule", err, codes.FailedPrecondition, CodeWorktreeHasSubmodules)
	if rm, err := f.svc.RemoveWorktree(f.ctx, &pb.RemoveWorktreeRequest{WorktreeId: wt.Id, Force: true}); err != nil || !rm.Removed {
		t.Fatalf("forced remove: %v %v", rm, err)
	}
}
