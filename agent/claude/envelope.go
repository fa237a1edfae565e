package claude

import (
	"encoding/json"
	"fmt"
)

// Message types the CLI writes on stdout (the "type" key).
const (
	TypeSystem          = "system"
	TypeStreamEvent     = "stream_event"
	TypeAssistant       = "assistant"
	TypeUser            = "user"
	TypeResult          = "result"
	TypeControlRequest  = "control_request"
	TypeControlResponse = "control_response"
	TypeControlCancel   = "control_cancel_request"
	TypeKeepAlive       = "keep_alive"
)

// Envelope is one decoded stdout line. Only the keys a host dispatches on are
// decoded eagerly; the rest stay raw so that unknown fields and types survive
// untouched. Raw is the whole line and is owned by the Envelope.
type Envelope struct {
	Type            string          `json:"type"`
	Subtype         string          `json:"subtype,omitempty"`
	SessionID       string          `json:"session_id,omitempty"`
	ParentToolUseID *string         `json:"parent_tool_use_id,omitempty"`
	UUID            string          `json:"uuid,omitempty"`
	Event           json.RawMessage `json:"event,omitempty"`      // stream_event
	Message         json.RawMessage `json:"message,omitempty"`    // assistant, user
	RequestID       string          `json:"request_id,omitempty"` // control_request, control_cancel_request
	Request         json.RawMessage `json:"request,omitempty"`    // control_request
	Response        json.RawMessage `json:"response,omitempty"`   // control_response

	Raw []byte `json:"-"`
}

// Parent returns the parent_tool_use_id, or "" for main-thread lines.
func (e *Envelope) Parent() string {
	if e.ParentToolUseID == nil {
		return ""
	}
	return *e.ParentToolUseID
}

// DecodeLine parses one stdout line. It rejects lines that are not a JSON
// object or that carry no "type".
func DecodeLine(line []byte) (*Envelope, error) {
	if len(line) == 0 || line[0] != '{' {
		return nil, fmt.Errorf("not a JSON object: %s", preview(line))
	}
	var env Envelope
	if err := json.Unmarshal(line, &env); err != nil {
		return nil, fmt.Errorf("decode line %s: %w", preview(line), err)
	}
	if env.Type == "" {
		return nil, fmt.Errorf("line has no type: %s", preview(line))
	}
	env.Raw = line
	return &env, nil
}

func preview(b []byte) string {
	const max = 80
	if len(b) > max {
		return fmt.Sprintf("%q…(%d bytes)", b[:max], len(b))
	}
	return fmt.Sprintf("%q", b)
}

// StreamEvent is the raw Messages API SSE event inside a stream_event line.
type StreamEvent struct {
	Type         string `json:"type"`
	Index        int    `json:"index"`
	ContentBlock *struct {
		Type  string          `json:"type"`
		ID    string          `json:"id,omitempty"`
		Name  string          `json:"name,omitempty"`
		Input json.RawMessage `json:"input,omitempty"`
	} `json:"content_block,omitempty"`
	Delta *struct {
		Type        string `json:"type"`
		Text        string `json:"text,omitempty"`
		PartialJSON string `json:"partial_json,omitempty"`
		Thinking    string `json:"thinking,omitempty"`
		StopReason  string `json:"stop_reason,omitempty"`
	} `json:"delta,omitempty"`
	Message *struct {
		ID    string `json:"id"`
		Model string `json:"model"`
	} `json:"message,omitempty"`
}

// ContentBlock is one block of an assistant or user message.
type ContentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"` // tool_result: string or blocks
	IsError   bool            `json:"is_error,omitempty"`
}

// APIMessage is the "message" of an assistant or user line.
type APIMessage struct {
	ID      string          `json:"id,omitempty"`
	Role    string          `json:"role"`
	Model   string          `json:"model,omitempty"`
	Content json.RawMessage `json:"content"` // string or []ContentBlock
}

// Blocks returns the content blocks; a plain string content becomes one text
// block.
func (m *APIMessage) Blocks() ([]ContentBlock, error) {
	if len(m.Content) == 0 {
		return nil, nil
	}
	if m.Content[0] == '"' {
		var s string
		if err := json.Unmarshal(m.Content, &s); err != nil {
			return nil, fmt.Errorf("decode string content: %w", err)
		}
		return []ContentBlock{{Type: "text", Text: s}}, nil
	}
	var blocks []ContentBlock
	if err := json.Unmarshal(m.Content, &blocks); err != nil {
		return nil, fmt.Errorf("decode content blocks: %w", err)
	}
	return blocks, nil
}

// ToolResultText flattens a tool_result content (string or text blocks).
func ToolResultText(content json.RawMessage) string {
	if len(content) == 0 {
		return ""
	}
	if content[0] == '"' {
		var s string
		_ = json.Unmarshal(content, &s)
		return s
	}
	var blocks []ContentBlock
	if err := json.Unmarshal(content, &blocks); err != nil {
		return string(content)
	}
	var out []byte
	for _, b := range blocks {
		if b.Type == "text" {
			out = append(out, b.Text...)
		}
	}
	return string(out)
}

// Usage is the token usage of a turn.
type Usage struct {
	InputTokens              uint32 `json:"input_tokens"`
	OutputTokens             uint32 `json:"output_tokens"`
	CacheCreationInputTokens uint32 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     uint32 `json:"cache_read_input_tokens"`
}

// Result is a decoded "result" line: the end of a turn.
type Result struct {
	Subtype        string                     `json:"subtype"`
	IsError        bool                       `json:"is_error"`
	Result         *string                    `json:"result"`
	Errors         []string                   `json:"errors"`
	StopReason     *string                    `json:"stop_reason"`
	TerminalReason string                     `json:"terminal_reason"`
	NumTurns       int                        `json:"num_turns"`
	DurationMS     uint32                     `json:"duration_ms"`
	TotalCostUSD   float64                    `json:"total_cost_usd"`
	Usage          Usage                      `json:"usage"`
	ModelUsage     map[string]json.RawMessage `json:"modelUsage"`
	SinceLast      map[string]struct {
		CostUSD float64 `json:"costUSD"`
	} `json:"model_usage_since_last_result"`
	APIErrorStatus *int `json:"api_error_status"`
}

// ControlRequest is the "request" of a control_request line sent by the CLI.
type ControlRequest struct {
	Subtype               string          `json:"subtype"`
	ToolName              string          `json:"tool_name,omitempty"`
	DisplayName           string          `json:"display_name,omitempty"`
	Input                 json.RawMessage `json:"input,omitempty"`
	Description           string          `json:"description,omitempty"`
	PermissionSuggestions json.RawMessage `json:"permission_suggestions,omitempty"`
	BlockedPath           string          `json:"blocked_path,omitempty"`
	DecisionReason        string          `json:"decision_reason,omitempty"`
	ToolUseID             string          `json:"tool_use_id,omitempty"`
	AgentID               string          `json:"agent_id,omitempty"`
}
