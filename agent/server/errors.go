package server

import (
	"context"
	"errors"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/claude"
	"github.com/betcode-dev/betcode/agent/provider"
	"github.com/betcode-dev/betcode/agent/session"
)

// ErrorDomain is the ErrorInfo domain of BetCode error codes.
const ErrorDomain = "betcode.dev"

// BetCode error codes used by the handlers (see the spec's catalogue).
const (
	CodeSessionNotFound   = session.CodeSessionNotFound
	CodeInvalidArgument   = "INVALID_ARGUMENT"
	CodePermissionStale   = session.CodePermissionStale
	CodeSlowConsumer      = "SLOW_CONSUMER"
	CodeAgentShuttingDown = "AGENT_SHUTTING_DOWN"
	CodeInternal          = "INTERNAL"
	CodeNotImplemented    = "NOT_IMPLEMENTED"
	CodeClaudeUnavailable = "CLAUDE_UNAVAILABLE"
	CodeNoInputLock       = "NO_INPUT_LOCK"
	CodePoolExhausted     = "POOL_EXHAUSTED"
	CodeSubprocessCrashed = session.CodeSubprocessCrashed
	CodeSessionActive     = "SESSION_ACTIVE"
	// WorkspaceService: a directory that does not exist, one the agent
	// may not read, and git missing on the machine.
	CodeDirectoryNotFound    = "DIRECTORY_NOT_FOUND"
	CodeDirectoryNotReadable = "DIRECTORY_NOT_READABLE"
	CodeGitUnavailable       = "GIT_UNAVAILABLE"
)

// Status builds a gRPC status with a BetCode error code attached.
func Status(c codes.Code, betcode, msg string) error {
	return StatusWith(c, betcode, msg, nil)
}

// StatusWith is Status with ErrorInfo metadata (the ErrorEvent details of
// the spec, e.g. retry_after_ms, holder_client_id).
func StatusWith(c codes.Code, betcode, msg string, details map[string]string) error {
	st := status.New(c, msg)
	if betcode != "" {
		if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: betcode, Domain: ErrorDomain, Metadata: details}); err == nil {
			st = d
		}
	}
	return st.Err()
}

// errorInfo returns the BetCode ErrorInfo of a status error, or nil.
func errorInfo(err error) *errdetails.ErrorInfo {
	st, ok := status.FromError(err)
	if !ok {
		return nil
	}
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.Domain == ErrorDomain {
			return ei
		}
	}
	return nil
}

// ErrorDetails returns the ErrorInfo metadata of a status error.
func ErrorDetails(err error) map[string]string { return errorInfo(err).GetMetadata() }

// BetCodeCode extracts the BetCode error code from a status error.
func BetCodeCode(err error) string { return errorInfo(err).GetReason() }

// ToStatus is the status AgentService answers a session layer error with:
// its gRPC code, BetCode code and details (nil for nil). Other services
// that start sessions answer the same errors the same way.
func ToStatus(err error) error { return toStatus(err) }

// toStatus maps session errors to status errors carrying the BetCode code.
func toStatus(err error) error {
	var inv *session.InvalidError
	var slow *session.SlowConsumerError
	var bin *claude.BinaryError
	var lock *session.NoInputLockError
	var pool *session.PoolExhaustedError
	var crash *session.CrashLoopError
	var unsup *provider.UnsupportedError
	var missing *provider.NotInstalledError
	var unconf *provider.NotConfiguredError
	switch {
	case errors.As(err, &unsup):
		return Status(codes.InvalidArgument, "BETCODE-2002", "BETCODE-2002: "+unsup.Error())
	case errors.As(err, &missing):
		return Status(codes.InvalidArgument, "BETCODE-2002", "BETCODE-2002: "+missing.Error())
	case errors.As(err, &unconf):
		return Status(codes.Unavailable, "BETCODE-2030", "BETCODE-2030: "+unconf.Error())
	case errors.As(err, &lock):
		return StatusWith(codes.PermissionDenied, CodeNoInputLock, lock.Error(), map[string]string{"holder_client_id": lock.Holder})
	case errors.As(err, &pool):
		return StatusWith(codes.ResourceExhausted, CodePoolExhausted, pool.Error(), map[string]string{"retry_after_ms": strconv.FormatInt(pool.RetryAfter.Milliseconds(), 10)})
	case errors.As(err, &crash):
		return StatusWith(codes.Unavailable, CodeSubprocessCrashed, crash.Error(), map[string]string{"retry_after_ms": strconv.FormatInt(crash.RetryAfter.Milliseconds(), 10)})
	case errors.Is(err, session.ErrBusy):
		return StatusWith(codes.FailedPrecondition, CodeSessionActive, "Session has active turn", map[string]string{"required_state": "IDLE"})
	case errors.As(err, &bin):
		return Status(codes.FailedPrecondition, CodeClaudeUnavailable, bin.Error())
	case err == nil:
		return nil
	case errors.As(err, &inv):
		return Status(codes.InvalidArgument, CodeInvalidArgument, inv.Msg)
	case errors.Is(err, session.ErrNotFound):
		return Status(codes.NotFound, CodeSessionNotFound, "Session does not exist")
	case errors.Is(err, session.ErrStale):
		return Status(codes.FailedPrecondition, CodePermissionStale, "Permission request expired: it was already answered or withdrawn")
	case errors.As(err, &slow):
		return Status(codes.ResourceExhausted, CodeSlowConsumer, slow.Error())
	case errors.Is(err, session.ErrDraining):
		return Status(codes.Unavailable, CodeAgentShuttingDown, "agent is shutting down: it is finishing the running turns and accepts no new ones; send again once it is back")
	case errors.Is(err, session.ErrClosed):
		return Status(codes.Unavailable, CodeAgentShuttingDown, "agent is shutting down; reconnect and resume from your last sequence")
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return Status(codes.Internal, CodeInternal, err.Error())
}
