package fakeopenai

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Request is one parsed POST /v1/responses request.
type Request struct {
	// Seq numbers the /v1/responses requests from 1; the reply's ids carry it.
	Seq int
	// Header is a copy of the request headers. Codex sends the thread id as
	// session-id and thread-id.
	Header http.Header
	// Model is the requested model, e.g. "gpt-5.5".
	Model string
	// Stream reports whether SSE streaming was asked for.
	Stream bool
	// Tools are the names of the tools offered to the model.
	Tools []string
	// Input is the conversation, in order: developer messages (the system
	// prompt), user messages, the model's earlier items and tool outputs.
	Input []Item
	// Body is the raw JSON body.
	Body []byte
}

// Item is one element of a request's input.
type Item struct {
	// Type is e.g. "message", "reasoning", "function_call",
	// "function_call_output", "custom_tool_call" or
	// "custom_tool_call_output".
	Type string
	// Role is "developer", "user" or "assistant" for messages.
	Role string
	// Text joins a message's text parts with newlines.
	Text string
	// CallID, Name, Arguments and Input describe a call; Output is a call
	// output's text.
	CallID, Name, Arguments, Input, Output string
	// Images are the image_url of a message's input_image parts (data:
	// URLs for inline images), in order.
	Images []string
}

// wireRequest is the subset of a Responses API request body that is parsed.
type wireRequest struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
	Tools  []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tools"`
	Input []wireItem `json:"input"`
}

type wireItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Input     string          `json:"input"`
	Output    json.RawMessage `json:"output"`
}

// ParseRequest parses a Responses API request body.
func ParseRequest(body []byte) (*Request, error) {
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("parse responses request: %w", err)
	}
	req := &Request{Model: w.Model, Stream: w.Stream, Body: body}
	for _, t := range w.Tools {
		name := t.Name
		if name == "" {
			name = t.Type // web_search and other built-in tools have no name
		}
		req.Tools = append(req.Tools, name)
	}
	for i, wi := range w.Input {
		it := Item{Type: wi.Type, Role: wi.Role, CallID: wi.CallID, Name: wi.Name, Arguments: wi.Arguments, Input: wi.Input}
		if it.Type == "" && wi.Role != "" {
			it.Type = "message"
		}
		var err error
		if it.Text, err = contentText(wi.Content); err != nil {
			return nil, fmt.Errorf("parse input %d content: %w", i, err)
		}
		it.Images = contentImages(wi.Content)
		if it.Output, err = contentText(wi.Output); err != nil {
			return nil, fmt.Errorf("parse input %d output: %w", i, err)
		}
		req.Input = append(req.Input, it)
	}
	return req, nil
}

// contentText returns the text of content that is a string or an array of
// parts with a "text" field, joined by newlines.
func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", err
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		if p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}

// contentImages returns the image_url of content's input_image parts; nil
// for string content or content without images.
func contentImages(raw json.RawMessage) []string {
	var parts []struct {
		Type     string `json:"type"`
		ImageURL string `json:"image_url"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return nil
	}
	var out []string
	for _, p := range parts {
		if p.Type == "input_image" && p.ImageURL != "" {
			out = append(out, p.ImageURL)
		}
	}
	return out
}

// Images returns the images of every user message, in order.
func (r *Request) Images() []string {
	var out []string
	for _, it := range r.Input {
		if it.Type == "message" && it.Role == "user" {
			out = append(out, it.Images...)
		}
	}
	return out
}

// contextPrefix starts the user messages Codex adds itself (environment,
// permissions), which are not prompts.
const contextPrefix = "<"

// Prompt returns the text of the last user message that the user typed (not
// one of Codex's <environment_context> messages), or "" when the input
// ends with something else than user messages.
func (r *Request) Prompt() string {
	for i := len(r.Input) - 1; i >= 0; i-- {
		it := r.Input[i]
		if it.Type != "message" || it.Role != "user" {
			return ""
		}
		if !strings.HasPrefix(strings.TrimSpace(it.Text), contextPrefix) {
			return it.Text
		}
	}
	return ""
}

// Prompts returns the text of every user message the user typed, in order.
func (r *Request) Prompts() []string {
	var out []string
	for _, it := range r.Input {
		if it.Type == "message" && it.Role == "user" && !strings.HasPrefix(strings.TrimSpace(it.Text), contextPrefix) {
			out = append(out, it.Text)
		}
	}
	return out
}

// LastToolOutput returns the last input item when it is a tool call's output
// (function_call_output or custom_tool_call_output), else nil.
func (r *Request) LastToolOutput() *Item {
	if len(r.Input) == 0 {
		return nil
	}
	last := &r.Input[len(r.Input)-1]
	if last.Type == "function_call_output" || last.Type == "custom_tool_call_output" {
		return last
	}
	return nil
}
