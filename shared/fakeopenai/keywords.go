package fakeopenai

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
	// ToolResultPrefix starts the answer to a tool output; the output follows.
	ToolResultPrefix = "Tool result received: "
	// ReasoningText is the reasoning summary of the THINK reply.
	ReasoningText = "Considering how to greet the user."
	// ThoughtText is the text that follows ReasoningText.
	ThoughtText = "I thought about it."
	// ShellCommand is the command of the SHELL reply.
	ShellCommand = "echo hi-from-shell > shell.txt; echo hi-from-shell"
	// ShellFile is the file ShellCommand creates in the working directory.
	ShellFile = "shell.txt"
	// ShellOutput is what ShellCommand prints.
	ShellOutput = "hi-from-shell\n"
	// EscalateCommand is the command of the ESCALATE reply.
	EscalateCommand = "echo escalated"
	// EscalateReason is the justification of the ESCALATE reply.
	EscalateReason = "Fake model wants to run this outside the sandbox"
	// PatchFile is the file the PATCH reply adds.
	PatchFile = "hello.txt"
	// PatchLine is the content of PatchFile.
	PatchLine = "hello from patch"
	// BrokenText is the text of the MALFORMED and CUT replies.
	BrokenText = "This stream breaks."
)

// Streams of the SLOW keyword.
const (
	slowDeltas = 50
	slowDelay  = 200 * time.Millisecond
)

var (
	errRE    = regexp.MustCompile(`\bERR([1-5][0-9][0-9])\b`)
	streamRE = regexp.MustCompile(`\bSTREAM\s+([0-9]+)\b`)
)

func keyword(word string) *regexp.Regexp { return regexp.MustCompile(`\b` + word + `\b`) }

var (
	stallRE     = keyword("STALL")
	malformedRE = keyword("MALFORMED")
	cutRE       = keyword("CUT")
	slowRE      = keyword("SLOW")
	thinkRE     = keyword("THINK")
	shellRE     = keyword("SHELL")
	escalateRE  = keyword("ESCALATE")
	patchRE     = keyword("PATCH")
)

// KeywordReply is the default responder. It answers a tool output with
// ToolResultPrefix and the output, and a prompt according to its first
// keyword (see the package doc).
func KeywordReply(req *Request) Reply {
	if out := req.LastToolOutput(); out != nil {
		return Reply{Text: ToolResultPrefix + out.Output}
	}
	p := req.Prompt()
	if m := errRE.FindStringSubmatch(p); m != nil {
		status, _ := strconv.Atoi(m[1])
		return Reply{Status: status}
	}
	switch {
	case stallRE.MatchString(p):
		return Reply{Text: "This stream stalls.", Fault: Stall}
	case malformedRE.MatchString(p):
		return Reply{Text: BrokenText, Fault: Malformed}
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
	case thinkRE.MatchString(p):
		return Reply{Reasoning: ReasoningText, Text: ThoughtText}
	case escalateRE.MatchString(p):
		return Reply{Call: ShellCall(EscalateCommand, true, EscalateReason)}
	case shellRE.MatchString(p):
		return Reply{Call: ShellCall(ShellCommand, false, "")}
	case patchRE.MatchString(p):
		return Reply{Call: PatchCall(AddFilePatch(PatchFile, PatchLine))}
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
