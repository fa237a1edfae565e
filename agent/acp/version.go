package acp

// PinnedClaudeAgentVersion is the @agentclientprotocol/claude-agent-acp
// release (Claude Code's ACP adapter) this package's tests and the
// end-to-end tests run as the real ACP agent, against the fake Messages API.
// scripts/install-acp.sh reads it with sed: keep it on one line as
// `PinnedClaudeAgentVersion = "x.y.z"`.
const PinnedClaudeAgentVersion = "0.101.0"
