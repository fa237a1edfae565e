package webapi

import (
	"fmt"

	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// providers are the web names of the session providers, as the agent's
// CLI spells them (agent/provider.Name).
var providers = map[pb.SessionProvider]string{
	pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE: "claude-code",
	pb.SessionProvider_SESSION_PROVIDER_CODEX:       "codex",
	pb.SessionProvider_SESSION_PROVIDER_OPENAI_API:  "openai-api",
	pb.SessionProvider_SESSION_PROVIDER_OPENCLAW:    "openclaw",
	pb.SessionProvider_SESSION_PROVIDER_ACP:         "acp",
}

// providerName is the web name of a session's provider; a session stored
// before providers existed (UNSPECIFIED) runs Claude Code.
func providerName(p pb.SessionProvider) string {
	if n, ok := providers[p]; ok {
		return n
	}
	return providers[pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE]
}

// parseProvider reads the provider of POST /api/sessions: "" (the agent's
// default, Claude Code), a web name, or "claude".
func parseProvider(s string) (pb.SessionProvider, error) {
	switch s {
	case "":
		return pb.SessionProvider_SESSION_PROVIDER_UNSPECIFIED, nil
	case "claude":
		return pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE, nil
	}
	for p, n := range providers {
		if n == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("unknown provider %q: one of claude-code, codex, openai-api, acp, openclaw", s)
}
