package fakeopenai

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// Reply is what the fake model answers to one request. The zero Reply is a
// successful response with no output items.
//
// Output items are emitted in the order reasoning, message, call; each is
// left out when empty.
type Reply struct {
	// Status, when 400 or above, answers with that HTTP status and an OpenAI
	// error body instead of a stream.
	Status int
	// ErrorMessage overrides the default error message.
	ErrorMessage string
	// RetryAfter sets the retry-after header of an error reply, in whole
	// seconds. A 429 without it gets "1".
	RetryAfter time.Duration

	// Reasoning, when set, is sent as a reasoning item whose summary streams
	// one delta per word.
	Reasoning string
	// Text is the assistant text, streamed as one delta per word. Ignored
	// when Deltas is set.
	Text string
	// Deltas are the exact output_text deltas to stream; the text is their
	// concatenation.
	Deltas []string
	// Delay is waited before every text delta.
	Delay time.Duration
	// Call, when set, is a tool call sent after the text.
	Call *Call
	// Calls are more tool calls sent after Call, in one response (parallel
	// tool calls); their default ids end with _1, _2, ...
	Calls []*Call

	// Fault breaks the stream after its first text delta (or after
	// response.created when there is none).
	Fault Fault

	// Usage overrides the reported usage (DefaultUsage when zero).
	Usage Usage
}

// Call is a tool call made by the fake model.
type Call struct {
	// Kind is "function_call" (exec_command) or "custom_tool_call"
	// (apply_patch).
	Kind string
	// ID is the call_id; default call_fake_NNN, NNN being the request number.
	ID string
	// Name is the tool name, e.g. "exec_command" or "apply_patch".
	Name string
	// Arguments is the JSON arguments string of a function_call.
	Arguments string
	// Input is the free-form input of a custom_tool_call.
	Input string
}

// Usage is the token usage reported in response.completed.
type Usage struct {
	InputTokens     int
	CachedTokens    int
	OutputTokens    int
	ReasoningTokens int
}

// DefaultUsage is the usage of a reply that sets none.
var DefaultUsage = Usage{InputTokens: 1234, CachedTokens: 200, OutputTokens: 56, ReasoningTokens: 7}

// Total returns input plus output tokens.
func (u Usage) Total() int { return u.InputTokens + u.OutputTokens }

// Fault is a way for a streaming reply to go wrong.
type Fault int

const (
	// NoFault streams the whole response.
	NoFault Fault = iota
	// Stall stops sending and holds the request open until the client
	// cancels it or the server closes.
	Stall
	// Malformed sends a data line that is not JSON and ends the body
	// without response.completed.
	Malformed
	// Cut drops the connection without finishing the body.
	Cut
)

// String returns the Fault's name.
func (f Fault) String() string {
	switch f {
	case NoFault:
		return "none"
	case Stall:
		return "stall"
	case Malformed:
		return "malformed"
	case Cut:
		return "cut"
	}
	return "fault(?)"
}

// ShellCall returns an exec_command call running cmd in a non-login shell
// (a login shell reads the profile, which is slow). With escalate it asks to
// run outside the sandbox, giving justification as the reason.
func ShellCall(cmd string, escalate bool, justification string) *Call {
	args := map[string]any{"cmd": cmd, "login": false}
	if escalate {
		args["sandbox_permissions"] = "require_escalated"
		args["justification"] = justification
	}
	b, err := json.Marshal(args)
	if err != nil {
		panic(fmt.Sprintf("marshal exec_command arguments: %v", err)) // strings and maps always marshal
	}
	return &Call{Kind: "function_call", Name: "exec_command", Arguments: string(b)}
}

// FunctionCall returns a function_call of the tool name whose arguments
// are args marshalled to JSON (a string is sent as it is, so that tests can
// send arguments that are not JSON). It is how a test scripts a tool of its
// own, e.g. FunctionCall("Bash", map[string]any{"command": "ls"}).
func FunctionCall(name string, args any) *Call {
	if s, ok := args.(string); ok {
		return &Call{Kind: "function_call", Name: name, Arguments: s}
	}
	b, err := json.Marshal(args)
	if err != nil {
		panic(fmt.Sprintf("marshal %s arguments: %v", name, err)) // a test's own value
	}
	return &Call{Kind: "function_call", Name: name, Arguments: string(b)}
}

// PatchCall returns an apply_patch call with patch as its input, e.g.
// AddFilePatch("hello.txt", "hello").
func PatchCall(patch string) *Call {
	return &Call{Kind: "custom_tool_call", Name: "apply_patch", Input: patch}
}

// AddFilePatch returns an apply_patch patch that creates path holding the
// given lines.
func AddFilePatch(path string, lines ...string) string {
	var b strings.Builder
	b.WriteString("*** Begin Patch\n*** Add File: " + path + "\n")
	for _, l := range lines {
		b.WriteString("+" + l + "\n")
	}
	b.WriteString("*** End Patch\n")
	return b.String()
}

// TextDeltas returns the output_text chunks r streams: Deltas if set, else
// Text split before each run of white space.
func (r Reply) TextDeltas() []string {
	if r.Deltas != nil {
		return r.Deltas
	}
	return splitWords(r.Text)
}

// FullText returns the assistant text of r, the concatenation of its deltas.
func (r Reply) FullText() string { return strings.Join(r.TextDeltas(), "") }

func (r Reply) usage() Usage {
	if r.Usage == (Usage{}) {
		return DefaultUsage
	}
	return r.Usage
}

var wordRE = regexp.MustCompile(`\s*\S+`)

// splitWords splits s into chunks that each start with their leading white
// space, so that joining them gives s back.
func splitWords(s string) []string {
	if s == "" {
		return nil
	}
	parts := wordRE.FindAllString(s, -1)
	if len(parts) == 0 {
		return []string{s}
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	parts[len(parts)-1] += s[n:]
	return parts
}

// errorCode returns the OpenAI error type and code for an HTTP status.
func errorCode(status int) (typ, code string) {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error", "bad_request"
	case http.StatusUnauthorized:
		return "invalid_request_error", "invalid_api_key"
	case http.StatusTooManyRequests:
		return "rate_limit_exceeded", "rate_limit_exceeded"
	}
	return "server_error", "server_error"
}

// errorMessage returns the default error message for an HTTP status.
func errorMessage(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "fake bad request"
	case http.StatusUnauthorized:
		return "fake invalid api key"
	case http.StatusTooManyRequests:
		return "fake rate limit"
	case http.StatusInternalServerError:
		return "fake internal server error"
	}
	return "fake error " + http.StatusText(status)
}
