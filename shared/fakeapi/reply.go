package fakeapi

import (
	"net/http"
	"regexp"
	"strings"
	"time"
)

// Reply is what the fake model answers to one request. The zero Reply is a
// successful message with no content blocks.
//
// Content blocks are emitted in the order thinking, text, tool_use; each part
// is left out when empty.
type Reply struct {
	// Status, when 400 or above, answers with that HTTP status and an
	// Anthropic error body instead of a message.
	Status int
	// ErrorType overrides the error type derived from Status (e.g. "api_error").
	ErrorType string
	// ErrorMessage overrides the default error message.
	ErrorMessage string
	// RetryAfter sets the retry-after header of an error reply, in whole
	// seconds. A 429 without it gets "1".
	RetryAfter time.Duration

	// Thinking, when set, is sent as a thinking block (split into words)
	// followed by a fake signature.
	Thinking string
	// Text is the assistant text, streamed as one delta per word. Ignored
	// when Deltas is set.
	Text string
	// Deltas are the exact text_delta chunks to stream; the text is their
	// concatenation.
	Deltas []string
	// Delay is waited before every text delta.
	Delay time.Duration
	// ToolUse, when set, is sent as a tool_use block after the text.
	ToolUse *ToolUse
	// StopReason overrides the stop reason ("tool_use" when ToolUse is set,
	// else "end_turn").
	StopReason string

	// Fault breaks the stream after its first text delta (or after
	// message_start when there is none).
	Fault Fault

	// InputTokens and OutputTokens override the reported usage (12 and 20).
	InputTokens, OutputTokens int
}

// ToolUse is a tool call made by the fake model.
type ToolUse struct {
	// ID defaults to toolu_fake_NNN_0, NNN being the message number.
	ID string
	// Name is the tool name, e.g. "Bash".
	Name string
	// Input is marshalled to JSON; nil becomes {}.
	Input any
}

// Fault is a way for a streaming reply to go wrong.
type Fault int

const (
	// NoFault streams the whole message.
	NoFault Fault = iota
	// Stall stops sending and holds the request open until the client
	// cancels it or the server closes.
	Stall
	// ErrorEvent sends an SSE "error" event (overloaded_error) and ends the
	// body without message_stop.
	ErrorEvent
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
	case ErrorEvent:
		return "error-event"
	case Cut:
		return "cut"
	}
	return "fault(?)"
}

const (
	defaultInputTokens  = 12
	defaultOutputTokens = 20
	// fakeSignature is the signature of every thinking block.
	fakeSignature = "c2lnbmF0dXJlLWZha2U="
)

// TextDeltas returns the text_delta chunks r streams: Deltas if set, else
// Text split before each run of white space.
func (r Reply) TextDeltas() []string {
	if r.Deltas != nil {
		return r.Deltas
	}
	return splitWords(r.Text)
}

// FullText returns the assistant text of r, the concatenation of its deltas.
func (r Reply) FullText() string {
	return strings.Join(r.TextDeltas(), "")
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

// errorType returns the Anthropic error type for an HTTP status.
func errorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	return "api_error"
}

// errorMessage returns the default error message for an HTTP status.
func errorMessage(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "Bad request (fake)"
	case http.StatusUnauthorized:
		return "Invalid API key (fake)"
	case http.StatusTooManyRequests:
		return "Rate limited (fake)"
	case http.StatusInternalServerError:
		return "Internal server error (fake)"
	case 529:
		return "Overloaded (fake)"
	}
	return "Error " + http.StatusText(status) + " (fake)"
}
