// Package fakeopenai is a scriptable fake OpenAI Responses API for tests and
// demos, the counterpart of package fakeapi for the OpenAI Codex CLI.
//
// It serves POST /v1/responses on loopback so that the real Codex CLI
// (pointed at it by a custom model provider whose base_url is URL()+"/v1")
// runs whole turns offline and deterministically. Requests are answered with
// the Responses API server-sent events Codex consumes, in this order:
//
//	event: response.created
//	event: response.output_item.added               reasoning (when Reasoning is set)
//	event: response.reasoning_summary_part.added
//	event: response.reasoning_summary_text.delta    one per word
//	event: response.output_item.done                reasoning with its summary
//	event: response.output_item.added               message (when there is text)
//	event: response.output_text.delta               one per word, Delay apart
//	event: response.output_item.done                message with its output_text
//	event: response.output_item.added               function_call | custom_tool_call
//	event: response.output_item.done                the call, complete
//	event: response.completed                       usage
//
// Every frame is "event: NAME\ndata: JSON\n\n". Codex acts on
// response.output_item.done and response.completed; the deltas are what make
// it stream. A shell command is a function_call of the exec_command tool
// ({"cmd": ...}, plus "sandbox_permissions": "require_escalated" and a
// justification to ask to leave the sandbox); a patch is a custom_tool_call
// of the freeform apply_patch tool whose input is the patch text. Codex runs
// the call and sends a new request whose input ends with the call's
// function_call_output or custom_tool_call_output.
//
// Which [Reply] a request gets is decided in this order: a reply queued with
// [Server.Enqueue], else the [Config.Responder], else [KeywordReply], which
// reads keywords in the latest user prompt:
//
//	(none)       text "Hello from the fake model."
//	THINK        reasoning summary ReasoningText, then text ThoughtText
//	SHELL        exec_command ShellCommand (asks for approval under the
//	             "untrusted" approval policy)
//	ESCALATE     exec_command EscalateCommand with require_escalated (asks
//	             under "on-request" too)
//	PATCH        apply_patch adding PatchFile with PatchLine
//	STREAM N     N text deltas "w0 ", "w1 ", ...
//	SLOW         50 text deltas, 200ms apart (for interrupt tests)
//	STALL        starts the stream, then hangs until the client goes away
//	MALFORMED    one delta, then a data line that is not JSON, then the end
//	CUT          one delta, then the connection is dropped
//	ERRnnn       HTTP error nnn with an OpenAI error body (ERR429 sets
//	             retry-after: 1)
//
// Keywords must be whole upper-case words of the prompt ([Request.Prompt]).
// When the request's input ends with a tool call's output, the reply is the
// text "Tool result received: <output>" whatever the keywords.
//
// A test scripts calls of tools of its own (such as the openai-api
// provider's Bash, Read or Write) with [FunctionCall] in a queued reply or
// a Responder.
//
// Every /v1/responses request is recorded and parsed ([Server.Requests]), and
// tests can block until some number arrived ([Server.WaitRequests]).
//
// [Transcriptions] is a fake of OpenAI's speech-to-text endpoint,
// POST /v1/audio/transcriptions (multipart: file, model; answer
// {"text": ...}), for the agent's voice dictation: it answers a scripted
// text or error and records each upload with its audio.
package fakeopenai
