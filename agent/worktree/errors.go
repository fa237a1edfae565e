package worktree

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/server"
	"github.com/betcode-dev/betcode/agent/session"
)

// BetCode error codes of WorktreeService (WORKTREE_NOT_FOUND and
// WORKTREE_IN_USE are the spec's; the others name git's refusals).
const (
	CodeWorktreeNotFound = "WORKTREE_NOT_FOUND" // NOT_FOUND
	// CodeWorktreeInUse: sessions run in the worktree (RemoveWorktree
	// without force); details session_ids.
	CodeWorktreeInUse = "WORKTREE_IN_USE" // RESOURCE_EXHAUSTED
	// CodeWorktreeLocked: `git worktree lock`ed; details lock_reason.
	CodeWorktreeLocked = "WORKTREE_LOCKED" // FAILED_PRECONDITION
	// CodeWorktreeDirty: uncommitted changes or untracked files
	// (RemoveWorktree without force); details changed_files.
	CodeWorktreeDirty = "WORKTREE_DIRTY" // FAILED_PRECONDITION
	// CodeWorktreeHasSubmodules: git removes a worktree with initialised
	// submodules only with force.
	CodeWorktreeHasSubmodules = "WORKTREE_HAS_SUBMODULES" // FAILED_PRECONDITION
	// CodeMainWorktree: the repository's main working tree is not removed.
	CodeMainWorktree = "MAIN_WORKTREE" // FAILED_PRECONDITION
	// CodeWorktreeExists: the target path exists or is a worktree already.
	CodeWorktreeExists = "WORKTREE_EXISTS" // ALREADY_EXISTS
	// CodeNotARepository: repo_path is a directory outside any git
	// repository.
	CodeNotARepository = "NOT_A_REPOSITORY" // FAILED_PRECONDITION
	// CodeBranchCheckedOut: the branch is checked out in another worktree;
	// details worktree_path.
	CodeBranchCheckedOut = "BRANCH_CHECKED_OUT" // FAILED_PRECONDITION
	// CodeBranchExists: create_branch for a branch that exists.
	CodeBranchExists = "BRANCH_EXISTS" // ALREADY_EXISTS
	// CodeBranchNotFound: no such branch (local, or one remote's).
	CodeBranchNotFound = "BRANCH_NOT_FOUND" // NOT_FOUND
	// CodeWorktreeRemoved is the ErrorEvent a session gets when a forced
	// RemoveWorktree closes it.
	CodeWorktreeRemoved = "WORKTREE_REMOVED"
)

func worktreeNotFound(id string) error {
	return server.StatusWith(codes.NotFound, CodeWorktreeNotFound, "Worktree does not exist: "+id,
		map[string]string{"worktree_id": id})
}

// toStatus maps an error of this package, git or the session manager to a
// status error with a BetCode code.
func toStatus(err error) error {
	var inv *invalidError
	var sinv *session.InvalidError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &inv):
		return server.Status(codes.InvalidArgument, server.CodeInvalidArgument, inv.msg)
	case errors.As(err, &sinv):
		return server.Status(codes.InvalidArgument, server.CodeInvalidArgument, sinv.Msg)
	case errors.Is(err, errGitMissing):
		return server.Status(codes.FailedPrecondition, server.CodeGitUnavailable, err.Error()+": install git")
	case errors.Is(err, session.ErrNotFound):
		return server.Status(codes.NotFound, server.CodeSessionNotFound, "Session does not exist")
	case errors.Is(err, session.ErrBusy):
		return server.StatusWith(codes.FailedPrecondition, server.CodeSessionActive,
			"Session has active turn: switch it once the turn is over", map[string]string{"required_state": "IDLE"})
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return server.Status(codes.Internal, server.CodeInternal, err.Error())
}
