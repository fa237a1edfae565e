package fakeapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// Request is one parsed POST /v1/messages request.
type Request struct {
	// Seq numbers the /v1/messages requests from 1; the reply's message id
	// is msg_fake_<Seq>.
	Seq int
	// Header is a copy of the request headers. The CLI sends its session id
	// as X-Claude-Code-Session-Id.
	Header http.Header
	// Model is the requested model, e.g. "claude-opus-5-5".
	Model string
	// Stream reports whether SSE streaming was asked for.
	Stream bool
	// MaxTokens is the max_tokens field.
	MaxTokens int
	// System is the text of the system prompt blocks, joined by newlines.
	System string
	// Tools are the names of the tools offered to the model.
	Tools []string
	// Messages is the conversation, in order. The CLI also sends messages
	// with role "system" (environment notes) between user turns.
	Messages []Message
	// Body is the raw JSON body.
	Body []byte
}

// Message is one conversation message of a request.
type Message struct {
	// Role is "user", "assistant" or "system".
	Role string
	// Text joins the message's text blocks with newlines, leaving out the
	// <system-reminder> sections the CLI adds, so it is what the user typed
	// (several prompts when the CLI merged them) or what the model wrote.
	Text string
	// Blocks are all content blocks; a string content becomes one text block.
	Blocks []Block
}

// Block is one content block of a message.
type Block struct {
	// Type is e.g. "text", "thinking", "tool_use" or "tool_result".
	Type string
	// Text is set for text blocks, and for thinking blocks (their thinking).
	Text string
	// ID and Name identify a tool_use block; Input is its input.
	ID, Name string
	Input    json.RawMessage
	// ToolUseID, Content and IsError describe a tool_result block; Content
	// joins its text parts, without <system-reminder> sections.
	ToolUseID string
	Content   string
	IsError   bool
}

// wireRequest is the subset of a Messages API request body that is parsed.
type wireRequest struct {
	Model     string          `json:"model"`
	Stream    bool            `json:"stream"`
	MaxTokens int             `json:"max_tokens"`
	System    json.RawMessage `json:"system"`
	Tools     []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

type wireBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// ParseRequest parses a Messages API request body.
func ParseRequest(body []byte) (*Request, error) {
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("parse messages request: %w", err)
	}
	req := &Request{Model: w.Model, Stream: w.Stream, MaxTokens: w.MaxTokens, Body: body}
	system, err := parseBlocks(w.System)
	if err != nil {
		return nil, fmt.Errorf("parse system prompt: %w", err)
	}
	req.System = joinText(system)
	for _, t := range w.Tools {
		req.Tools = append(req.Tools, t.Name)
	}
	for i, m := range w.Messages {
		blocks, err := parseBlocks(m.Content)
		if err != nil {
			return nil, fmt.Errorf("parse message %d: %w", i, err)
		}
		req.Messages = append(req.Messages, Message{Role: m.Role, Text: joinText(blocks), Blocks: blocks})
	}
	return req, nil
}

// parseBlocks parses content that is either a string or an array of blocks.
func parseBlocks(raw json.RawMessage) ([]Block, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []Block{{Type: "text", Text: s}}, nil
	}
	var ws []wireBlock
	if err := json.Unmarshal(raw, &ws); err != nil {
		return nil, err
	}
	blocks := make([]Block, 0, len(ws))
	for _, w := range ws {
		b := Block{Type: w.Type, Text: w.Text, ID: w.ID, Name: w.Name, Input: w.Input, ToolUseID: w.ToolUseID, IsError: w.IsError}
		if w.Type == "thinking" {
			b.Text = w.Thinking
		}
		if w.Type == "tool_result" {
			inner, err := parseBlocks(w.Content)
			if err != nil {
				return nil, fmt.Errorf("tool_result content: %w", err)
			}
			b.Content = joinText(inner)
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// reminderRE matches the <system-reminder> sections the CLI adds to user
// text and tool results.
var reminderRE = regexp.MustCompile(`(?s)\s*<system-reminder>.*?</system-reminder>\s*`)

// StripReminders removes the CLI's <system-reminder> sections from s.
func StripReminders(s string) string {
	if !strings.Contains(s, "<system-reminder>") {
		return s
	}
	return strings.TrimSpace(reminderRE.ReplaceAllString(s, "\n"))
}

// texts returns the text of each text block, without reminders, leaving out
// blocks that held nothing else.
func texts(blocks []Block) []string {
	var parts []string
	for _, b := range blocks {
		if b.Type != "text" {
			continue
		}
		if t := StripReminders(b.Text); t != "" {
			parts = append(parts, t)
		}
	}
	return parts
}

func joinText(blocks []Block) string { return strings.Join(texts(blocks), "\n") }

// MainLoop reports whether the request comes from the agent loop: it offers
// tools and is not a compaction. Side requests of the CLI (the model check of
// set_model, ...) offer no tools. Only main-loop requests take queued replies.
func (r *Request) MainLoop() bool { return len(r.Tools) > 0 && !r.Compaction() }

// compactionMarker is part of the CLI's summary instruction for /compact and
// automatic compaction.
const compactionMarker = "create a detailed summary of the conversation so far"

// Compaction reports whether the request asks the model to summarise the
// conversation (/compact), which the CLI sends as a last user text block.
func (r *Request) Compaction() bool {
	return strings.Contains(r.Prompt(), compactionMarker)
}

// Conversation returns the user and assistant messages, without the CLI's
// role "system" messages.
func (r *Request) Conversation() []Message {
	var out []Message
	for _, m := range r.Messages {
		if m.Role == "user" || m.Role == "assistant" {
			out = append(out, m)
		}
	}
	return out
}

// Prompt returns the last text block of the last user message, without
// reminders, or "" when the conversation does not end with user text. After a
// failed turn the CLI merges the failed prompt and the next one into one
// message; Prompt is then the newer one.
func (r *Request) Prompt() string {
	conv := r.Conversation()
	if len(conv) == 0 || conv[len(conv)-1].Role != "user" {
		return ""
	}
	parts := texts(conv[len(conv)-1].Blocks)
	if len(parts) == 0 {
		return ""
	}
	return parts[len(parts)-1]
}

// LastToolResult returns the first tool_result block of the last user
// message, or nil when it has none (the model is then answering a prompt).
func (r *Request) LastToolResult() *Block {
	conv := r.Conversation()
	if len(conv) == 0 || conv[len(conv)-1].Role != "user" {
		return nil
	}
	last := conv[len(conv)-1]
	for i := range last.Blocks {
		if last.Blocks[i].Type == "tool_result" {
			return &last.Blocks[i]
		}
	}
	return nil
}
