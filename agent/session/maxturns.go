package session

import (
	"strconv"

	"github.com/betcode-dev/betcode/agent/eventlog"
	"github.com/betcode-dev/betcode/agent/provider"
	pb "github.com/betcode-dev/betcode/shared/betcodepb"
)

// metaMaxTurns records CreateRequest.MaxTurns.
const metaMaxTurns = "betcode.max_turns"

// applyMaxTurns records req's turn limit in meta, refusing it for a
// provider that cannot honour one.
func applyMaxTurns(req CreateRequest, meta *eventlog.Session) error {
	if req.MaxTurns <= 0 {
		return nil
	}
	switch kind := provider.Default(req.Provider); kind {
	case pb.SessionProvider_SESSION_PROVIDER_CLAUDE_CODE, pb.SessionProvider_SESSION_PROVIDER_OPENAI_API:
	default:
		return invalidf("max_turns is not supported by provider %s (only claude-code and openai-api bound a turn's round trips)", provider.Name(kind))
	}
	meta.Metadata[metaMaxTurns] = strconv.Itoa(req.MaxTurns)
	return nil
}

// maxTurns is the session's turn limit (0: none).
func maxTurns(meta eventlog.Session) int {
	n, _ := strconv.Atoi(meta.Metadata[metaMaxTurns])
	return max(n, 0)
}
