package server

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/claude"
	"github.com/betcode-dev/betcode/agent/session"
)

// ErrorDomain is the ErrorInfo domain of BetCode error codes.
const ErrorDomain = "betcode.dev"

// BetCode error codes used by the handlers (see the spec's catalogue).
const (
	CodeSessionNotFound   = "SESSION_NOT_FOUND"
	CodeInvalidArgument   = "INVALID_ARGUMENT"
	CodePermissionStale   = "PERMISSION_STALE"
	CodeSlowConsumer      = "SLOW_CONSUMER"
	CodeAgentShuttingDown = "AGENT_SHUTTING_DOWN"
	CodeInternal          = "INTERNAL"
	CodeNotImplemented    = "NOT_IMPLEMENTED"
	CodeClaudeUnavailable = "CLAUDE_UNAVAILABLE"
)

// Status builds a gRPC status with a BetCode error code attached.
func Status(c codes.Code, betcode, msg string) error {
	st := status.New(c, msg)
	if betcode != "" {
		if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: betcode, Domain: ErrorDomain}); err == nil {
			st = d
		}
	}
	return st.Err()
}

// BetCodeCode extracts the BetCode error code from a status error.
func BetCodeCode(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return ""
	}
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.Domain == ErrorDomain {
			return ei.Reason
		}
	}
	return ""
}

// toStatus maps session errors to status errors carrying the BetCode code.
func toStatus(err error) error {
	var inv *session.InvalidError
	var slow *session.SlowConsumerError
	var bin *claude.BinaryError
	switch {
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
