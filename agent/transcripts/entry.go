package transcripts

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/betcode-dev/betcode/agent/claude"
)

// Entry types that carry conversation.
const (
	typeUser      = "user"
	typeAssistant = "assistant"
)

// PromptPreviewRunes is how long a prompt or message preview may be, in
// runes, before it is cut and "…" appended.
const PromptPreviewRunes = 200

// entry is the part of a transcript line this package reads.
type entry struct {
	Type             string            `json:"type"`
	SessionID        string            `json:"sessionId"`
	CWD              string            `json:"cwd"`
	Timestamp        string            `json:"timestamp"`
	IsSidechain      bool              `json:"isSidechain"`
	IsMeta           bool              `json:"isMeta"`
	IsCompactSummary bool              `json:"isCompactSummary"`
	APIError         bool              `json:"isApiErrorMessage"`
	APIErrorSnake    bool              `json:"is_api_error_message"`
	Message          claude.APIMessage `json:"message"`
}

// decodeEntry parses one line. A field of an unexpected JSON type does not
// reject the line (the CLI adds and changes fields between versions); it is
// left zero. A line that is not a JSON object with a "type" is an error.
func decodeEntry(line []byte) (*entry, error) {
	if len(line) == 0 || line[0] != '{' {
		return nil, errors.New("not a JSON object")
	}
	var e entry
	if err := json.Unmarshal(line, &e); err != nil {
		var typeErr *json.UnmarshalTypeError
		if !errors.As(err, &typeErr) {
			return nil, fmt.Errorf("decode entry: %w", err)
		}
	}
	if e.Type == "" {
		return nil, errors.New("entry has no type")
	}
	return &e, nil
}

// time returns the entry's timestamp, or the zero time.
func (e *entry) time() time.Time {
	t, err := time.Parse(time.RFC3339Nano, e.Timestamp)
	if err != nil {
		return time.Time{}
	}
	return t
}

// mainThread reports whether the entry belongs to the session's own
// conversation rather than to a subagent's.
func (e *entry) mainThread() bool { return !e.IsSidechain }

// blocks returns the message's content blocks, or nil when it has none or
// they don't decode.
func (e *entry) blocks() []claude.ContentBlock {
	b, err := e.Message.Blocks()
	if err != nil {
		return nil
	}
	return b
}

// prompt returns what the user typed, when e is a user prompt: a main-thread
// user entry with text (not tool results) that isn't CLI-generated. See the
// package doc for what is left out.
func (e *entry) prompt(blocks []claude.ContentBlock) (string, bool) {
	if e.Type != typeUser || !e.mainThread() || e.IsMeta || e.IsCompactSummary {
		return "", false
	}
	var parts []string
	for _, b := range blocks {
		switch b.Type {
		case "tool_result":
			// Text next to tool results is the CLI's, mid-turn.
			return "", false
		case "text":
			parts = append(parts, b.Text)
		case "image":
			parts = append(parts, "[image]")
		case "document":
			parts = append(parts, "[document]")
		}
	}
	return cleanPrompt(strings.Join(parts, "\n"))
}

// cleanPrompt strips what the CLI wraps around or inserts into a prompt and
// reports whether anything the user typed is left.
func cleanPrompt(s string) (string, bool) {
	s = strings.TrimSpace(stripTag(s, "system-reminder"))
	switch {
	case s == "":
		return "", false
	case strings.HasPrefix(s, "[Request interrupted by user"):
		return "", false
	case strings.HasPrefix(s, "<local-command-"), strings.HasPrefix(s, "<bash-stdout>"), strings.HasPrefix(s, "<bash-stderr>"):
		return "", false
	}
	if name, ok := tagContent(s, "command-name"); ok {
		args, _ := tagContent(s, "command-args")
		return strings.TrimSpace(name + " " + args), true
	}
	if cmd, ok := tagContent(s, "bash-input"); ok {
		return "! " + cmd, true
	}
	return s, true
}

// stripTag removes every <tag>…</tag> from s.
func stripTag(s, tag string) string {
	open, close := "<"+tag+">", "</"+tag+">"
	for {
		i := strings.Index(s, open)
		if i < 0 {
			return s
		}
		j := strings.Index(s[i:], close)
		if j < 0 {
			return s[:i]
		}
		s = s[:i] + s[i+j+len(close):]
	}
}

// tagContent returns the text between the first <tag> and </tag>.
func tagContent(s, tag string) (string, bool) {
	_, after, ok := strings.Cut(s, "<"+tag+">")
	if !ok {
		return "", false
	}
	in, _, ok := strings.Cut(after, "</"+tag+">")
	return strings.TrimSpace(in), ok
}

// assistantText joins the text blocks of an assistant message.
func assistantText(blocks []claude.ContentBlock) string {
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" && strings.TrimSpace(b.Text) != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// shorten collapses runs of white space to one space and cuts s to n runes,
// marking a cut with "…".
func shorten(s string, n int) string {
	var b strings.Builder
	runes, space := 0, false
	for _, r := range strings.TrimSpace(s) {
		if unicode.IsSpace(r) {
			space = true
			continue
		}
		if space {
			if runes == n {
				return b.String() + "…"
			}
			b.WriteByte(' ')
			runes++
			space = false
		}
		if runes == n {
			return b.String() + "…"
		}
		b.WriteRune(r)
		runes++
	}
	return b.String()
}
