package provider

import (
	"fmt"
	"strings"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// UnsupportedError: the agent has no implementation of the provider
// (BETCODE-2002).
type UnsupportedError struct {
	Kind      pb.SessionProvider
	Supported []pb.SessionProvider
}

func (e *UnsupportedError) Error() string {
	names := make([]string, len(e.Supported))
	for i, k := range e.Supported {
		names[i] = Name(k)
	}
	if e.Kind == pb.SessionProvider_SESSION_PROVIDER_OPENCLAW {
		return fmt.Sprintf("provider %s is not supported by BetCode; use one of: %s", Name(e.Kind), strings.Join(names, ", "))
	}
	return fmt.Sprintf("provider %s is not supported by this agent; use one of: %s", Name(e.Kind), strings.Join(names, ", "))
}

// NotInstalledError: the provider's program is missing or not runnable
// (BETCODE-2002). Install says how to fix it.
type NotInstalledError struct {
	Kind    pb.SessionProvider
	Install string
	Err     error
}

func (e *NotInstalledError) Error() string {
	msg := fmt.Sprintf("provider %s is not installed", Name(e.Kind))
	if e.Err != nil {
		msg += " (" + e.Err.Error() + ")"
	}
	if e.Install != "" {
		msg += ": " + e.Install
	}
	return msg
}

func (e *NotInstalledError) Unwrap() error { return e.Err }

// NotConfiguredError: the provider is installed but lacks configuration
// (an endpoint, a key) to run (BETCODE-2030). Configure says what to set.
type NotConfiguredError struct {
	Kind      pb.SessionProvider
	Configure string
}

func (e *NotConfiguredError) Error() string {
	return fmt.Sprintf("provider %s is not configured: %s", Name(e.Kind), e.Configure)
}
