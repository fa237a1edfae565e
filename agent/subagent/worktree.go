package subagent

import (
	"context"
	"strings"
	"unicode"

	"google.golang.org/grpc/codes"

	"github.com/betcode-dev/betcode/agent/server"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// Worktrees is what the service needs of WorktreeService (package
// worktree) for SubagentSpec.create_worktree; *worktree.Service is one.
type Worktrees interface {
	CreateWorktree(ctx context.Context, req *pb.CreateWorktreeRequest) (*pb.WorktreeInfo, error)
}

// maxSlug bounds the part of a worktree's branch taken from the subagent's
// name.
const maxSlug = 40

// worktreeBranch is the branch (and worktree name) of a subagent's own
// worktree: "subagent/<name>-<first 8 characters of its id>", the name
// lowered and reduced to letters, digits, '.', '_' and '-'. git checks
// the result (`git check-ref-format --branch`) when the worktree is made.
func worktreeBranch(name, id string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		ok := r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '.')
		switch {
		case ok:
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= maxSlug {
			break
		}
	}
	// No leading or trailing '.' or '-' (git refuses "..", ".lock", a
	// component starting with '.').
	slug := strings.Trim(b.String(), ".-")
	slug = strings.ReplaceAll(slug, "..", ".")
	slug = strings.TrimSuffix(slug, ".lock")
	if slug == "" {
		slug = "subagent"
	}
	short, _, _ := strings.Cut(id, "-")
	if len(short) > 8 {
		short = short[:8]
	}
	return "subagent/" + slug + "-" + short
}

// createWorktree makes the subagent's own worktree, on a new branch, from
// the repository holding dir, at WorktreeService's default place (beside
// the repository). It returns the worktree's id.
func (s *Service) createWorktree(ctx context.Context, dir, name, id string) (string, error) {
	if s.opt.Worktrees == nil {
		return "", fail(codes.Unimplemented, server.CodeNotImplemented, "create_worktree: this agent does not manage worktrees")
	}
	branch := worktreeBranch(name, id)
	wi, err := s.opt.Worktrees.CreateWorktree(ctx, &pb.CreateWorktreeRequest{RepoPath: dir, Branch: branch, CreateBranch: true})
	if err != nil {
		if code := errorCode(err); code == CodeNotARepository {
			return "", fail(codes.FailedPrecondition, CodeNotARepository,
				"create_worktree: %s is not in a git repository: give a working_directory inside one, or spawn without create_worktree", dir)
		}
		return "", sessionStatus(err, "create_worktree: git worktree for branch "+branch)
	}
	s.opt.Logger.Info("subagent: worktree created", "subagent_id", id, "worktree_id", wi.GetId(), "path", wi.GetPath(), "branch", branch)
	return wi.GetId(), nil
}
