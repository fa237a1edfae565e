// Package codex drives the OpenAI Codex CLI headless through `codex
// app-server`, its JSON-RPC protocol over stdio, and maps what it reports to
// BetCode AgentEvents. docs/codex.md describes it; the protocol as observed
// offline is in shared/reference/codex-app-server.md.
//
// A Client owns one app-server child, started with a daemon-private
// CODEX_HOME whose config.toml points Codex at one model endpoint and
// nothing else. Threads are started or resumed with the approval policy and
// sandbox always passed explicitly; turns are started and interrupted by id.
// Everything the app-server reports arrives, in order and never dropped, as
// typed Events on Client.Events: streamed text and reasoning, command
// executions and file changes with their output, token usage, errors, the
// turn's end, and approval requests (*Approval) that the caller answers with
// Accept, AcceptForSession, Decline or Cancel. When the process dies the
// stream ends with *Exited and every pending call fails with ErrExited.
//
// Framing is JSON-RPC 2.0 without the "jsonrpc" member, one object per
// line: requests {"id","method","params"}, responses {"id","result"|"error"},
// notifications {"method","params"}; the server's own requests (approvals)
// carry ids counted from 0 per connection.
//
// Translator turns Events into AgentEvents, as package bridge does for
// Claude's stream-json. The Go types of the protocol subset used are
// hand-written in protocol.go and checked against the JSON schema the pinned
// binary generates (testdata/schema), which a test regenerates and diffs so
// that a Codex upgrade that changes the protocol fails loudly.
package codex
