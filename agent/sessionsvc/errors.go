package sessionsvc

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/betcode-dev/betcode/agent/provider"
	"github.com/betcode-dev/betcode/agent/server"
	"github.com/betcode-dev/betcode/agent/session"
)

// BetCode error codes of SessionService (obey's OBEY-NNNN, renamed).
const (
	CodeSessionError          = "BETCODE-2000"
	CodeProjectNotFound       = "BETCODE-2001"
	CodeProviderNotSupported  = "BETCODE-2002"
	CodeModelNotSupported     = "BETCODE-2003"
	CodeCreationFailed        = "BETCODE-2004"
	CodeSandboxFailed         = "BETCODE-2005"
	CodeSessionNotFound       = "BETCODE-2010"
	CodeWrongState            = "BETCODE-2011"
	CodeDeliveryFailed        = "BETCODE-2012"
	CodeTokenBudgetExceeded   = "BETCODE-2013"
	CodeSessionTimeout        = "BETCODE-2014"
	CodeAlreadyStopped        = "BETCODE-2020"
	CodeStopTimedOut          = "BETCODE-2021"
	CodeProviderNotConfigured = "BETCODE-2030"
	CodeProviderCrashed       = "BETCODE-2031"
	CodeProviderConnLost      = "BETCODE-2032"
)

// fail builds a status whose message starts with the code (as the proto
// says) and whose ErrorInfo reason is the code.
func fail(c codes.Code, code, format string, args ...any) error {
	return server.Status(c, code, code+": "+fmt.Sprintf(format, args...))
}

// providerStatus maps a provider lookup error to BETCODE-2002 / 2030, or
// returns nil when err is none of them.
func providerStatus(err error) error {
	var unsup *provider.UnsupportedError
	var missing *provider.NotInstalledError
	var unconf *provider.NotConfiguredError
	switch {
	case errors.As(err, &unsup):
		return fail(codes.InvalidArgument, CodeProviderNotSupported, "%s", unsup.Error())
	case errors.As(err, &missing):
		return fail(codes.InvalidArgument, CodeProviderNotSupported, "%s", missing.Error())
	case errors.As(err, &unconf):
		return fail(codes.Unavailable, CodeProviderNotConfigured, "%s", unconf.Error())
	}
	return nil
}

// sessionStatus maps errors common to every RPC: a missing session, a
// shutting-down agent, a cancelled call; others become code with c.
func sessionStatus(err error, c codes.Code, code string) error {
	var inv *session.InvalidError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, session.ErrNotFound):
		return fail(codes.NotFound, CodeSessionNotFound, "session does not exist")
	case errors.Is(err, session.ErrClosed), errors.Is(err, session.ErrDraining):
		return fail(codes.Unavailable, code, "agent is shutting down: %v", err)
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.As(err, &inv):
		return fail(codes.InvalidArgument, code, "%s", inv.Msg)
	}
	if perr := providerStatus(err); perr != nil {
		return perr
	}
	return fail(c, code, "%v", err)
}

// callUser is the user the relay made the call for (x-betcode-user), or
// "" for a local client.
func callUser(ctx context.Context) string {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(server.MDUser); len(v) > 0 {
			return v[0]
		}
	}
	return ""
}
