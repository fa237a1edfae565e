// Package openaiapi is the OpenAI API provider: a provider with no CLI.
// The agent itself runs the turn loop against an OpenAI-compatible
// Responses endpoint (github.com/openai/openai-go), with a small tool set
// (read, write and patch files, list, search, run a command) executed in
// the session's working directory, every tool call decided by BetCode's
// permission engine. Its conversations are provider.Streams.
//
// A turn sends the whole conversation (store: false) with the tools Bash,
// Read, Write, Edit, LS and Grep, named and shaped like Claude Code's so
// that the same permission rules apply, and streams the response:
//
//	turn starts                      StatusChange THINKING
//	response.output_text.delta       TextDelta
//	output_item.done message         TextDelta{is_complete} (the text when none streamed)
//	reasoning summary                StatusChange THINKING with the summary
//	each function_call, in order     ToolCallStart, EXECUTING_TOOL; then, unless the
//	(after response.completed)       path is outside the directory, PermissionRequest
//	                                 and WAITING_FOR_USER with a PermissionAsk (ReadOnly
//	                                 for Read, LS, Grep); after the answer the tool runs:
//	                                 ToolCallResult (is_error on failure or denial)
//	a retried request                StatusChange THINKING "retrying: ..."
//	response.completed               usage summed; with tool calls, the next request
//	turn ends                        [ErrorEvent], UsageReport, TurnComplete, IDLE
//
// Stop reasons: end_turn, max_tokens (response.incomplete), max_turns (too
// many requests in one turn), cancelled (interrupt, stop, a Cancel answer),
// error (what the API left after the SDK's retries: ErrorEvent
// RATE_LIMITED, API_UNREACHABLE or API_ERROR).
//
// The conversation is kept as <Home>/<id>.json, the id being its resume
// id. File tools go through an os.Root of the working directory after a
// check that names the path that leads out; commands run in their own
// process group, killed on interrupt, stop or timeout.
package openaiapi
