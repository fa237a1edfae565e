// Package fakeapi is a scriptable fake Anthropic Messages API for tests and
// demos.
//
// It serves POST /v1/messages on loopback so that the real Claude Code CLI
// (pointed at it with ANTHROPIC_BASE_URL) runs whole turns offline and
// deterministically. Streaming requests ("stream": true) are answered with the
// Messages API server-sent events, in this order:
//
//	event: message_start        message with id msg_fake_NNN, usage
//	event: content_block_start  thinking | text | tool_use
//	event: content_block_delta  thinking_delta, signature_delta, text_delta, input_json_delta
//	event: content_block_stop
//	event: message_delta        stop_reason, usage.output_tokens
//	event: message_stop
//
// Every frame is "event: NAME\ndata: JSON\n\n". Non-streaming requests (the CLI
// makes a few, e.g. to validate a model or after a broken stream) get the same
// message as one JSON body.
//
// Which [Reply] a request gets is decided in this order: a reply queued with
// [Server.Enqueue] (main-loop requests only, see [Request.MainLoop]), else the
// [Config.Responder], else [KeywordReply], which reads keywords in the latest
// user prompt:
//
//	(none)       text "Hello from the fake model."
//	RUNTOOL      Bash tool_use: touch created-by-tool.txt && echo done
//	ASK          AskUserQuestion tool_use (two questions, one multi-select)
//	TODO         TodoWrite tool_use with three todos (the CLI only runs it with
//	             CLAUDE_CODE_ENABLE_TASKS=0 and CLAUDE_CODE_ENABLE_TODO_TOOLS=1)
//	THINK        thinking block, then text
//	STREAM N     N text deltas "w0 ", "w1 ", ...
//	LONG         STREAM 200
//	SLOW         50 text deltas, 200ms apart (for interrupt tests)
//	STALL        starts the stream, then hangs until the client goes away
//	BREAK        one delta, then an SSE error event and the end of the body
//	CUT          one delta, then the connection is dropped
//	ERRnnn       HTTP error nnn with an Anthropic error body (ERR429 sets retry-after: 1)
//
// Keywords must be whole upper-case words of the prompt ([Request.Prompt]).
// When the last conversation message carries a tool_result, the reply is the
// text "Tool result received: <content>" whatever the keywords; requests
// without tools get "Fake side reply." and compactions a fake summary.
//
// Every /v1/messages request is recorded and parsed ([Server.Requests]), and
// tests can block until some number arrived ([Server.WaitRequests]).
package fakeapi
