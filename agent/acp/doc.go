// Package acp is the generic Agent Client Protocol provider: any agent
// that speaks ACP (JSON-RPC over stdio: Gemini CLI, opencode, Claude Code's
// ACP adapter, …), given by command, runs BetCode sessions. Its session
// updates become AgentEvents, its session/request_permission goes through
// BetCode's permission engine, and its fs/* and terminal requests are
// served inside the session's working directory. Built on
// github.com/coder/acp-go-sdk.
package acp
