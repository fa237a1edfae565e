package acp

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/betcode-dev/betcode/shared/pinned"
)

// ClaudeAgentBinEnv overrides where FindClaudeAgent looks: the path of a
// claude-agent-acp executable.
const ClaudeAgentBinEnv = "BETCODE_ACP_CLAUDE_BIN"

// ErrClaudeAgentNotInstalled is returned by FindClaudeAgent when the
// pinned claude-agent-acp is not installed.
var ErrClaudeAgentNotInstalled = errors.New("claude-agent-acp not installed (run make acp)")

// ClaudeAgentInstallDir returns where scripts/install-acp.sh installs
// version: $XDG_CACHE_HOME/betcode/acp-<version> (default ~/.cache/...).
func ClaudeAgentInstallDir(version string) (string, error) {
	return pinned.Dir("acp", version)
}

// FindClaudeAgent returns the claude-agent-acp executable that tests and
// demos run as a real ACP agent: $BETCODE_ACP_CLAUDE_BIN if set, else the
// pinned version installed by scripts/install-acp.sh. It returns an error
// wrapping ErrClaudeAgentNotInstalled when there is none.
func FindClaudeAgent() (string, error) {
	if p := os.Getenv(ClaudeAgentBinEnv); p != "" {
		if err := pinned.Executable(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", ClaudeAgentBinEnv, p, err)
		}
		return p, nil
	}
	dir, err := ClaudeAgentInstallDir(PinnedClaudeAgentVersion)
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "node_modules", ".bin", "claude-agent-acp")
	if err := pinned.Executable(p); err != nil {
		return "", fmt.Errorf("@agentclientprotocol/claude-agent-acp %s at %s: %w", PinnedClaudeAgentVersion, p, ErrClaudeAgentNotInstalled)
	}
	return p, nil
}

// ClaudeAgentEnv is the environment that points claude-agent-acp (and
// the Claude Code it runs) at a Messages API at baseURL, e.g. the fake
// one, with home as its HOME. IS_SANDBOX lets it run as root.
func ClaudeAgentEnv(home, baseURL string) []string {
	return []string{
		"HOME=" + home,
		"ANTHROPIC_BASE_URL=" + baseURL,
		"ANTHROPIC_API_KEY=sk-test",
		"DISABLE_TELEMETRY=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"CLAUDE_CODE_MAX_RETRIES=2",
		"IS_SANDBOX=1",
	}
}
