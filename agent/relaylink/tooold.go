package relaylink

import (
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// codeAgentTooOld is the relay's ErrorInfo reason for an agent older than
// its --min-agent-version (relay/tunnelsvc.CodeAgentTooOld).
const codeAgentTooOld = "AGENT_TOO_OLD"

// TooOldRetry is how long the link waits before registering again after
// the relay said this agent is too old: it will not become newer by
// itself, so the link does not hammer the relay (the log says what to
// install; a restart after the upgrade connects at once).
var TooOldRetry = 10 * time.Minute

// TooOldError is a registration the relay refused because this agent is
// older than it serves; its message says which version to install.
type TooOldError struct{ Message string }

func (e *TooOldError) Error() string { return e.Message }

// asTooOld returns the TooOldError of a Register failure, or nil.
func asTooOld(err error) *TooOldError {
	if status.Code(err) != codes.FailedPrecondition || !hasReason(err, codeAgentTooOld) {
		return nil
	}
	return &TooOldError{Message: status.Convert(err).Message()}
}

// isTooOld reports whether err (from session) is a TooOldError.
func isTooOld(err error) (*TooOldError, bool) {
	var t *TooOldError
	ok := errors.As(err, &t)
	return t, ok
}
