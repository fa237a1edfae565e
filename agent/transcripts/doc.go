// Package transcripts reads the Claude Code CLI's own session transcripts
// ($HOME/.claude/projects/<project-key>/<session_id>.jsonl) so that the agent
// can list the sessions a user started in a terminal and adopt one: Import
// turns a transcript into AgentEvents for the event log, after which the
// session is driven with `claude --resume <id>` like any other.
//
// # Files
//
// <project-key> is the absolute working directory with every character
// outside [A-Za-z0-9] replaced by '-'. The key is lossy ("/a/b-c" and
// "/a/b/c" share one), so the working directory reported is the "cwd" of the
// session's first message, not one decoded from the key. Only files named
// <uuid>.jsonl directly in a project directory are sessions; subagent
// transcripts live in subdirectories and are ignored.
//
// Every line is one JSON entry with a "type": user, assistant, attachment,
// queue-operation, api-request, last-prompt, cost-state, mode, system, ….
// Only user and assistant entries carry conversation; the rest are skipped.
//
// # Cost of listing
//
// Computing MessageCount means reading each transcript to its end, so List
// reads every file once, sequentially, one line at a time (memory is bounded
// by the longest line, at most MaxLineBytes). Only lines that contain
// `"type":"user"` or `"type":"assistant"` are JSON-decoded; the bulky ones
// (api-request blobs, prompt snapshots, attachments) are rejected by that
// substring test without being parsed (so List counts as garbage only the
// lines that don't start with '{' or are user/assistant lines that fail to
// decode; Import checks every line). A Lister remembers, per file, its
// size, modification time and how far it got, so listing again with the same
// Lister reads only what was appended since (transcripts are append-only);
// List and Find use a fresh Lister and pay the full price every time.
//
// # Conversion (Import)
//
// A transcript has no stream events, results or permission prompts, so
// Import maps:
//
//   - first, SessionInfo{session_id, working_directory, model, message_count,
//     is_resumed: true}; model is that of the last main-thread assistant
//     message ("<synthetic>" messages the CLI makes up are ignored).
//   - a user prompt (a user entry whose content is text, not tool results,
//     and that is not isMeta, isCompactSummary, an interruption marker,
//     local-command output or system-reminder text only) ends the previous
//     exchange, if any, and becomes UserInputEvent{content: <prompt>} (no
//     sent_by; attachments are not listed) then StatusChange{THINKING}.
//     Slash commands
//     (<command-name>/x</command-name><command-args>y</command-args>) become
//     "/x y".
//   - an assistant entry: each text block becomes TextDelta{text,
//     is_complete: true}; each tool_use block becomes ToolCallStart (once per
//     tool id) with its input as a Struct and its "description" if any;
//     thinking blocks are dropped. An API-error message the CLI wrote as an
//     assistant entry (isApiErrorMessage) becomes ErrorEvent{AGENT_ERROR}.
//   - a tool_result block of a user entry becomes ToolCallResult{tool_id,
//     output, is_error, duration_ms}; the duration is the time between the
//     tool_use and tool_result entries. Output longer than MaxToolOutputBytes
//     is cut.
//   - an exchange ends before the next prompt and at the end of the file with
//     TurnComplete{stop_reason: "imported"} and StatusChange{IDLE}.
//
// Sidechain entries (isSidechain: older CLIs wrote subagent conversations
// into the main transcript) are skipped: the entries carry no link back to
// the Agent tool_use that spawned them, so parent_tool_use_id cannot be set
// reliably. The Agent call and its final result are main-thread entries and
// still appear. Entries are imported in file order; a branch the user
// abandoned with a rewind is not pruned (following parentUuid chains across
// compactions risks dropping real history, which is worse).
//
// Events carry no sequence numbers; each one's Timestamp is the "timestamp"
// of the entry it came from (the turn-end events take the exchange's last
// one). Lines that are not JSON objects, or are longer than MaxLineBytes,
// are skipped and counted in Imported.BadLines.
package transcripts
