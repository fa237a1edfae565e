package subagent

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
	}
	return fail(codes.Internal, server.CodeInternal, "%s: %v", what, err)
}
