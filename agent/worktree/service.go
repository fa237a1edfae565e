package worktree

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/betcode-dev/betcode/agent/server"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// DefaultGitTimeout bounds each git command (a checkout of a large
// repository is the slowest).
const DefaultGitTimeout = 2 * time.Minute

// Options configure a Service.
type Options struct {
	// Store keeps the worktrees' records (the event log); required.
	Store KV
	// Sessions is the session manager; nil: SwitchWorktree is refused and
	// no session is reported or closed.
	Sessions Sessions
	// Git is the git binary; default "git" on PATH.
	Git string
	// GitTimeout bounds each git command; default DefaultGitTimeout.
	GitTimeout time.Duration
	// Home is what "~" in repo_path means; default: the daemon's $HOME.
	Home string
	// Logger gets what the service did; default: discard.
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Service implements pb.WorktreeServiceServer with the git binary.
type Service struct {
	pb.UnimplementedWorktreeServiceServer
	opts  Options
	git   *git
	store store
	// mu serialises the calls that change worktrees, so that the checks
	// before `git worktree add|remove` still hold when it runs.
	mu sync.Mutex
}

var _ pb.WorktreeServiceServer = (*Service)(nil)

// New returns a Service.
func New(opts Options) *Service {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Home == "" {
		opts.Home, _ = os.UserHomeDir()
	}
	if opts.GitTimeout <= 0 {
		opts.GitTimeout = DefaultGitTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Service{opts: opts, git: newGit(opts.Git, opts.GitTimeout), store: store{kv: opts.Store}}
}

// repo is a repository's worktrees as git lists them.
type repo struct {
	base    string // the main worktree (or bare repository) path
	entries []entry
}

// expand turns repo_path into a cleaned absolute path ("~/" is the home).
func (s *Service) expand(p string) (string, error) {
	switch {
	case p == "":
		return "", invalidf("repo_path is required")
	case p == "~" || strings.HasPrefix(p, "~/"):
		if s.opts.Home == "" {
			return "", invalidf("repo_path %q: the agent has no home directory", p)
		}
		p = filepath.Join(s.opts.Home, strings.TrimPrefix(p, "~"))
	case !filepath.IsAbs(p):
		return "", invalidf("repo_path %q must be an absolute path or start with ~/", p)
	}
	return checkTargetPath(p)
}

// openRepo lists the worktrees of the repository that holds dir.
func (s *Service) openRepo(ctx context.Context, dir string) (repo, error) {
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return repo{}, server.StatusWith(codes.NotFound, server.CodeDirectoryNotFound,
			fmt.Sprintf("directory %s does not exist", dir), map[string]string{"path": dir})
	}
	if err != nil {
		return repo{}, fmt.Errorf("stat %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return repo{}, invalidf("%s is not a directory", dir)
	}
	out, err := s.git.run(ctx, dir, "worktree", "list", "--porcelain", "-z")
	if stderrHas(err, "not a git repository") {
		return repo{}, server.StatusWith(codes.FailedPrecondition, CodeNotARepository,
			fmt.Sprintf("%s is not in a git repository", dir), map[string]string{"path": dir})
	}
	if err != nil {
		return repo{}, err
	}
	entries, err := parseList(out)
	if err != nil {
		return repo{}, err
	}
	if len(entries) == 0 {
		return repo{}, fmt.Errorf("git worktree list in %s listed nothing", dir)
	}
	if main := &entries[0]; !main.Bare {
		main.Path = s.mainWorkTree(ctx, main.Path)
	}
	for i := range entries {
		entries[i].Path = canonical(entries[i].Path)
	}
	return repo{base: entries[0].Path, entries: entries}, nil
}

// mainWorkTree corrects the main worktree path git 2.39 lists for a
// submodule: its git directory (.git/modules/NAME), whose core.worktree
// names the real work tree.
func (s *Service) mainWorkTree(ctx context.Context, p string) string {
	if _, err := os.Stat(filepath.Join(p, ".git")); err == nil {
		return p
	}
	if _, err := os.Stat(filepath.Join(p, "HEAD")); err != nil {
		return p // not a git directory either: leave it to git
	}
	wt, err := s.git.line(ctx, p, "config", "--get", "core.worktree")
	if err != nil || wt == "" {
		return p
	}
	if !filepath.IsAbs(wt) {
		wt = filepath.Join(p, wt)
	}
	return wt
}

// find returns the entry at path (canonical) and whether it is the main
// worktree.
func (r repo) find(path string) (entry, bool, bool) {
	for i, e := range r.entries {
		if e.Path == path {
			return e, i == 0, true
		}
	}
	return entry{}, false, false
}

// recordOf returns the stored record of e, storing a new one for a
// worktree seen for the first time.
func (s *Service) recordOf(ctx context.Context, r repo, e entry) (record, error) {
	id := idFor(e.Path)
	rec, ok, err := s.store.get(ctx, id)
	if err != nil {
		return record{}, err
	}
	if ok && rec.Path == e.Path && rec.Repo == r.base {
		return rec, nil
	}
	if !ok {
		rec = record{ID: id, Name: filepath.Base(e.Path), CreatedAt: s.opts.Now().UTC()}
	}
	rec.Path, rec.Repo = e.Path, r.base
	return rec, s.store.put(ctx, rec)
}

// info builds the WorktreeInfo of e.
func (s *Service) info(ctx context.Context, r repo, e entry, main bool, rec record) *pb.WorktreeInfo {
	wi := &pb.WorktreeInfo{
		Id: rec.ID, Name: rec.Name, Path: e.Path, Branch: e.Branch, CreatedAt: timestamppb.New(rec.CreatedAt),
		IsMain: main, Locked: e.Locked, LockReason: e.LockReason, Head: e.Head, Detached: e.Detached,
		Prunable: e.Prunable, RepoPath: r.base,
	}
	if s.opts.Sessions != nil {
		refs, err := s.opts.Sessions.InWorktree(ctx, rec.ID)
		if err != nil {
			s.opts.Logger.Warn("worktree: listing its sessions", "worktree_id", rec.ID, "err", err)
		}
		for _, ref := range refs {
			if ref.Active {
				wi.ActiveSessionId = ref.ID
				break
			}
		}
		if wi.ActiveSessionId == "" && len(refs) > 0 {
			wi.ActiveSessionId = refs[0].ID // the most recently used
		}
	}
	return wi
}

// ListWorktrees lists the worktrees of the repository at repo_path (any
// directory in it, a linked worktree's or a bare repository too). A bare
// repository itself is not listed: it has no work tree to run in.
func (s *Service) ListWorktrees(ctx context.Context, req *pb.ListWorktreesRequest) (*pb.ListWorktreesResponse, error) {
	dir, err := s.expand(req.RepoPath)
	if err != nil {
		return nil, toStatus(err)
	}
	r, err := s.openRepo(ctx, dir)
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &pb.ListWorktreesResponse{}
	for i, e := range r.entries {
		if e.Bare {
			continue
		}
		rec, err := s.recordOf(ctx, r, e)
		if err != nil {
			return nil, toStatus(err)
		}
		resp.Worktrees = append(resp.Worktrees, s.info(ctx, r, e, i == 0, rec))
	}
	return resp, nil
}

// CreateWorktree adds a worktree with `git worktree add`: for an existing
// branch (git's own remote-tracking guess included), or, with
// create_branch, a new branch at the repository's HEAD.
func (s *Service) CreateWorktree(ctx context.Context, req *pb.CreateWorktreeRequest) (*pb.WorktreeInfo, error) {
	wi, err := s.create(ctx, req)
	return wi, toStatus(err)
}

func (s *Service) create(ctx context.Context, req *pb.CreateWorktreeRequest) (*pb.WorktreeInfo, error) {
	dir, err := s.expand(req.RepoPath)
	if err != nil {
		return nil, err
	}
	if req.Branch == "" {
		return nil, invalidf("branch is required")
	}
	if err := s.git.checkRefName(ctx, "branch", req.Branch); err != nil {
		return nil, err
	}
	name := req.Name
	if name == "" {
		name = req.Branch
	}
	if err := s.git.checkRefName(ctx, "name", name); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.openRepo(ctx, dir)
	if err != nil {
		return nil, err
	}
	target := defaultPath(r.base, name)
	if req.Path != "" {
		if target, err = checkTargetPath(req.Path); err != nil {
			return nil, err
		}
	}
	target = canonical(target)
	for _, e := range r.entries {
		switch {
		case e.Path == target && e.Locked:
			return nil, locked(e)
		case e.Path == target:
			return nil, server.StatusWith(codes.AlreadyExists, CodeWorktreeExists,
				fmt.Sprintf("%s is a worktree already", target), map[string]string{"path": target})
		case e.Branch == req.Branch && !req.CreateBranch:
			return nil, checkedOut(req.Branch, e.Path)
		}
	}
	if fi, err := os.Stat(target); err == nil && (!fi.IsDir() || !emptyDir(target)) {
		return nil, server.StatusWith(codes.AlreadyExists, CodeWorktreeExists,
			fmt.Sprintf("%s exists and is not an empty directory", target), map[string]string{"path": target})
	}
	_, err = s.git.run(ctx, dir, "rev-parse", "--verify", "--quiet", "refs/heads/"+req.Branch)
	exists := err == nil
	if _, failed := err.(*gitError); err != nil && !failed {
		return nil, err
	}
	args := []string{"worktree", "add", "--quiet"}
	switch {
	case req.CreateBranch && exists:
		return nil, server.StatusWith(codes.AlreadyExists, CodeBranchExists,
			fmt.Sprintf("branch %q exists already: create the worktree without create_branch", req.Branch),
			map[string]string{"branch": req.Branch})
	case req.CreateBranch:
		args = append(args, "-b", req.Branch, "--", target)
	default:
		args = append(args, "--", target, req.Branch)
	}
	start := time.Now()
	if _, err := s.git.run(ctx, dir, args...); err != nil {
		return nil, addError(err, req.Branch, target)
	}
	after, err := s.openRepo(ctx, dir)
	if err != nil {
		return nil, err
	}
	e, main, ok := after.find(canonical(target))
	if !ok {
		return nil, fmt.Errorf("git worktree add %s: the new worktree is not listed", target)
	}
	rec := record{ID: idFor(e.Path), Path: e.Path, Repo: after.base, Name: name, CreatedAt: s.opts.Now().UTC()}
	if err := s.store.put(ctx, rec); err != nil {
		return nil, err
	}
	s.opts.Logger.Info("worktree: created", "worktree_id", rec.ID, "path", e.Path, "branch", e.Branch,
		"new_branch", req.CreateBranch, "took", time.Since(start))
	return s.info(ctx, after, e, main, rec), nil
}

func emptyDir(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	names, _ := f.Readdirnames(1)
	return len(names) == 0
}

func locked(e entry) error {
	msg := fmt.Sprintf("worktree %s is locked", e.Path)
	if e.LockReason != "" {
		msg += " (" + e.LockReason + ")"
	}
	return server.StatusWith(codes.FailedPrecondition, CodeWorktreeLocked, msg+": unlock it with git worktree unlock",
		map[string]string{"path": e.Path, "lock_reason": e.LockReason})
}

func checkedOut(branch, path string) error {
	return server.StatusWith(codes.FailedPrecondition, CodeBranchCheckedOut,
		fmt.Sprintf("branch %q is already checked out in %s", branch, path),
		map[string]string{"branch": branch, "worktree_path": path})
}

// addError maps a failed `git worktree add` to a status error.
func addError(err error, branch, target string) error {
	switch {
	case stderrHas(err, "already checked out at"), stderrHas(err, "already used by worktree at"):
		return checkedOut(branch, "another worktree")
	case stderrHas(err, "missing but locked worktree"):
		return locked(entry{Path: target})
	case stderrHas(err, "invalid reference"):
		return server.StatusWith(codes.NotFound, CodeBranchNotFound,
			fmt.Sprintf("branch %q does not exist: set create_branch to create it", branch), map[string]string{"branch": branch})
	case stderrHas(err, "already exists"):
		return server.StatusWith(codes.AlreadyExists, CodeWorktreeExists, err.Error(), map[string]string{"path": target})
	}
	return err
}

// lookup returns the record of worktree id.
func (s *Service) lookup(ctx context.Context, id string) (record, error) {
	if id == "" {
		return record{}, invalidf("worktree_id is required")
	}
	if !validID(id) {
		return record{}, worktreeNotFound(id)
	}
	rec, ok, err := s.store.get(ctx, id)
	if err != nil {
		return record{}, err
	}
	if !ok {
		return record{}, worktreeNotFound(id)
	}
	return rec, nil
}

// WorktreeDir returns the directory of worktree id, for a session that
// starts in it (session.Worktrees).
func (s *Service) WorktreeDir(ctx context.Context, id string) (string, error) {
	rec, err := s.lookup(ctx, id)
	if err != nil {
		return "", toStatus(err)
	}
	if fi, err := os.Stat(rec.Path); err != nil || !fi.IsDir() {
		return "", server.StatusWith(codes.NotFound, CodeWorktreeNotFound,
			fmt.Sprintf("worktree %s: its directory %s is gone", id, rec.Path), map[string]string{"worktree_id": id})
	}
	return rec.Path, nil
}

// WorktreeAt returns the id of the known worktree whose top is dir
// (session.Worktrees).
func (s *Service) WorktreeAt(ctx context.Context, dir string) (string, bool) {
	id := idFor(canonical(dir))
	_, ok, err := s.store.get(ctx, id)
	return id, ok && err == nil
}

// SwitchWorktree moves a session to the worktree: its next turn runs
// there. The previous worktree and directory are reported.
func (s *Service) SwitchWorktree(ctx context.Context, req *pb.SwitchWorktreeRequest) (*pb.SwitchWorktreeResponse, error) {
	resp, err := s.switchTo(ctx, req)
	return resp, toStatus(err)
}

func (s *Service) switchTo(ctx context.Context, req *pb.SwitchWorktreeRequest) (*pb.SwitchWorktreeResponse, error) {
	if req.SessionId == "" {
		return nil, invalidf("session_id is required: the session whose working directory moves")
	}
	if s.opts.Sessions == nil {
		return nil, server.Status(codes.Unimplemented, server.CodeNotImplemented, "this agent does not run sessions")
	}
	dir, err := s.WorktreeDir(ctx, req.WorktreeId)
	if err != nil {
		return nil, err
	}
	rec, err := s.lookup(ctx, req.WorktreeId)
	if err != nil {
		return nil, err
	}
	prevDir, prevWT, err := s.opts.Sessions.Move(ctx, req.SessionId, dir, rec.ID)
	if err != nil {
		return nil, err
	}
	s.opts.Logger.Info("worktree: session switched", "session_id", req.SessionId, "worktree_id", rec.ID,
		"from", prevDir, "to", dir)
	resp := &pb.SwitchWorktreeResponse{PreviousWorktreeId: prevWT, PreviousWorkingDirectory: prevDir}
	r, err := s.openRepo(ctx, dir)
	if err != nil {
		return nil, err
	}
	e, main, ok := r.find(rec.Path)
	if !ok {
		e = entry{Path: rec.Path}
	}
	resp.Worktree = s.info(ctx, r, e, main, rec)
	return resp, nil
}

// RemoveWorktree removes a worktree with `git worktree remove`. It refuses
// the main worktree and a locked one; without force also one with
// uncommitted changes or untracked files, or with sessions. With force the
// sessions are closed first (their CLI stopped, a running turn cancelled,
// an ErrorEvent WORKTREE_REMOVED sent) and the changes are lost. The
// branch is kept.
func (s *Service) RemoveWorktree(ctx context.Context, req *pb.RemoveWorktreeRequest) (*pb.RemoveWorktreeResponse, error) {
	resp, err := s.remove(ctx, req)
	return resp, toStatus(err)
}

func (s *Service) remove(ctx context.Context, req *pb.RemoveWorktreeRequest) (*pb.RemoveWorktreeResponse, error) {
	rec, err := s.lookup(ctx, req.WorktreeId)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.openRepo(ctx, rec.Repo)
	if err != nil {
		return nil, err
	}
	e, main, ok := r.find(rec.Path)
	switch {
	case !ok:
		// Removed outside BetCode: forget it.
		if err := s.store.delete(ctx, rec.ID); err != nil {
			return nil, err
		}
		return nil, worktreeNotFound(rec.ID)
	case main:
		return nil, server.StatusWith(codes.FailedPrecondition, CodeMainWorktree,
			fmt.Sprintf("%s is the repository's main working tree; only linked worktrees are removed", e.Path),
			map[string]string{"path": e.Path})
	case e.Locked:
		return nil, locked(e)
	}
	var refs []SessionRef
	if s.opts.Sessions != nil {
		if refs, err = s.opts.Sessions.InWorktree(ctx, rec.ID); err != nil {
			return nil, err
		}
	}
	if len(refs) > 0 && !req.Force {
		ids := make([]string, len(refs))
		for i, ref := range refs {
			ids[i] = ref.ID
		}
		return nil, server.StatusWith(codes.ResourceExhausted, CodeWorktreeInUse,
			fmt.Sprintf("worktree %s is used by %d session(s): remove it with force to close them", rec.ID, len(refs)),
			map[string]string{"session_ids": strings.Join(ids, ",")})
	}
	if !req.Force && !e.Prunable {
		out, err := s.git.run(ctx, e.Path, "status", "--porcelain", "-z", "--untracked-files=normal")
		if err != nil {
			return nil, err
		}
		if n := strings.Count(string(out), "\x00"); n > 0 {
			return nil, server.StatusWith(codes.FailedPrecondition, CodeWorktreeDirty,
				fmt.Sprintf("worktree %s has %d changed or untracked file(s): commit them, or remove it with force", e.Path, n),
				map[string]string{"path": e.Path, "changed_files": fmt.Sprint(n)})
		}
	}
	closed := uint32(0)
	for _, ref := range refs {
		msg := fmt.Sprintf("worktree %s (%s) was removed: the session was closed; switch it to another worktree to go on", rec.Name, e.Path)
		if err := s.opts.Sessions.Close(ctx, ref.ID, CodeWorktreeRemoved, msg); err != nil {
			return nil, fmt.Errorf("close session %s: %w", ref.ID, err)
		}
		closed++
	}
	if e.Prunable {
		_, err = s.git.run(ctx, r.base, "worktree", "prune")
	} else {
		args := []string{"worktree", "remove"}
		if req.Force {
			args = append(args, "--force")
		}
		_, err = s.git.run(ctx, r.base, append(args, "--", e.Path)...)
	}
	switch {
	case stderrHas(err, "contains modified or untracked files"):
		return nil, server.StatusWith(codes.FailedPrecondition, CodeWorktreeDirty, err.Error(), map[string]string{"path": e.Path})
	case stderrHas(err, "containing submodules"):
		return nil, server.StatusWith(codes.FailedPrecondition, CodeWorktreeHasSubmodules,
			fmt.Sprintf("worktree %s has initialised submodules: git removes it only with force", e.Path), map[string]string{"path": e.Path})
	case stderrHas(err, "locked"):
		return nil, locked(e)
	case err != nil:
		return nil, err
	}
	if err := s.store.delete(ctx, rec.ID); err != nil {
		return nil, err
	}
	s.opts.Logger.Info("worktree: removed", "worktree_id", rec.ID, "path", e.Path, "force", req.Force, "sessions_closed", closed)
	return &pb.RemoveWorktreeResponse{Removed: true, SessionsClosed: closed}, nil
}
