package subagent

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/provider"
	"github.com/betcode-dev/betcode/agent/server"
	"github.com/betcode-dev/betcode/agent/session"
)

// BetCode error codes of SubagentService (the spec's catalogue).
const (
	CodeSubagentLimit           = "SUBAGENT_LIMIT"
	CodeWorktreeInUse           = "WORKTREE_IN_USE"
	CodeInvalidPermissionConfig = "INVALID_PERMISSION_CONFIG"
	CodeDAGCycle                = "DAG_CYCLE"
	CodeSessionNotFound         = session.CodeSessionNotFound
	// CodeSubagentNotFound and CodeOrchestrationNotFound: no such id
	// (NOT_FOUND); the spec names no code for them.
	CodeSubagentNotFound      = "SUBAGENT_NOT_FOUND"
	CodeOrchestrationNotFound = "ORCHESTRATION_NOT_FOUND"
	// CodeSpecNotFound: teammate_spec_id names no saved teammate spec
	// (NOT_FOUND).
	CodeSpecNotFound = "SPEC_NOT_FOUND"
	// CodeSpecsUnavailable: teammate_spec_id on an agent without teammate
	// specs (FAILED_PRECONDITION).
	CodeSpecsUnavailable = "TEAMMATE_SPECS_UNAVAILABLE"
	// CodeNotARepository: create_worktree in a directory outside any git
	// repository (FAILED_PRECONDITION), as WorktreeService says it.
	CodeNotARepository = "NOT_A_REPOSITORY"
)

// ErrDisabled is the error of every call when the subagent_orchestration
// flag is off.
var ErrDisabled = server.Status(codes.Unimplemented, server.CodeNotImplemented,
	"subagent orchestration is not enabled (ALPHA): start the agent with --feature-flag "+server.SubagentOrchestration+
		" (or feature-flag in its config file, BETCODE_FEATURE_FLAG in its environment)")

func fail(c codes.Code, code, format string, args ...any) error {
	return server.Status(c, code, fmt.Sprintf(format, args...))
}

// sessionStatus maps a session layer error to a status.
func sessionStatus(err error, what string) error {
	var inv *session.InvalidError
	var dirErr *session.DirectoryError
	var unsup *provider.UnsupportedError
	var missing *provider.NotInstalledError
	var unconf *provider.NotConfiguredError
	var pool *session.PoolExhaustedError
	switch {
	case errors.Is(err, session.ErrNotFound):
		return fail(codes.NotFound, CodeSessionNotFound, "%s: session does not exist", what)
	case errors.Is(err, session.ErrClosed), errors.Is(err, session.ErrDraining):
		return fail(codes.Unavailable, server.CodeAgentShuttingDown, "%s: %v", what, err)
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.As(err, &dirErr):
		return fail(codes.InvalidArgument, server.CodeInvalidArgument, "%s: %s", what, dirErr.Error())
	case errors.As(err, &inv):
		return fail(codes.InvalidArgument, server.CodeInvalidArgument, "%s: %s", what, inv.Msg)
	// The provider's errors (BETCODE-2002: it cannot run here;
	// BETCODE-2030: it is not configured) and a full CLI pool, as
	// AgentService answers them.
	case errors.As(err, &unsup), errors.As(err, &missing), errors.As(err, &unconf), errors.As(err, &pool):
		st, _ := status.FromError(server.ToStatus(err))
		return prefixStatus(st, what)
	}
	if st, ok := status.FromError(err); ok {
		// Already a status (the worktree service's, e.g. WORKTREE_NOT_FOUND):
		// keep its code and details, say what failed.
		return prefixStatus(st, what)
	}
	return fail(codes.Internal, server.CodeInternal, "%s: %v", what, err)
}

// prefixStatus is st with its message prefixed by what.
func prefixStatus(st *status.Status, what string) error {
	p := st.Proto()
	p.Message = what + ": " + p.Message
	return status.ErrorProto(p)
}

// errorCode is the BetCode code of a status error ("" for none).
func errorCode(err error) string { return server.BetCodeCode(err) }

// isShutdown reports whether err (a status of sessionStatus) says the agent
// is shutting down.
func isShutdown(err error) bool {
	return server.BetCodeCode(err) == server.CodeAgentShuttingDown
}
