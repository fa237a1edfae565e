// Package provider is the seam between the agent's session manager and the
// coding agents it drives (Claude Code, Codex, ...). A Provider starts or
// resumes one conversation and returns a Conversation: the handle through
// which the session manager sends user turns, interrupts the running turn,
// answers permission requests and questions, and stops the agent. Everything
// else (sequences, the event log, fan-out, the permission engine, the relay
// and every client) stays provider-agnostic.
//
// A Registry maps each pb.SessionProvider to the Provider that implements it.
// Asking it for one the agent has no implementation of fails with an
// *UnsupportedError (BETCODE-2002 at the API); a provider that is known but
// cannot run here (its binary missing, its endpoint or key not configured)
// reports a *NotInstalledError or *NotConfiguredError (BETCODE-2002 /
// BETCODE-2030) saying what to install or set.
//
// The shape fits both a CLI that streams NDJSON (Claude Code) and a JSON-RPC
// app-server (Codex): output arrives asynchronously on the provider's own
// reader; permission requests are requests awaiting Answer, identified by
// the provider's request id; Interrupt ends the running turn (the
// conversation tracks the turn id when its protocol needs one); and
// Options.ResumeID names the provider's conversation (Claude's session id,
// Codex's thread id) to continue.
package provider
