package client

import (
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// CLI exit codes, as the spec's table defines them.
const (
	ExitOK              = 0
	ExitAgentError      = 1 // Claude returned an error
	ExitConnection      = 2
	ExitPermission      = 3
	ExitRateLimited     = 4
	ExitInvalidArgs     = 5
	ExitSessionNotFound = 6
	ExitInternal        = 7
)

// ExitError carries the exit code a command should end with.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// BetCodeCode returns the BetCode error code in a status error's details.
func BetCodeCode(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return ""
	}
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.Domain == "betcode.dev" {
			return ei.Reason
		}
	}
	return ""
}

// ExitCode maps an error to the CLI's exit code.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	// An agent that refuses this client version: no session can start.
	var re *RefusedError
	if errors.As(err, &re) {
		return ExitConnection
	}
	switch BetCodeCode(err) {
	case "CLIENT_TOO_OLD":
		return ExitConnection
	case "SESSION_NOT_FOUND":
		return ExitSessionNotFound
	case "RATE_LIMITED":
		return ExitRateLimited
	case "NO_INPUT_LOCK":
		return ExitPermission
	}
	st, ok := status.FromError(err)
	if !ok {
		return ExitInternal
	}
	switch st.Code() {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return ExitConnection
	case codes.NotFound:
		return ExitSessionNotFound
	case codes.PermissionDenied, codes.Unauthenticated:
		return ExitPermission
	case codes.ResourceExhausted:
		return ExitRateLimited
	case codes.InvalidArgument, codes.OutOfRange:
		return ExitInvalidArgs
	}
	return ExitInternal
}

// CodeForEvent maps an ErrorEvent code to an exit code.
func CodeForEvent(code string) int {
	switch code {
	case "RATE_LIMITED":
		return ExitRateLimited
	case "SESSION_NOT_FOUND":
		return ExitSessionNotFound
	case "NO_INPUT_LOCK":
		return ExitPermission
	case "INVALID_ARGUMENT":
		return ExitInvalidArgs
	case "INTERNAL", "SQLITE_ERROR":
		return ExitInternal
	}
	return ExitAgentError
}
