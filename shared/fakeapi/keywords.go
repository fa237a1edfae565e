package fakeapi

import (
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// Texts and tool inputs of the keyword replies, exported so tests can compare
// against them.
const (
	// HelloText answers a prompt without keywords.
	HelloText = "Hello from the fake model."
	// ToolResultPrefix starts the answer to a tool result; the result's text
	// follows.
	ToolResultPrefix = "Tool result received: "
	// ToolCommand is the Bash command of the RUNTOOL reply.
	ToolCommand = "touch created-by-tool.txt && echo done"
	// ToolFile is the file ToolCommand creates in the working directory.
	ToolFile = "created-by-tool.txt"
	// ThinkingText is the thinking of the THINK reply.
	ThinkingText = "Let me think about it."
	// ThoughtText is the text that follows ThinkingText.
	ThoughtText = "I thought about it."
	// SideText answers requests that offer no tools (see Request.MainLoop).
	SideText = "Fake side reply."
	// SummaryText answers compaction requests (see Request.Compaction).
	SummaryText = "<analysis>Fake analysis.</analysis>\n<summary>Fake summary of the conversation.</summary>"
	// BrokenText is the text of the BREAK and CUT replies.
	BrokenText = "This stream breaks."
)

// AskInput is the AskUserQuestion input of the ASK reply.
var AskInput = map[string]any{"questions": []any{
	map[string]any{
		"question": "Which database should we use?", "header": "Database", "multiSelect": false,
		"options": []any{
			map[string]any{"label": "Postgres", "description": "Relational, robust"},
			map[string]any{"label": "SQLite", "description": "Embedded, simple"},
		},
	},
	map[string]any{
		"question": "Which features do you want?", "header": "Features", "multiSelect": true,
		"options": []any{
			map[string]any{"label": "Auth", "description": "Login"},
			map[string]any{"label": "Search", "description": "Full text"},
			map[string]any{"label": "Billing", "description": "Payments"},
		},
	},
}}

// TodoInput is the TodoWrite input of the TODO reply.
var TodoInput = map[string]any{"todos": []any{
	map[string]any{"content": "Write the parser", "status": "completed", "activeForm": "Writing the parser"},
	map[string]any{"content": "Add tests", "status": "in_progress", "activeForm": "Adding tests"},
	map[string]any{"content": "Update docs", "status": "pending", "activeForm": "Updating docs"},
}}

// Streams of the LONG and SLOW keywords.
const (
	longDeltas = 200
	slowDeltas = 50
	slowDelay  = 200 * time.Millisecond
)

var (
	errRE    = regexp.MustCompile(`\bERR([1-5][0-9][0-9])\b`)
	streamRE = regexp.MustCompile(`\bSTREAM\s+([0-9]+)\b`)
)

func keyword(word string) *regexp.Regexp { return regexp.MustCompile(`\b` + word + `\b`) }

var (
	stallRE   = keyword("STALL")
	breakRE   = keyword("BREAK")
	cutRE     = keyword("CUT")
	slowRE    = keyword("SLOW")
	longRE    = keyword("LONG")
	thinkRE   = keyword("THINK")
	askRE     = keyword("ASK")
	todoRE    = keyword("TODO")
	runtoolRE = keyword("RUNTOOL")
)

// KeywordReply is the default responder. It answers a compaction with
// SummaryText, a tool result with ToolResultPrefix and the result, a side
// request with SideText, and a prompt according to its first keyword (see
// the package doc).
func KeywordReply(req *Request) Reply {
	if req.Compaction() {
		return Reply{Text: SummaryText}
	}
	if tr := req.LastToolResult(); tr != nil {
		return Reply{Text: ToolResultPrefix + tr.Content}
	}
	if !req.MainLoop() {
		return Reply{Text: SideText}
	}
	p := req.Prompt()
	if m := errRE.FindStringSubmatch(p); m != nil {
		status, _ := strconv.Atoi(m[1])
		return Reply{Status: status}
	}
	switch {
	case stallRE.MatchString(p):
		return Reply{Text: "This stream stalls.", Fault: Stall}
	case breakRE.MatchString(p):
		return Reply{Text: BrokenText, Fault: ErrorEvent}
	case cutRE.MatchString(p):
		return Reply{Text: BrokenText, Fault: Cut}
	case slowRE.MatchString(p):
		return Reply{Deltas: NumberedDeltas(slowDeltas), Delay: slowDelay}
	}
	if m := streamRE.FindStringSubmatch(p); m != nil {
		n, _ := strconv.Atoi(m[1])
		return Reply{Deltas: NumberedDeltas(n)}
	}
	switch {
	case longRE.MatchString(p):
		return Reply{Deltas: NumberedDeltas(longDeltas)}
	case thinkRE.MatchString(p):
		return Reply{Thinking: ThinkingText, Text: ThoughtText}
	case askRE.MatchString(p):
		return Reply{ToolUse: &ToolUse{Name: "AskUserQuestion", Input: AskInput}}
	case todoRE.MatchString(p):
		return Reply{ToolUse: &ToolUse{Name: "TodoWrite", Input: TodoInput}}
	case runtoolRE.MatchString(p):
		return Reply{ToolUse: &ToolUse{Name: "Bash", Input: map[string]any{
			"command": ToolCommand, "description": "Create a file",
		}}}
	}
	return Reply{Text: HelloText}
}

// NumberedDeltas returns n text deltas "w0 ", "w1 ", ....
func NumberedDeltas(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("w%d ", i)
	}
	return out
}
