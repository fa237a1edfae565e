package team

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/server"
	"github.com/betcode-dev/betcode/agent/session"
)

// BetCode error codes of TeamService (docs/api.md, "Error codes").
const (
	// CodeTeammateNotFound: the session has no teammate with that agent id
	// (NOT_FOUND).
	CodeTeammateNotFound = "TEAMMATE_NOT_FOUND"
	// CodeSpecNotFound: no teammate or skill spec with that id (NOT_FOUND).
	CodeSpecNotFound = "SPEC_NOT_FOUND"
	// CodeSpecExists: another spec of the same kind has that name
	// (ALREADY_EXISTS).
	CodeSpecExists = "SPEC_EXISTS"
	// CodeSkillInUse: DeleteSkillSpec of a skill a teammate spec names
	// (FAILED_PRECONDITION).
	CodeSkillInUse = "SKILL_IN_USE"
	// CodeSessionNotFound: no such session (NOT_FOUND).
	CodeSessionNotFound = server.CodeSessionNotFound
)

// Errors of the Store; the service turns them into statuses (specStatus).
var (
	// ErrSpecNotFound: no spec with that id.
	ErrSpecNotFound = errors.New("spec not found")
	// ErrSpecExists: the name is taken by another spec of the same kind.
	ErrSpecExists = errors.New("spec name already in use")
)

// InvalidError is a spec the Store refuses; Msg says why.
type InvalidError struct{ Msg string }

func (e *InvalidError) Error() string { return e.Msg }

func invalidf(format string, args ...any) error {
	return &InvalidError{Msg: fmt.Sprintf(format, args...)}
}

// InUseError refuses to delete a skill spec that teammate specs name.
type InUseError struct {
	// Skill is the skill spec's name; Teammates the names of the teammate
	// specs that use it.
	Skill     string
	Teammates []string
}

func (e *InUseError) Error() string {
	return fmt.Sprintf("skill spec %q is used by teammate specs %q: remove it from them first", e.Skill, e.Teammates)
}

func fail(c codes.Code, code, format string, args ...any) error {
	return server.Status(c, code, fmt.Sprintf(format, args...))
}

// specStatus maps a Store error to a status; what names the call.
func specStatus(err error, what string) error {
	var inv *InvalidError
	var inUse *InUseError
	switch {
	case errors.As(err, &inv):
		return fail(codes.InvalidArgument, server.CodeInvalidArgument, "%s: %s", what, inv.Msg)
	case errors.As(err, &inUse):
		return fail(codes.FailedPrecondition, CodeSkillInUse, "%s: %s", what, inUse.Error())
	case errors.Is(err, ErrSpecNotFound):
		return fail(codes.NotFound, CodeSpecNotFound, "%s: %v", what, err)
	case errors.Is(err, ErrSpecExists):
		return fail(codes.AlreadyExists, CodeSpecExists, "%s: %v", what, err)
	}
	return commonStatus(err, what)
}

// sessionStatus maps an error reading a session to a status.
func sessionStatus(err error, what string) error {
	var inv *session.InvalidError
	switch {
	case errors.Is(err, session.ErrNotFound):
		return fail(codes.NotFound, CodeSessionNotFound, "%s: session does not exist", what)
	case errors.Is(err, session.ErrClosed), errors.Is(err, session.ErrDraining):
		return fail(codes.Unavailable, server.CodeAgentShuttingDown, "%s: %v", what, err)
	case errors.As(err, &inv):
		return fail(codes.InvalidArgument, server.CodeInvalidArgument, "%s: %s", what, inv.Msg)
	}
	return commonStatus(err, what)
}

// commonStatus maps a cancelled call, a status from another service, and
// anything else (INTERNAL).
func commonStatus(err error, what string) error {
	switch {
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return fail(codes.Internal, server.CodeInternal, "%s: %v", what, err)
}
