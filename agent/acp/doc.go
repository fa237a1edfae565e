// Package acp is the generic Agent Client Protocol provider: any agent
// that speaks ACP (JSON-RPC over stdio: Gemini CLI, opencode, Claude Code's
// ACP adapter, …), given by command, runs BetCode sessions. Its session
// updates become AgentEvents, its session/request_permission goes through
// BetCode's permission engine, and its fs/* and terminal requests are
// served inside the session's working directory. Built on
// github.com/coder/acp-go-sdk.
//
// A conversation spawns the agent's command in the session's working
// directory (its own process group; environment: the daemon's plus the
// session's; the tail of its stderr kept for crash reports), sends
// initialize advertising fs.readTextFile, fs.writeTextFile and terminal,
// then session/new, or session/load of Options.ResumeID when the agent
// advertises loadSession (the history it replays while loading is dropped:
// the session's event log has it). The ACP session id is the resume id
// only for agents that can load sessions. A permission mode or model the
// agent offers is set with session/set_mode and session/set_model; without
// a permission mode, the agent's "default" mode (if it offers one) is
// asked for, so that its tool calls come to BetCode's rules.
//
// User messages are sent one session/prompt at a time (queued while one
// runs). The mapping:
//
//	turn starts                   StatusChange THINKING
//	agent_message_chunk (text)    TextDelta (streamed)
//	agent_thought_chunk (text)    StatusChange THINKING with the thought
//	                              (chunks gathered until the next update)
//	tool_call[_update]            ToolCallStart, EXECUTING_TOOL, once its
//	                              input is known, it runs, or it asks
//	tool_call_update done/failed  ToolCallResult (text content, diffs as
//	                              "edited PATH", else the raw output), THINKING
//	plan                          TodoUpdate (entries numbered from 1)
//	usage_update                  kept; reported at the turn's end
//	session/request_permission    [ToolCallStart], PermissionRequest,
//	                              WAITING_FOR_USER with Output.Permission
//	session/prompt response       [TextDelta is_complete], [UsageReport],
//	                              TurnComplete (its stopReason: end_turn,
//	                              max_tokens, max_turn_requests, refusal,
//	                              cancelled), IDLE, with Output.TurnEnded
//	session/prompt error          ErrorEvent AGENT_ERROR, TurnComplete
//	                              "error", IDLE
//	the process exits mid-turn    nothing: the stream ends and the session
//	                              reports the crash with Wait's error
//
// Permission requests are named in BetCode's rule syntax so that rules
// written for Claude Code apply: kind execute with a command is Bash
// {"command"}, edit is Write (a whole file's content) or Edit with an
// absolute "file_path", read is Read with "file_path" (read-only when it
// reads inside the working directory); anything else is named by the tool
// call's title, else its kind. Answers pick the request's options: Allow
// allow_once, AllowForSession allow_always, Deny reject_once (each falling
// back to the other option of its side); Cancel answers "cancelled" and
// sends session/cancel. ACP has no way to change a tool's input or to tell
// the model why it was denied: Answer.Input and Answer.Message are unused.
//
// fs/read_text_file, fs/write_text_file and terminal/create refuse, with a
// JSON-RPC invalid-params error, any path or cwd outside the working
// directory: relative paths and ".." are resolved lexically, then the file
// is opened through os.Root, which refuses symlinks leading out. Reads are
// capped at 8 MiB. Terminals run "sh -c COMMAND" (or COMMAND ARGS… when
// args are given) in their own process group, keep the last outputByteLimit
// bytes (1 MiB by default, 4 MiB at most), are at most 16 at once, and are
// killed when the conversation ends.
//
// InterruptTurn sends session/cancel and answers every open permission
// request "cancelled" (withdrawing it), as ACP asks of clients;
// ForceInterrupt kills the agent. Stop closes the agent's stdin, then
// sends SIGTERM and SIGKILL to its group. Lines the SDK cannot parse are
// logged and skipped; a line over its 10 MiB limit breaks the connection,
// and the agent is then killed.
package acp
